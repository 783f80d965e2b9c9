// bin1 CPU reference: pack, unpack, validate and the integer/float products (spec in bin1.h).
// Scalar on purpose, it defines the result bit for bit; the products decode the packed bytes
// (table built from the header's helpers), never via unpack, so they read the layout kernels read.
#include "exporters/formats/bin1.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace trit::formats {
namespace {

void check_shape(const char* who, int64_t n, int64_t k) {
    TRIT_CHECK(n >= 1 && k >= 1, who, ": n and k must be >= 1 (got n=", n, ", k=", k, ")");
}

void check_product(const char* who, const uint8_t* packed, int64_t n, int64_t k, const void* x,
                   int64_t m, int64_t group, const void* acc) {
    check_shape(who, n, k);
    TRIT_CHECK(m >= 1 && group >= 1, who, ": m and group must be >= 1 (got m=", m,
               ", group=", group, ")");
    TRIT_CHECK(packed != nullptr && x != nullptr && acc != nullptr, who,
               ": packed, x and acc must be non-null (n=", n, ", k=", k, ", m=", m, ")");
}

// Only the int32 products: the float accumulators have no such bound.
void check_int32_range(const char* who, int64_t k, int64_t group) {
    const int64_t len = std::min(group, k);
    TRIT_CHECK(len <= acc_max_group_len(1), who, ": a scale group of ", len,
               " columns could overflow the int32 accumulator (128 * ", len,
               " > 2^31 - 1); use group <= ", acc_max_group_len(1));
}

void validate(const char* who, const uint8_t* packed, int64_t n, int64_t k) {
    const int64_t rb = bin1_row_bytes(k);
    const int used = static_cast<int>(k - (rb - 1) * kBin1CodesPerByte);  // bits of the last byte
    for (int64_t r = 0; r < n; ++r) {
        const uint8_t last = packed[r * rb + rb - 1];
        for (int j = used; j < kBin1CodesPerByte; ++j) {
            TRIT_CHECK(bin1_bit(last, j) == 0, who, ": row ", r, ", byte ", rb - 1,
                       ": padding bit ", j, " (column ", (rb - 1) * kBin1CodesPerByte + j,
                       " >= k = ", k, ") is 1, expected 0");
        }
    }
}

// Codes of the 8 bits of a byte, from the header's bin1_bit/bin1_decode: one lookup per byte
// keeps the reference fast enough for full-size test products.
using ByteCodes = std::array<std::array<int8_t, kBin1CodesPerByte>, 256>;
constexpr ByteCodes make_byte_codes() {
    ByteCodes table{};
    for (int b = 0; b < 256; ++b) {
        for (int j = 0; j < kBin1CodesPerByte; ++j) {
            table[b][j] = static_cast<int8_t>(bin1_decode(bin1_bit(static_cast<uint8_t>(b), j)));
        }
    }
    return table;
}
constexpr ByteCodes kByteCodes = make_byte_codes();

// Shared loop of the int32 and float products: per (i, j, scale group), walk the bytes that
// overlap it, decode each byte's 8 codes once, and accumulate in increasing column order.
template <typename X, typename Acc>
void gemm(const uint8_t* packed, int64_t n, int64_t k, const X* x, int64_t m, int64_t group,
          Acc* acc) {
    constexpr int64_t kU = kBin1CodesPerByte;
    const int64_t rb = bin1_row_bytes(k);
    const int64_t groups = acc_num_groups(k, group);
    for (int64_t i = 0; i < m; ++i) {
        const X* xi = x + i * k;
        for (int64_t j = 0; j < n; ++j) {
            const uint8_t* row = packed + j * rb;
            Acc* out = acc + (i * n + j) * groups;
            for (int64_t g = 0; g < groups; ++g) {
                const int64_t c0 = g * group;
                const int64_t c1 = std::min(k, c0 + group);
                Acc sum = 0;
                for (int64_t u = c0 / kU; u * kU < c1; ++u) {
                    const auto& codes = kByteCodes[row[u]];
                    const int64_t base = u * kU;
                    // A whole unit has a constant trip count; padding bits are never read.
                    if (base >= c0 && base + kU <= c1) {
                        for (int p = 0; p < kU; ++p) {
                            sum += static_cast<Acc>(xi[base + p]) * static_cast<Acc>(codes[p]);
                        }
                    } else {
                        for (int64_t c = std::max(c0, base); c < std::min(c1, base + kU); ++c) {
                            sum += static_cast<Acc>(xi[c]) * static_cast<Acc>(codes[c - base]);
                        }
                    }
                }
                out[g] = sum;
            }
        }
    }
}

}  // namespace

void bin1_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* packed) {
    check_shape("bin1_pack", n, k);
    TRIT_CHECK(codes != nullptr && packed != nullptr,
               "bin1_pack: codes and packed must be non-null (n=", n, ", k=", k, ")");
    const int64_t rb = bin1_row_bytes(k);
    for (int64_t r = 0; r < n; ++r) {
        const int8_t* src = codes + r * k;
        uint8_t* row = packed + r * rb;
        std::fill(row, row + rb, uint8_t{0});  // padding bits stay 0
        for (int64_t c = 0; c < k; ++c) {
            const int code = src[c];
            TRIT_CHECK(code == -1 || code == 1, "bin1_pack: code ", code, " at (row ", r, ", col ",
                       c, ") is not in {-1, +1} (bin1 has no zero; use tern2 or tern24)");
            row[c / kBin1CodesPerByte] |=
                static_cast<uint8_t>(bin1_encode(code) << (c % kBin1CodesPerByte));
        }
    }
}

void bin1_validate(const uint8_t* packed, int64_t n, int64_t k) {
    check_shape("bin1_validate", n, k);
    TRIT_CHECK(packed != nullptr, "bin1_validate: packed must be non-null");
    validate("bin1_validate", packed, n, k);
}

void bin1_unpack(const uint8_t* packed, int64_t n, int64_t k, int8_t* codes) {
    check_shape("bin1_unpack", n, k);
    TRIT_CHECK(packed != nullptr && codes != nullptr,
               "bin1_unpack: packed and codes must be non-null (n=", n, ", k=", k, ")");
    validate("bin1_unpack", packed, n, k);
    const int64_t rb = bin1_row_bytes(k);
    for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
            const uint8_t byte = packed[r * rb + c / kBin1CodesPerByte];
            codes[r * k + c] = static_cast<int8_t>(
                bin1_decode(bin1_bit(byte, static_cast<int>(c % kBin1CodesPerByte))));
        }
    }
}

void bin1_gemm_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t m,
                   int64_t group, int32_t* acc) {
    check_product("bin1_gemm_ref", packed, n, k, x, m, group, acc);
    check_int32_range("bin1_gemm_ref", k, group);
    validate("bin1_gemm_ref", packed, n, k);
    gemm(packed, n, k, x, m, group, acc);
}

void bin1_gemv_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t group,
                   int32_t* acc) {
    bin1_gemm_ref(packed, n, k, x, /*m=*/1, group, acc);
}

void bin1_gemm_f32_ref(const uint8_t* packed, int64_t n, int64_t k, const float* x, int64_t m,
                       int64_t group, float* acc) {
    check_product("bin1_gemm_f32_ref", packed, n, k, x, m, group, acc);
    validate("bin1_gemm_f32_ref", packed, n, k);
    gemm(packed, n, k, x, m, group, acc);
}

}  // namespace trit::formats
