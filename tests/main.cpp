// main() of trit_tests and trit_gpu_tests: GoogleTest's, plus the exit code ctest reads as
// "skipped". ctest runs one test suite per process (tests/CMakeLists.txt) and sets
// TRIT_ALL_SKIPPED_EXIT_CODE; when every test the process ran was skipped (a GPU suite without a
// GPU) and none failed, the process exits with that code instead of 0. Run by hand, the binaries
// exit as GoogleTest's own main does.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
    testing::InitGoogleTest(&argc, argv);
    const int rc = RUN_ALL_TESTS();
    const char* skipped_code = std::getenv("TRIT_ALL_SKIPPED_EXIT_CODE");
    const testing::UnitTest& unit = *testing::UnitTest::GetInstance();
    if (rc == 0 && skipped_code != nullptr && unit.test_to_run_count() > 0 &&
        unit.skipped_test_count() == unit.test_to_run_count())
        return std::atoi(skipped_code);
    return rc;
}
