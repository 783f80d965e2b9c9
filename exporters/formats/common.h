// Shared pieces of the packed weight-format spec headers (tern2, tern24, bin1, bt): TRIT_HD, size
// arithmetic and the int32 accumulator limits. Includes only <cstdint>/<cstddef>, like every spec
// header, so host code and CUDA kernels compile the same definitions.
#pragma once

#include <cstddef>
#include <cstdint>

// Marks the small inline helpers of the spec headers callable from host and device code.
#ifdef __CUDACC__
#define TRIT_HD __host__ __device__
#else
#define TRIT_HD
#endif

namespace trit::formats {

// ceil(a / b) for a >= 0, b >= 1; no a + b - 1 that could overflow for a huge b (a group size).
TRIT_HD constexpr int64_t ceil_div(int64_t a, int64_t b) {
    return a / b + (a % b != 0 ? 1 : 0);
}

// Largest |x| of an int8 activation code. act_int8 never emits -128, but the products take any
// int8, so the overflow bound below uses 128.
constexpr int64_t kActCodeMaxAbs = 128;

// Every product accumulates one scale group of int8 x times integer weight codes into an int32:
// |sum| <= group_len * 128 * max|code| must stay <= INT32_MAX. The largest group length (columns
// summed into one accumulator) for codes bounded by max_abs_code (>= 1): 16777215 for the ternary
// and binary formats, 419430 for bt d = 4 (|code| <= 40).
TRIT_HD constexpr int64_t acc_max_group_len(int64_t max_abs_code) {
    return int64_t{2147483647} / (kActCodeMaxAbs * max_abs_code);
}

// Scale groups along k of the products' accumulators: G = ceil(k / group), group >= 1; a group
// >= k is one group. Group g covers columns [g * group, min(k, (g + 1) * group)).
TRIT_HD constexpr int64_t acc_num_groups(int64_t k, int64_t group) {
    return ceil_div(k, group);
}

}  // namespace trit::formats
