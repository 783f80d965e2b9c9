// GPU tests of kernels::act_int8_quantize and its LibTorch adapter: codes and scale bits equal
// act_int8_quantize_ref over a shape table (vector and scalar paths), special rows and tensors.
// Device tests skip where no GPU is visible; host-side contract checks run everywhere.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/act_int8.h"
#include "core/error.h"
#include "kernels/act_int8.h"
#include "kernels/act_int8_torch.h"
#include "kernels/cuda_check.h"
#include "tests/gpu/gpu_test_util.h"

#if defined(__has_include)
#if __has_include(<c10/cuda/impl/cuda_cmake_macros.h>)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#define TRIT_TEST_TORCH_HAS_CUDA 1
#endif
#endif

namespace {

using trit::kernels::act_int8_quantize;

using trit::gputest::DeviceBuffer;
using trit::gputest::RequiresGpu;

uint32_t bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

// Compares codes and scale bits; reports the count and the first mismatches with indices.
void expect_same(const std::vector<float>& x, int64_t cols, const std::vector<int8_t>& q,
                 const std::vector<float>& scale, const std::vector<int8_t>& q_ref,
                 const std::vector<float>& scale_ref) {
    constexpr int kShow = 8;
    std::ostringstream msg;
    int64_t bad = 0;
    for (size_t i = 0; i < q.size(); ++i) {
        if (q[i] == q_ref[i]) continue;
        if (bad++ < kShow) {
            msg << "  q[" << i / cols << ", " << i % cols << "]: got " << int(q[i]) << ", want "
                << int(q_ref[i]) << " (x=" << x[i] << ")\n";
        }
    }
    for (size_t r = 0; r < scale.size(); ++r) {
        if (bits(scale[r]) == bits(scale_ref[r])) continue;
        if (bad++ < kShow) {
            msg << "  scale[" << r << "]: got " << scale[r] << " (0x" << std::hex << bits(scale[r])
                << "), want " << scale_ref[r] << " (0x" << bits(scale_ref[r]) << std::dec << ")\n";
        }
    }
    EXPECT_EQ(bad, 0) << "mismatches vs act_int8_quantize_ref, first " << kShow << ":\n"
                      << msg.str();
}

// Runs the kernel on x placed at d_x + x_off (and q at d_q + q_off, to force the scalar path)
// and checks it against the reference.
void check_against_ref(const std::vector<float>& x, int64_t rows, int64_t cols, int64_t x_off,
                       int64_t q_off) {
    const size_t n = x.size();
    std::vector<int8_t> q_ref(n);
    std::vector<float> scale_ref(rows);
    trit::act_int8_quantize_ref(x.data(), rows, cols, q_ref.data(), scale_ref.data());

    DeviceBuffer<float> d_x(n + x_off);
    DeviceBuffer<int8_t> d_q(n + q_off);
    DeviceBuffer<float> d_scale(rows);
    cudaStream_t stream = nullptr;
    TRIT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    TRIT_CUDA_CHECK(cudaMemcpyAsync(d_x.get() + x_off, x.data(), n * sizeof(float),
                                    cudaMemcpyHostToDevice, stream));
    act_int8_quantize(d_x.get() + x_off, rows, cols, d_q.get() + q_off, d_scale.get(), stream);
    std::vector<int8_t> q(n);
    std::vector<float> scale(rows);
    TRIT_CUDA_CHECK(
        cudaMemcpyAsync(q.data(), d_q.get() + q_off, n, cudaMemcpyDeviceToHost, stream));
    TRIT_CUDA_CHECK(cudaMemcpyAsync(scale.data(), d_scale.get(), rows * sizeof(float),
                                    cudaMemcpyDeviceToHost, stream));
    TRIT_CUDA_CHECK(cudaStreamSynchronize(stream));
    TRIT_CUDA_CHECK(cudaStreamDestroy(stream));
    expect_same(x, cols, q, scale, q_ref, scale_ref);
}

// Uniform [-1, 1], rows scaled by 1, 1e-3, 1e3 and 1e-7 in turn (the last below kAct8Eps).
std::vector<float> random_rows(int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    constexpr float kMag[] = {1.0f, 1e-3f, 1e3f, 1e-7f};
    std::vector<float> x(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < cols; ++j)
            x[r * cols + j] = uni(rng) * kMag[r % 4];
    }
    return x;
}

struct Shape {
    int64_t rows, cols;
    int64_t x_off = 0;  // in floats; 1 breaks 16-byte alignment -> scalar path
    int64_t q_off = 0;  // in bytes; 1 breaks 4-byte alignment -> scalar path
};

void PrintTo(const Shape& s, std::ostream* os) {
    *os << "rows=" << s.rows << " cols=" << s.cols << " x_off=" << s.x_off << " q_off=" << s.q_off;
}

