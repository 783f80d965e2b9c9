// Host-only helpers shared by the formats' C++ references (not by kernels): argument checks with
// one wording, and the product loop of formats whose every byte decodes, through a table, to U
// consecutive codes (tern2, bin1). Kept out of the spec headers so those stay device-compilable.
#pragma once

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "exporters/formats/common.h"

namespace trit::formats::detail {

inline void check_shape(const char* who, int64_t n, int64_t k) {
    TRIT_CHECK(n >= 1 && k >= 1, who, ": n and k must be >= 1 (got n=", n, ", k=", k, ")");
}

// A product's sizes and pointers; `packed` is the format's (first) packed array.
inline void check_product(const char* who, const void* packed, int64_t n, int64_t k, const void* x,
                          int64_t m, int64_t group, const void* acc) {
    check_shape(who, n, k);
    TRIT_CHECK(m >= 1 && group >= 1, who, ": m and group must be >= 1 (got m=", m, ", group=", group,
               ")");
    TRIT_CHECK(packed != nullptr && x != nullptr && acc != nullptr, who,
               ": packed, x and acc must be non-null (n=", n, ", k=", k, ", m=", m, ")");
}

// Only the int32 products: float accumulators have no such bound.
inline void check_int32_range(const char* who, int64_t k, int64_t group, int64_t max_abs_code) {
    const int64_t len = std::min(group, k), limit = acc_max_group_len(max_abs_code);
    TRIT_CHECK(len <= limit, who, ": a scale group of ", len,
               " columns could overflow the int32 accumulator (128 * ", max_abs_code, " * ", len,
               " > 2^31 - 1); use group <= ", limit);
}

// acc (m, n, G) for rows of `row_bytes` bytes where table[byte] holds the byte's U codes in
// column order. Per (i, j, scale group) the bytes overlapping the group are walked in increasing
// column order; every column multiplies, zero codes included, so a non-finite x gives NaN as in
// the dense forward. Padding columns (>= k) are never read.
template <int64_t U, typename Table, typename X, typename Acc>
void byte_unit_gemm(const uint8_t* packed, int64_t row_bytes, const Table& table, int64_t n,
                    int64_t k, const X* x, int64_t m, int64_t group, Acc* acc) {
    const int64_t groups = acc_num_groups(k, group);
    for (int64_t i = 0; i < m; ++i) {
        const X* xi = x + i * k;
        for (int64_t j = 0; j < n; ++j) {
            const uint8_t* row = packed + j * row_bytes;
            Acc* out = acc + (i * n + j) * groups;
            for (int64_t g = 0; g < groups; ++g) {
                const int64_t c0 = g * group, c1 = std::min(k, c0 + group);
                Acc sum = 0;
                for (int64_t u = c0 / U; u * U < c1; ++u) {
                    const auto& codes = table[row[u]];
                    const int64_t base = u * U;
                    if (base >= c0 && base + U <= c1) {  // a whole unit: constant trip count
                        for (int64_t p = 0; p < U; ++p)
                            sum += static_cast<Acc>(xi[base + p]) * static_cast<Acc>(codes[p]);
                    } else {
                        for (int64_t c = std::max(c0, base); c < std::min(c1, base + U); ++c)
                            sum += static_cast<Acc>(xi[c]) * static_cast<Acc>(codes[c - base]);
                    }
                }
                out[g] = sum;
            }
        }
    }
}

}  // namespace trit::formats::detail
