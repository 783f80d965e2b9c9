// tern24 CPU reference: pack, unpack, validate and the integer/float products (spec in tern24.h).
// Scalar on purpose, it defines the result bit for bit; the products decode each 4-column group's
// bitmap and sign pair from the packed arrays (table built from tern24_decode), never via unpack.
#include "exporters/formats/tern24.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "exporters/formats/reference.h"

namespace trit::formats {
namespace {

// Codes of a 4-column group by [bitmap][sign pair], from the header's tern24_decode: one lookup
// per group keeps the reference fast enough for full-size test products. Entries for invalid
// groups are never read (validate runs first).
using GroupCodes = std::array<std::array<std::array<int8_t, kTern24GroupSize>, 4>, 16>;
constexpr GroupCodes make_group_codes() {
    GroupCodes table{};
    for (int bitmap = 0; bitmap < 16; ++bitmap) {
        for (int pair = 0; pair < 4; ++pair) {
            for (int p = 0; p < kTern24GroupSize; ++p) {
                table[bitmap][pair][p] = static_cast<int8_t>(tern24_decode(bitmap, pair, p));
            }
        }
    }
    return table;
}
constexpr GroupCodes kGroupCodes = make_group_codes();


void check_product(const char* who, const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k,
                   const void* x, int64_t m, int64_t group, const void* acc) {
    detail::check_shape(who, n, k);
    TRIT_CHECK(m >= 1 && group >= 1, who, ": m and group must be >= 1 (got m=", m,
               ", group=", group, ")");
    TRIT_CHECK(mask != nullptr && signs != nullptr && x != nullptr && acc != nullptr, who,
               ": mask, signs, x and acc must be non-null (n=", n, ", k=", k, ", m=", m, ")");
}


void validate(const char* who, const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k) {
    const int64_t groups = tern24_groups(k);
    const int64_t mrb = tern24_mask_row_bytes(k);
    const int64_t srb = tern24_signs_row_bytes(k);
    for (int64_t r = 0; r < n; ++r) {
        const uint8_t* mrow = mask + r * mrb;
        const uint8_t* srow = signs + r * srb;
        for (int64_t g = 0; g < groups; ++g) {
            const int bitmap = tern24_bitmap(mrow, g);
            const int pair = tern24_sign_pair(srow, g);
            const int nonzeros = tern24_popcount4(bitmap);
            const int64_t mb = g / kTern24GroupsPerMaskByte;
            const char* nibble = g % kTern24GroupsPerMaskByte == 0 ? "low" : "high";
            TRIT_CHECK(nonzeros <= kTern24MaxNonzeros, who, ": row ", r, ", group ", g,
                       " (mask byte ", mb, ", ", nibble, " nibble): bitmap 0x", std::hex, bitmap,
                       std::dec, " marks ", nonzeros, " non-zeros, expected at most 2 (2:4)");
            for (int p = 0; p < kTern24GroupSize; ++p) {
                const int64_t col = g * kTern24GroupSize + p;
                TRIT_CHECK(col < k || ((bitmap >> p) & 1) == 0, who, ": row ", r, ", group ", g,
                           " (mask byte ", mb, ", ", nibble, " nibble): bitmap bit ", p,
                           " marks column ", col, " >= k = ", k, ", expected 0 past the row end");
            }
            TRIT_CHECK((pair >> nonzeros) == 0, who, ": row ", r, ", group ", g, " (signs byte ",
                       g / kTern24GroupsPerSignsByte, ", bits ",
                       2 * (g % kTern24GroupsPerSignsByte), "..",
                       2 * (g % kTern24GroupsPerSignsByte) + 1, "): sign pair 0b", (pair >> 1),
                       (pair & 1), " has a bit set past the group's ", nonzeros,
                       " non-zero(s); unused sign bits must be 0");
        }
        // Padding: the nibble / sign pairs past the last group in the last byte of each array.
        const int mask_pad = mrow[mrb - 1] >> (4 * (groups - (mrb - 1) * kTern24GroupsPerMaskByte));
        TRIT_CHECK(mask_pad == 0, who, ": row ", r, ", mask byte ", mrb - 1,
                   ": the high nibble is padding (no group ", groups, " with k = ", k,
                   ") and is 0x", std::hex, mask_pad, std::dec, ", expected 0");
        const int used_bits = 2 * static_cast<int>(groups - (srb - 1) * kTern24GroupsPerSignsByte);
        const int signs_pad = used_bits == 8 ? 0 : srow[srb - 1] >> used_bits;
        TRIT_CHECK(signs_pad == 0, who, ": row ", r, ", signs byte ", srb - 1, ": bits ", used_bits,
                   "..7 are padding (past group ", groups - 1, ") and hold 0x", std::hex, signs_pad,
                   std::dec, ", expected 0");
    }
}

// Shared loop of the int32 and float products: per (i, j, scale group), walk the 4-column groups
// that overlap it, decode each group's 4 codes once, and accumulate in increasing column order.
template <typename X, typename Acc>
void gemm(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k, const X* x, int64_t m,
          int64_t group, Acc* acc) {
    constexpr int64_t kU = kTern24GroupSize;
    const int64_t mrb = tern24_mask_row_bytes(k);
    const int64_t srb = tern24_signs_row_bytes(k);
    const int64_t groups = acc_num_groups(k, group);
    for (int64_t i = 0; i < m; ++i) {
        const X* xi = x + i * k;
        for (int64_t j = 0; j < n; ++j) {
            const uint8_t* mrow = mask + j * mrb;
            const uint8_t* srow = signs + j * srb;
            Acc* out = acc + (i * n + j) * groups;
            for (int64_t g = 0; g < groups; ++g) {
                const int64_t c0 = g * group;
                const int64_t c1 = std::min(k, c0 + group);
                Acc sum = 0;
                for (int64_t u = c0 / kU; u * kU < c1; ++u) {
                    const auto& codes =
                        kGroupCodes[tern24_bitmap(mrow, u)][tern24_sign_pair(srow, u)];
                    const int64_t base = u * kU;
                    // Every column multiplies, zero codes included: a non-finite x gives NaN as
                    // in the dense fake-quant forward. A whole unit has a constant trip count.
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

void tern24_pack(const int8_t* codes, int64_t n, int64_t k, uint8_t* mask, uint8_t* signs) {
    detail::check_shape("tern24_pack", n, k);
    TRIT_CHECK(codes != nullptr && mask != nullptr && signs != nullptr,
               "tern24_pack: codes, mask and signs must be non-null (n=", n, ", k=", k, ")");
    const int64_t groups = tern24_groups(k);
    const int64_t mrb = tern24_mask_row_bytes(k);
    const int64_t srb = tern24_signs_row_bytes(k);
    for (int64_t r = 0; r < n; ++r) {
        const int8_t* src = codes + r * k;
        uint8_t* mrow = mask + r * mrb;
        uint8_t* srow = signs + r * srb;
        std::fill(mrow, mrow + mrb, uint8_t{0});  // padding nibble and sign bits stay 0
        std::fill(srow, srow + srb, uint8_t{0});
        for (int64_t g = 0; g < groups; ++g) {
            int bitmap = 0;
            int pair = 0;
            int nonzeros = 0;
            for (int p = 0; p < kTern24GroupSize && g * kTern24GroupSize + p < k; ++p) {
                const int64_t c = g * kTern24GroupSize + p;
                const int code = src[c];
                TRIT_CHECK(code >= -1 && code <= 1, "tern24_pack: code ", code, " at (row ", r,
                           ", col ", c, ") is not in {-1, 0, +1}");
                if (code == 0) continue;
                TRIT_CHECK(nonzeros < kTern24MaxNonzeros, "tern24_pack: row ", r, ", group ", g,
                           " (columns ", g * kTern24GroupSize, "..",
                           std::min(k, (g + 1) * kTern24GroupSize) - 1,
                           ") has more than 2 non-zeros; tern24 needs 2:4 sparsity (prune first)");
                bitmap |= 1 << p;
                pair |= (code < 0 ? 1 : 0) << nonzeros;
                ++nonzeros;
            }
            mrow[g / kTern24GroupsPerMaskByte] |=
                static_cast<uint8_t>(bitmap << (4 * (g % kTern24GroupsPerMaskByte)));
            srow[g / kTern24GroupsPerSignsByte] |=
                static_cast<uint8_t>(pair << (2 * (g % kTern24GroupsPerSignsByte)));
        }
    }
}

void tern24_validate(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k) {
    detail::check_shape("tern24_validate", n, k);
    TRIT_CHECK(mask != nullptr && signs != nullptr,
               "tern24_validate: mask and signs must be non-null");
    validate("tern24_validate", mask, signs, n, k);
}

void tern24_unpack(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k, int8_t* codes) {
    detail::check_shape("tern24_unpack", n, k);
    TRIT_CHECK(mask != nullptr && signs != nullptr && codes != nullptr,
               "tern24_unpack: mask, signs and codes must be non-null (n=", n, ", k=", k, ")");
    validate("tern24_unpack", mask, signs, n, k);
    const int64_t mrb = tern24_mask_row_bytes(k);
    const int64_t srb = tern24_signs_row_bytes(k);
    for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) {
            const int64_t g = c / kTern24GroupSize;
            codes[r * k + c] = static_cast<int8_t>(tern24_decode(
                tern24_bitmap(mask + r * mrb, g), tern24_sign_pair(signs + r * srb, g),
                static_cast<int>(c % kTern24GroupSize)));
        }
    }
}

void tern24_gemm_ref(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k,
                     const int8_t* x, int64_t m, int64_t group, int32_t* acc) {
    check_product("tern24_gemm_ref", mask, signs, n, k, x, m, group, acc);
    detail::check_int32_range("tern24_gemm_ref", k, group, 1);
    validate("tern24_gemm_ref", mask, signs, n, k);
    gemm(mask, signs, n, k, x, m, group, acc);
}

void tern24_gemv_ref(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k,
                     const int8_t* x, int64_t group, int32_t* acc) {
    tern24_gemm_ref(mask, signs, n, k, x, /*m=*/1, group, acc);
}

void tern24_gemm_f32_ref(const uint8_t* mask, const uint8_t* signs, int64_t n, int64_t k,
                         const float* x, int64_t m, int64_t group, float* acc) {
    check_product("tern24_gemm_f32_ref", mask, signs, n, k, x, m, group, acc);
    validate("tern24_gemm_f32_ref", mask, signs, n, k);
    gemm(mask, signs, n, k, x, m, group, acc);
}

}  // namespace trit::formats