std::string shape_name(const testing::TestParamInfo<Shape>& info) {
    const Shape& s = info.param;
    std::string name = std::to_string(s.rows) + "x" + std::to_string(s.cols);
    if (s.x_off) name += "_xoff" + std::to_string(s.x_off);
    if (s.q_off) name += "_qoff" + std::to_string(s.q_off);
    return name;
}

class ActInt8Shapes : public RequiresGpu<testing::TestWithParam<Shape>> {};

TEST_P(ActInt8Shapes, MatchesReferenceBitExact) {
    const Shape s = GetParam();
    const auto x = random_rows(s.rows, s.cols, 1234u + uint32_t(s.rows * 131 + s.cols));
    check_against_ref(x, s.rows, s.cols, s.x_off, s.q_off);
}

INSTANTIATE_TEST_SUITE_P(Table, ActInt8Shapes,
                         testing::Values(Shape{1, 1}, Shape{1, 7}, Shape{3, 784}, Shape{5, 4095},
                                         Shape{17, 2560}, Shape{128, 4096}, Shape{2, 14336},
                                         Shape{1, 100000}, Shape{4, 4096, 1, 0},
                                         Shape{3, 784, 0, 1}, Shape{2, 100000, 1, 0}),
                         shape_name);

class ActInt8Gpu : public RequiresGpu<testing::Test> {};

TEST_F(ActInt8Gpu, SpecialRowsMatchReference) {
    constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
    constexpr float kInf = std::numeric_limits<float>::infinity();
    constexpr int64_t kCols = 8;
    const std::vector<float> x = {
        127.0f,  0.5f,     1.5f,  2.5f,  -0.5f, -1.5f, -2.5f, 126.5f,  // exact ties
        0.5f,    -1.0f,    0.25f, 0.0f,  0.0f,  0.0f,  0.0f,  0.0f,    // golden row
        0.0f,    -0.0f,    0.0f,  0.0f,  0.0f,  0.0f,  0.0f,  0.0f,    // eps floor
        1e-40f,  -3e-39f,  1e-6f, 0.0f,  0.0f,  0.0f,  0.0f,  2e-6f,   // subnormal / below eps
        FLT_MAX, -FLT_MAX, 1.0f,  1e30f, 0.0f,  0.0f,  0.0f,  -1.0f,   // huge
        1.0f,    2.0f,     3.0f,  kNan,  4.0f,  5.0f,  6.0f,  7.0f,    // NaN
        kInf,    1.0f,     0.0f,  0.0f,  0.0f,  0.0f,  0.0f,  0.0f,    // +Inf
        1.0f,    1.0f,     1.0f,  1.0f,  1.0f,  1.0f,  1.0f,  -kInf,   // -Inf
    };
    const int64_t rows = int64_t(x.size()) / kCols;
    for (const auto& [x_off, q_off] : {std::pair<int64_t, int64_t>{0, 0}, {1, 0}, {0, 1}}) {
        SCOPED_TRACE("x_off=" + std::to_string(x_off) + " q_off=" + std::to_string(q_off));
        check_against_ref(x, rows, kCols, x_off, q_off);
    }
}

TEST_F(ActInt8Gpu, NonFiniteDeepInLongRows) {
    // The poison must cross warps and the shared-memory stage of the reduction.
    constexpr int64_t kRows = 4, kCols = 14336;
    auto x = random_rows(kRows, kCols, 99u);
    x[1 * kCols + 9999] = std::numeric_limits<float>::quiet_NaN();
    x[2 * kCols + kCols - 1] = -std::numeric_limits<float>::infinity();
    check_against_ref(x, kRows, kCols, 0, 0);
    check_against_ref(x, kRows, kCols, 1, 0);
}

// Host-side contract: checked before any CUDA call, so these run without a device.
TEST(ActInt8Contract, RejectsBadShapesPointersAndAlignment) {
    alignas(16) float x[8] = {};
    alignas(16) int8_t q[8] = {};
    alignas(16) float s[2] = {};
    const auto message = [&](int64_t rows, int64_t cols, const float* xp, int8_t* qp, float* sp) {
        try {
            act_int8_quantize(xp, rows, cols, qp, sp, nullptr);
        } catch (const trit::Error& e) {
            return std::string(e.what());
        }
        return std::string("<no trit::Error>");
    };
    EXPECT_NE(message(0, 4, x, q, s).find("rows=0, cols=4"), std::string::npos);
    EXPECT_NE(message(1, 0, x, q, s).find("rows=1, cols=0"), std::string::npos);
    EXPECT_NE(message(-2, 4, x, q, s).find("rows=-2"), std::string::npos);
    EXPECT_NE(message(1, 4, nullptr, q, s).find("non-null"), std::string::npos);
    EXPECT_NE(message(1, 4, x, nullptr, s).find("non-null"), std::string::npos);
    EXPECT_NE(message(1, 4, x, q, nullptr).find("non-null"), std::string::npos);
    EXPECT_NE(message(int64_t(1) << 31, 1, x, q, s).find("exceeds 2^31 - 1"), std::string::npos);
    EXPECT_NE(message(int64_t(1) << 30, int64_t(1) << 40, x, q, s).find("overflows"),
              std::string::npos);
    const auto* odd = reinterpret_cast<const float*>(reinterpret_cast<const char*>(x) + 2);
    EXPECT_NE(message(1, 4, odd, q, s).find("aligned"), std::string::npos);
}

