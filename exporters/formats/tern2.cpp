// tern2 CPU reference: pack, unpack, validate and the integer/float products (spec in tern2.h).
// Scalar on purpose, it defines the result bit for bit; the products decode the packed bytes
// (table built from the header's helpers), never via unpack, so they read the layout kernels read.
#include "exporters/formats/tern2.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "exporters/formats/reference.h"

namespace trit::formats {
namespace {


void validate(const char* who, const uint8_t* packed, int64_t n, int64_t k) {
    const int64_t rb = tern2_row_bytes(k);
    for (int64_t r = 0; r < n; ++r) {
        const uint8_t* row = packed + r * rb;
        for (int64_t b = 0; b < rb; ++b) {
            for (int j = 0; j < kTern2CodesPerByte; ++j) {
                const int64_t col = b * kTern2CodesPerByte + j;
                const int field = tern2_field(row[b], j);
                if (col >= k) {
                    TRIT_CHECK(field == kTern2FieldZero, who, ": row ", r, ", byte ", b,
                               ": padding field ", j, " (bits ", 2 * j, "..", 2 * j + 1,
                               ", column ", col, " >= k = ", k, ") is ", field,
                               ", expected 0 (00)");
                } else {
                    TRIT_CHECK(field != kTern2FieldInvalid, who, ": row ", r, ", byte ", b,
                               ": field ", j, " (bits ", 2 * j, "..", 2 * j + 1, ", column ", col,
                               ") is 11, which is not a tern2 code (expected 00 = 0, 01 = +1, "
                               "10 = -1)");
                }
            }
        }
    }
}

// Codes of the 4 fields of a byte, from the header's tern2_field/tern2_decode: one lookup per
// byte keeps the reference fast enough for full-size test products. Entries for bytes holding a
// field 11 are never read (validate runs first).
using ByteCodes = std::array<std::array<int8_t, kTern2CodesPerByte>, 256>;
constexpr ByteCodes make_byte_codes() {
    ByteCodes table{};
    for (int b = 0; b < 256; ++b) {
        for (int j = 0; j < kTern2CodesPerByte; ++j) {
            table[b][j] =
                static_cast<int8_t>(tern2_decode(tern2_field(static_cast<uint8_t>(b), j)));
        }
    }
    return table;
}
constexpr ByteCodes kByteCodes = make_byte_codes();


}  // namespace

void tern2_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* packed) {
    detail::check_shape("tern2_pack", n, k);
    TRIT_CHECK(codes != nullptr && packed != nullptr,
               "tern2_pack: codes and packed must be non-null (n=", n, ", k=", k, ")");
    const int64_t rb = tern2_row_bytes(k);
    for (int64_t r = 0; r < n; ++r) {
        const int8_t* src = codes + r * k;
        uint8_t* row = packed + r * rb;
        std::fill(row, row + rb, uint8_t{0});  // padding fields stay 00
        for (int64_t c = 0; c < k; ++c) {
            const int code = src[c];
            TRIT_CHECK(code >= -1 && code <= 1, "tern2_pack: code ", code, " at (row ", r, ", col ",
                       c, ") is not in {-1, 0, +1}");
            row[c / kTern2CodesPerByte] |= static_cast<uint8_t>(
                tern2_encode(code) << (kTern2BitsPerCode * (c % kTern2CodesPerByte)));
        }
    }
}

void tern2_validate(const uint8_t* packed, int64_t n, int64_t k) {
    detail::check_shape("tern2_validate", n, k);
    TRIT_CHECK(packed != nullptr, "tern2_validate: packed must be non-null");
    validate("tern2_validate", packed, n, k);
}

void tern2_unpack(const uint8_t* packed, int64_t n, int64_t k, int8_t* codes) {
    detail::check_shape("tern2_unpack", n, k);
    TRIT_CHECK(packed != nullptr && codes != nullptr,
               "tern2_unpack: packed and codes must be non-null (n=", n, ", k=", k, ")");
    validate("tern2_unpack", packed, n, k);
    const int64_t rb = tern2_row_bytes(k);
    for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
            const uint8_t byte = packed[r * rb + c / kTern2CodesPerByte];
            codes[r * k + c] = static_cast<int8_t>(
                tern2_decode(tern2_field(byte, static_cast<int>(c % kTern2CodesPerByte))));
        }
    }
}

void tern2_gemm_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t m,
                    int64_t group, int32_t* acc) {
    detail::check_product("tern2_gemm_ref", packed, n, k, x, m, group, acc);
    detail::check_int32_range("tern2_gemm_ref", k, group, 1);
    validate("tern2_gemm_ref", packed, n, k);
    detail::byte_unit_gemm<kTern2CodesPerByte>(packed, tern2_row_bytes(k), kByteCodes, n, k, x, m, group, acc);
}

void tern2_gemv_ref(const uint8_t* packed, int64_t n, int64_t k, const int8_t* x, int64_t group,
                    int32_t* acc) {
    tern2_gemm_ref(packed, n, k, x, /*m=*/1, group, acc);
}

void tern2_gemm_f32_ref(const uint8_t* packed, int64_t n, int64_t k, const float* x, int64_t m,
                        int64_t group, float* acc) {
    detail::check_product("tern2_gemm_f32_ref", packed, n, k, x, m, group, acc);
    validate("tern2_gemm_f32_ref", packed, n, k);
    detail::byte_unit_gemm<kTern2CodesPerByte>(packed, tern2_row_bytes(k), kByteCodes, n, k, x, m, group, acc);
}

}  // namespace trit::formats
