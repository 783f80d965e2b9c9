// tbits CPU reference: pack, unpack, validate and the four int32 products (spec in tbits.h).
// Scalar on purpose, it defines the layout bit for bit; the products read the packed words with
// popcounts (the direct algebra of tbits.h), never via unpack.
#include "exporters/formats/tbits.h"

#include <algorithm>

#include "core/error.h"
#include "exporters/formats/bin1.h"
#include "exporters/formats/reference.h"

namespace trit::formats {
namespace {

int popc(uint32_t v) {
    return __builtin_popcount(v);
}

void check_args(const char* who, const void* in, int64_t rows, int64_t k, const void* out) {
    TRIT_CHECK(rows >= 1 && k >= 1, who, ": rows and k must be >= 1 (got rows=", rows, ", k=", k,
               ")");
    TRIT_CHECK(in != nullptr && out != nullptr, who,
               ": input and output must be non-null (rows=", rows, ", k=", k, ")");
}

// Mask of the used bits of word w of a row (columns < k).
uint32_t used_mask(int64_t w, int64_t k) {
    const int64_t c0 = w * kTbitsWordBits;
    if (c0 + kTbitsWordBits <= k) return ~uint32_t{0};
    if (c0 >= k) return 0;
    return (uint32_t{1} << (k - c0)) - 1;
}

void check_padding(const char* who, const uint32_t* plane, int p, int64_t rows, int64_t k) {
    const int64_t rw = tbits_row_words(k);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t w = tbits_word(k - 1); w < rw; ++w) {
            const uint32_t bad = plane[r * rw + w] & ~used_mask(w, k);
            if (bad == 0) continue;
            const int64_t col = w * kTbitsWordBits + __builtin_ctz(bad);
            TRIT_FAIL(who, ": plane ", p, ", row ", r, ", word ", w, ": padding column ", col,
                      " (>= k = ", k, ") is 1, expected 0");
        }
    }
}

void validate_ternary(const char* who, const uint32_t* planes, int64_t rows, int64_t k) {
    const int64_t rw = tbits_row_words(k), plane = rows * rw;
    check_padding(who, planes, kTbitsPosPlane, rows, k);
    check_padding(who, planes + plane, kTbitsNegPlane, rows, k);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t w = 0; w < rw; ++w) {
            const uint32_t both = planes[r * rw + w] & planes[plane + r * rw + w];
            if (both == 0) continue;
            TRIT_FAIL(who, ": row ", r, ", column ", w * kTbitsWordBits + __builtin_ctz(both),
                      ": set in both the pos and the neg plane (not a ternary code)");
        }
    }
}

// One plane from codes: bit = (code == one); codes must be `one` or `other`.
void pack_plane(const char* who, const int8_t* codes, int64_t rows, int64_t k, int one, int other,
                const char* set, uint32_t* plane) {
    const int64_t rw = tbits_row_words(k);
    std::fill(plane, plane + rows * rw, uint32_t{0});
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < k; ++c) {
            const int code = codes[r * k + c];
            TRIT_CHECK(code == one || code == other, who, ": code ", code, " at (row ", r, ", col ",
                       c, ") is not in ", set);
            if (code == one) plane[r * rw + tbits_word(c)] |= tbits_bit(c);
        }
    }
}

int bit_at(const uint32_t* plane, int64_t rw, int64_t r, int64_t c) {
    return (plane[r * rw + tbits_word(c)] & tbits_bit(c)) != 0 ? 1 : 0;
}

void check_product(const char* who, const void* b, int64_t n, int64_t k, const void* a, int64_t m,
                   const void* acc) {
    detail::check_product(who, b, n, k, a, m, /*group=*/1, acc);
    TRIT_CHECK(k <= kTbitsMaxK, who, ": k=", k, " exceeds 2^30 (m=", m, ", n=", n,
               "; the int32 accumulators hold up to 2k)");
}