TEST(ActInt8Torch, RejectsNonCudaAndUndefinedTensors) {
    EXPECT_THROW(trit::kernels::act_int8_quantize(torch::ones({2, 4})), trit::Error);
    EXPECT_THROW(trit::kernels::act_int8_quantize(torch::Tensor()), trit::Error);
}

class ActInt8TorchGpu : public testing::Test {
  protected:
    void SetUp() override {
        if (!torch::cuda::is_available()) GTEST_SKIP() << "torch::cuda::is_available() is false";
    }
};

// Adapter result vs the reference on the contiguous CPU copy of x.
void check_tensor(const torch::Tensor& x) {
    const auto [q, scale] = trit::kernels::act_int8_quantize(x);
    ASSERT_EQ(q.sizes(), x.sizes());
    ASSERT_EQ(q.scalar_type(), torch::kInt8);
    ASSERT_EQ(scale.sizes(), x.sizes().slice(0, x.dim() - 1));
    ASSERT_EQ(scale.scalar_type(), torch::kFloat32);
    const torch::Tensor xc = x.contiguous().cpu();
    const int64_t cols = x.size(-1), rows = xc.numel() / cols;
    const std::vector<float> xv(xc.data_ptr<float>(), xc.data_ptr<float>() + xc.numel());
    std::vector<int8_t> q_ref(xv.size());
    std::vector<float> scale_ref(rows);
    trit::act_int8_quantize_ref(xv.data(), rows, cols, q_ref.data(), scale_ref.data());
    const torch::Tensor qc = q.cpu().contiguous(), sc = scale.cpu().contiguous();
    expect_same(xv, cols,
                std::vector<int8_t>(qc.data_ptr<int8_t>(), qc.data_ptr<int8_t>() + qc.numel()),
                std::vector<float>(sc.data_ptr<float>(), sc.data_ptr<float>() + sc.numel()), q_ref,
                scale_ref);
}

TEST_F(ActInt8TorchGpu, MatchesReferenceOnTensors) {
    torch::manual_seed(7);
    const auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32);
    check_tensor(torch::rand({2, 3, 4096}, opts) * 2 - 1);          // (B, T, C)
    check_tensor(torch::rand({33, 64}, opts).t());                  // non-contiguous
    check_tensor(torch::rand({7}, opts) * 2 - 1);                   // 1-D: scale 0-dim
    check_tensor(torch::rand({5, 4100}, opts).narrow(1, 1, 4096));  // strided view
    // Contiguous but 4 bytes past a 16-byte boundary: the adapter keeps it, the kernel goes scalar.
    check_tensor(torch::rand({1 + 8 * 4096}, opts).narrow(0, 1, 8 * 4096).view({8, 4096}));
}

TEST_F(ActInt8TorchGpu, EmptyBatchAndBadInputs) {
    const auto opts = torch::TensorOptions().device(torch::kCUDA);
    const auto [q, scale] = trit::kernels::act_int8_quantize(torch::empty({0, 16}, opts));
    EXPECT_EQ(q.sizes().vec(), (std::vector<int64_t>{0, 16}));
    EXPECT_EQ(scale.sizes().vec(), (std::vector<int64_t>{0}));
    EXPECT_THROW(trit::kernels::act_int8_quantize(torch::empty({4, 0}, opts)), trit::Error);
    EXPECT_THROW(trit::kernels::act_int8_quantize(torch::ones({4}, opts.dtype(torch::kFloat64))),
                 trit::Error);
    EXPECT_THROW(trit::kernels::act_int8_quantize(torch::ones({}, opts)), trit::Error);
}

#ifdef TRIT_TEST_TORCH_HAS_CUDA
TEST_F(ActInt8TorchGpu, RunsOnTheCurrentStream) {
    const auto opts = torch::TensorOptions().device(torch::kCUDA);
    const torch::Tensor x = torch::rand({64, 4096}, opts) - 0.5;
    c10::cuda::getCurrentCUDAStream().synchronize();  // x is ready before `side` reads it
    c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    torch::Tensor q, scale;
    {
        const c10::cuda::CUDAStreamGuard guard(side);
        std::tie(q, scale) = trit::kernels::act_int8_quantize(x);
        side.synchronize();  // the launch went to `side`; syncing it alone makes results visible
    }
    check_tensor(x);
    const auto [q2, scale2] = trit::kernels::act_int8_quantize(x);
    EXPECT_TRUE(torch::equal(q.cpu(), q2.cpu()));
    EXPECT_TRUE(torch::equal(scale.cpu(), scale2.cpu()));
}
#endif

}  // namespace
