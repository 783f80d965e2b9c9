// Division of a non-negative int32 by a divisor fixed at launch: a multiply-high and a shift instead
// of the ~20-instruction integer division, for the GEMV kernels' column -> scale-group index.
// Valid for 0 <= n < 2^31 and 1 <= divisor < 2^31 (the round-up method, as CUTLASS's FastDivmod).
// Host and device compile it (TRIT_HD), so host tests check it against `/`.
#pragma once

#include <cstdint>

#include "exporters/formats/common.h"

namespace trit::kernels {

struct FastDiv {
    uint32_t divisor = 1;
    uint32_t multiplier = 0;  // 0: divisor 1, the quotient is n
    uint32_t shift = 0;

    FastDiv() = default;
    explicit FastDiv(uint32_t d) : divisor(d) {
        if (d <= 1) return;
        uint32_t l = 0;  // ceil(log2(d))
        while ((uint64_t{1} << l) < d) ++l;
        const uint64_t p = 31 + l;
        multiplier = static_cast<uint32_t>(((uint64_t{1} << p) + d - 1) / d);
        shift = static_cast<uint32_t>(p - 32);
    }

    TRIT_HD uint32_t div(uint32_t n) const {
        if (multiplier == 0) return n;
#ifdef __CUDA_ARCH__
        return __umulhi(n, multiplier) >> shift;
#else
        return static_cast<uint32_t>((uint64_t{n} * multiplier) >> 32) >> shift;
#endif
    }
};

}  // namespace trit::kernels