// acc[i][j] = term(row i of a, row j of b) summed over the row's words.
template <typename Term>
void word_gemm(int64_t n, int64_t k, int64_t m, int32_t* acc, Term term) {
    const int64_t rw = tbits_row_words(k);
    for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
            int64_t s = 0;
            for (int64_t w = 0; w < rw; ++w)
                s += term(i * rw + w, j * rw + w);
            acc[i * n + j] = static_cast<int32_t>(s);
        }
    }
}

}  // namespace

void tbits_ternary_pack(const int8_t* codes, int64_t rows, int64_t k, uint32_t* planes) {
    check_args("tbits_ternary_pack", codes, rows, k, planes);
    const int64_t rw = tbits_row_words(k), plane = rows * rw;
    std::fill(planes, planes + 2 * plane, uint32_t{0});
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < k; ++c) {
            const int code = codes[r * k + c];
            TRIT_CHECK(code >= -1 && code <= 1, "tbits_ternary_pack: code ", code, " at (row ", r,
                       ", col ", c, ") is not in {-1, 0, +1}");
            if (code == 1) planes[r * rw + tbits_word(c)] |= tbits_bit(c);
            if (code == -1) planes[plane + r * rw + tbits_word(c)] |= tbits_bit(c);
        }
    }
}

void tbits_ternary_validate(const uint32_t* planes, int64_t rows, int64_t k) {
    check_args("tbits_ternary_validate", planes, rows, k, planes);
    validate_ternary("tbits_ternary_validate", planes, rows, k);
}

void tbits_ternary_unpack(const uint32_t* planes, int64_t rows, int64_t k, int8_t* codes) {
    check_args("tbits_ternary_unpack", planes, rows, k, codes);
    validate_ternary("tbits_ternary_unpack", planes, rows, k);
    const int64_t rw = tbits_row_words(k);
    const uint32_t* neg = planes + rows * rw;
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < k; ++c) {
            codes[r * k + c] = static_cast<int8_t>(
                tbits_ternary_decode(bit_at(planes, rw, r, c), bit_at(neg, rw, r, c)));
        }
    }
}

void tbits_bool_pack(const int8_t* codes, int64_t rows, int64_t k, uint32_t* plane) {
    check_args("tbits_bool_pack", codes, rows, k, plane);
    pack_plane("tbits_bool_pack", codes, rows, k, /*one=*/1, /*other=*/0, "{0, 1}", plane);
}

void tbits_bool_validate(const uint32_t* plane, int64_t rows, int64_t k) {
    check_args("tbits_bool_validate", plane, rows, k, plane);
    check_padding("tbits_bool_validate", plane, 0, rows, k);
}

void tbits_bool_unpack(const uint32_t* plane, int64_t rows, int64_t k, int8_t* codes) {
    check_args("tbits_bool_unpack", plane, rows, k, codes);
    check_padding("tbits_bool_unpack", plane, 0, rows, k);
    const int64_t rw = tbits_row_words(k);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < k; ++c)
            codes[r * k + c] = static_cast<int8_t>(bit_at(plane, rw, r, c));
    }
}

void tbits_binary_pack(const int8_t* codes, int64_t rows, int64_t k, uint32_t* plane) {
    check_args("tbits_binary_pack", codes, rows, k, plane);
    pack_plane("tbits_binary_pack", codes, rows, k, /*one=*/1, /*other=*/-1,
               "{-1, +1} (binary has no zero)", plane);
}

void tbits_binary_validate(const uint32_t* plane, int64_t rows, int64_t k) {
    check_args("tbits_binary_validate", plane, rows, k, plane);
    check_padding("tbits_binary_validate", plane, 0, rows, k);
}

void tbits_binary_unpack(const uint32_t* plane, int64_t rows, int64_t k, int8_t* codes) {
    check_args("tbits_binary_unpack", plane, rows, k, codes);
    check_padding("tbits_binary_unpack", plane, 0, rows, k);
    const int64_t rw = tbits_row_words(k);
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < k; ++c)
            codes[r * k + c] = static_cast<int8_t>(2 * bit_at(plane, rw, r, c) - 1);
    }
}

