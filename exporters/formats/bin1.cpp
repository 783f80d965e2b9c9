// bin1 CPU reference: pack, unpack, validate and the integer/float products (spec in bin1.h).
// Scalar on purpose, it defines the result bit for bit; the products decode the packed bytes
// (table built from the header's helpers), never via unpack, so they read the layout kernels read.
#include "exporters/formats/bin1.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "exporters/formats/reference.h"

namespace trit::formats {
namespace {


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


}  // namespace

void bin1_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* packed) {
    detail::check_shape("bin1_pack", n, k);
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
    detail::check_shape("bin1_validate", n, k);
    TRIT_CHECK(packed != nullptr, "bin1_validate: packed must be non-null");
    validate("bin1_validate", packed, n, k);
}

void bin1_unpack(const uint8_t* packed, int64_t n, int64_t k, int8_t* codes) {
    detail::check_shape("bin1_unpack", n, k);
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
    detail::check_product("bin1_gemm_ref", packed, n, k, x, m, group, acc);
    detail::check_int32_range("bin1_gemm_ref", k, group, 1);
    validate("bin1_gemm_ref", packed, n, k);
    detail::byte_unit_gemm<kBin1CodesPerByte>(packed, bin1_row_bytes(k), kByteCodes, n, k, x, m, group, acc);
}

void bin1_gemv_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t group,
                   int32_t* acc) {
    bin1_gemm_ref(packed, n, k, x, /*m=*/1, group, acc);
}

void bin1_gemm_f32_ref(const uint8_t* packed, int64_t n, int64_t k, const float* x, int64_t m,
                       int64_t group, float* acc) {
    detail::check_product("bin1_gemm_f32_ref", packed, n, k, x, m, group, acc);
    validate("bin1_gemm_f32_ref", packed, n, k);
    detail::byte_unit_gemm<kBin1CodesPerByte>(packed, bin1_row_bytes(k), kByteCodes, n, k, x, m, group, acc);
}

}  // namespace trit::formats