void tbits_from_bin1(const uint8_t* packed, int64_t n, int64_t k, uint32_t* plane) {
    check_args("tbits_from_bin1", packed, n, k, plane);
    bin1_validate(packed, n, k);
    const int64_t rb = bin1_row_bytes(k), rw = tbits_row_words(k);
    std::fill(plane, plane + n * rw, uint32_t{0});
    for (int64_t r = 0; r < n; ++r) {
        for (int64_t byte = 0; byte < rb; ++byte) {
            // Byte `byte` holds columns 8 * byte .. + 7, LSB first: byte (byte % 4) of its word.
            plane[r * rw + byte / 4] |= uint32_t{packed[r * rb + byte]} << (8 * (byte % 4));
        }
    }
}

void tbits_gemm_bin_tern_ref(const uint32_t* w, int64_t n, int64_t k, const uint32_t* a, int64_t m,
                             int32_t* acc) {
    check_product("tbits_gemm_bin_tern_ref", w, n, k, a, m, acc);
    check_padding("tbits_gemm_bin_tern_ref", w, 0, n, k);
    validate_ternary("tbits_gemm_bin_tern_ref", a, m, k);
    const uint32_t* pos = a;
    const uint32_t* neg = a + m * tbits_row_words(k);
    word_gemm(n, k, m, acc, [&](int64_t ai, int64_t bj) {
        return 2 * popc(pos[ai] & w[bj]) - popc(pos[ai]) - 2 * popc(neg[ai] & w[bj]) +
               popc(neg[ai]);
    });
}

void tbits_gemm_bool_tern_ref(const uint32_t* v, int64_t n, int64_t k, const uint32_t* att,
                              int64_t m, int32_t* acc) {
    check_product("tbits_gemm_bool_tern_ref", v, n, k, att, m, acc);
    validate_ternary("tbits_gemm_bool_tern_ref", v, n, k);
    check_padding("tbits_gemm_bool_tern_ref", att, 0, m, k);
    const uint32_t* vpos = v;
    const uint32_t* vneg = v + n * tbits_row_words(k);
    word_gemm(n, k, m, acc, [&](int64_t ai, int64_t bj) {
        return popc(att[ai] & vpos[bj]) - popc(att[ai] & vneg[bj]);
    });
}

void tbits_gemm_tern_tern_ref(const uint32_t* kk, int64_t n, int64_t k, const uint32_t* q,
                              int64_t m, int32_t* acc) {
    check_product("tbits_gemm_tern_tern_ref", kk, n, k, q, m, acc);
    validate_ternary("tbits_gemm_tern_tern_ref", kk, n, k);
    validate_ternary("tbits_gemm_tern_tern_ref", q, m, k);
    const uint32_t* qp = q;
    const uint32_t* qn = q + m * tbits_row_words(k);
    const uint32_t* kp = kk;
    const uint32_t* kn = kk + n * tbits_row_words(k);
    word_gemm(n, k, m, acc, [&](int64_t ai, int64_t bj) {
        return popc(qp[ai] & kp[bj]) + popc(qn[ai] & kn[bj]) - popc(qp[ai] & kn[bj]) -
               popc(qn[ai] & kp[bj]);
    });
}

void tbits_gemm_bool_bin_ref(const uint32_t* w, int64_t n, int64_t k, const uint32_t* a, int64_t m,
                             int32_t* acc) {
    check_product("tbits_gemm_bool_bin_ref", w, n, k, a, m, acc);
    check_padding("tbits_gemm_bool_bin_ref", w, 0, n, k);
    check_padding("tbits_gemm_bool_bin_ref", a, 0, m, k);
    word_gemm(n, k, m, acc, [&](int64_t ai, int64_t bj) {
        return popc(a[ai] & w[bj]) - popc(a[ai] & ~w[bj]);
    });
}

}  // namespace trit::formats
