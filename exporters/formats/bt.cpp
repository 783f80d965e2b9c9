// bt CPU reference: pack, unpack, validate and the integer/float products (spec in bt.h).
// Scalar on purpose, it defines the result bit for bit; the products decode each quintet's d plane
// bytes through a 243-entry table built from the header's bt_decode_byte and the row's tail through
// the header's bt_tail_code, never via unpack.
#include "exporters/formats/bt.h"

#include <algorithm>
#include <array>

#include "core/error.h"

namespace trit::formats {
namespace {

constexpr int kBtTableSize = kBtMaxByte + 1;

// Decode table: a plane byte's 5 biased trits t + 1 in {0, 1, 2} (from the header's
// bt_decode_byte), one per 8-bit lane. Summing a quintet's planes with weights 3^i gives, per lane,
// sum_i 3^i (t_i + 1) = code + L <= 80: no carry crosses a lane, so a quintet decodes with d
// lookups and multiply-adds.
constexpr std::array<uint64_t, kBtTableSize> make_lane_table() {
    std::array<uint64_t, kBtTableSize> table{};
    for (int b = 0; b < kBtTableSize; ++b) {
        const BtTrits t = bt_decode_byte(static_cast<uint8_t>(b));
        for (int j = 0; j < kBtQuintet; ++j) {
            table[b] |= static_cast<uint64_t>(t.t[j] + 1) << (8 * j);
        }
    }
    return table;
}
constexpr std::array<uint64_t, kBtTableSize> kLaneTable = make_lane_table();

void check_shape(const char* who, int64_t n, int64_t k, int d) {
    TRIT_CHECK(n >= 1 && k >= 1, who, ": n and k must be >= 1 (got n=", n, ", k=", k, ")");
    TRIT_CHECK(d >= kBtMinDepth && d <= kBtMaxDepth, who, ": depth d must be in 1..4 (got d=", d,
               ")");
}

void check_product(const char* who, const uint8_t* packed, int64_t n, int64_t k, int d,
                   const void* x, int64_t m, int64_t group, const void* acc) {
    check_shape(who, n, k, d);
    TRIT_CHECK(m >= 1 && group >= 1, who, ": m and group must be >= 1 (got m=", m,
               ", group=", group, ")");
    TRIT_CHECK(packed != nullptr && x != nullptr && acc != nullptr, who,
               ": packed, x and acc must be non-null (n=", n, ", k=", k, ", m=", m, ")");
}

// Only the int32 products: the float accumulators have no such bound.
void check_int32_range(const char* who, int64_t k, int d, int64_t group) {
    const int64_t len = std::min(group, k);
    const int64_t limit = acc_max_group_len(bt_levels(d));
    TRIT_CHECK(len <= limit, who, ": a scale group of ", len,
               " columns could overflow the int32 accumulator at d = ", d, " (128 * ", bt_levels(d),
               " * ", len, " > 2^31 - 1); use group <= ", limit);
}

void validate(const char* who, const uint8_t* packed, int64_t n, int64_t k, int d) {
    const int64_t quintets = bt_full_quintets(k);
    const int64_t tail_at = bt_tail_offset(k, d);
    const int tail_bytes = bt_tail_bytes(k, d);
    const int tail_trits = bt_tail_trits(k, d);
    const int64_t rb = bt_row_bytes(k, d);
    for (int64_t r = 0; r < n; ++r) {
        const uint8_t* row = packed + r * rb;
        for (int64_t q = 0; q < quintets; ++q) {
            for (int i = 0; i < d; ++i) {
                const int64_t b = q * d + i;
                const int byte = row[b];
                TRIT_CHECK(byte <= kBtMaxByte, who, ": row ", r, ", byte ", b, " (quintet ", q,
                           ", plane ", i, ") is ", byte, ", expected <= 242 (5 trits, 3^5 - 1)");
            }
        }
        for (int tb = 0; tb < tail_bytes; ++tb) {
            const int64_t b = tail_at + tb;
            const int byte = row[b];
            TRIT_CHECK(byte <= kBtMaxByte, who, ": row ", r, ", byte ", b, " (tail byte ", tb,
                       ") is ", byte, ", expected <= 242 (5 trits, 3^5 - 1)");
            for (int s = 0; s < kBtQuintet; ++s) {
                const int t = tb * kBtQuintet + s;
                const int trit = bt_trit(static_cast<uint8_t>(byte), s);
                TRIT_CHECK(t < tail_trits || trit == 0, who, ": row ", r, ", byte ", b,
                           " (tail byte ", tb, "): unused slot ", s, " (tail trit ", t,
                           " >= r * d = ", tail_trits, ") is ", trit,
                           ", expected 0 (unused tail slots hold the zero trit)");
            }
        }
    }
}

// Shared loop of the int32 and float products: per (i, j, scale group), walk the whole quintets
// that overlap it, decode each quintet's 5 codes once from its d plane bytes, then the group's
// tail columns (codes decoded once per row), accumulating in increasing column order.
template <typename X, typename Acc>
void gemm(const uint8_t* packed, int64_t n, int64_t k, int d, const X* x, int64_t m, int64_t group,
          Acc* acc) {
    const int64_t rb = bt_row_bytes(k, d);
    const int64_t groups = acc_num_groups(k, group);
    const int levels = bt_levels(d);
    const int64_t quintets = bt_full_quintets(k);
    const int64_t tail_col = quintets * kBtQuintet;
    const int tail_weights = bt_tail_weights(k);
    for (int64_t i = 0; i < m; ++i) {
        const X* xi = x + i * k;
        for (int64_t j = 0; j < n; ++j) {
            const uint8_t* row = packed + j * rb;
            Acc* out = acc + (i * n + j) * groups;
            int tail[kBtQuintet] = {};
            for (int w = 0; w < tail_weights; ++w)
                tail[w] = bt_tail_code(row, k, d, w);
            for (int64_t g = 0; g < groups; ++g) {
                const int64_t c0 = g * group;
                const int64_t c1 = std::min(k, c0 + group);
                Acc sum = 0;
                for (int64_t q = c0 / kBtQuintet; q < quintets && q * kBtQuintet < c1; ++q) {
                    uint64_t lanes = 0;
                    for (int p = 0, weight = 1; p < d; ++p, weight *= 3) {
                        lanes += static_cast<uint64_t>(weight) * kLaneTable[row[q * d + p]];
                    }
                    int codes[kBtQuintet];
                    for (int w = 0; w < kBtQuintet; ++w) {
                        codes[w] = static_cast<int>((lanes >> (8 * w)) & 0xFF) - levels;
                    }
                    const int64_t base = q * kBtQuintet;
                    // Every column multiplies, zero codes included: a non-finite x gives NaN as
                    // in the dense fake-quant forward. A whole quintet has a constant trip count.
                    if (base >= c0 && base + kBtQuintet <= c1) {
                        for (int p = 0; p < kBtQuintet; ++p) {
                            sum += static_cast<Acc>(xi[base + p]) * static_cast<Acc>(codes[p]);
                        }
                    } else {
                        for (int64_t c = std::max(c0, base); c < std::min(c1, base + kBtQuintet);
                             ++c) {
                            sum += static_cast<Acc>(xi[c]) * static_cast<Acc>(codes[c - base]);
                        }
                    }
                }
                for (int64_t c = std::max(c0, tail_col); c < c1; ++c) {
                    sum += static_cast<Acc>(xi[c]) * static_cast<Acc>(tail[c - tail_col]);
                }
                out[g] = sum;
            }
        }
    }
}

}  // namespace

void bt_pack(const int8_t* codes, int64_t n, int64_t k, int d, uint8_t* packed) {
    check_shape("bt_pack", n, k, d);
    TRIT_CHECK(codes != nullptr && packed != nullptr,
               "bt_pack: codes and packed must be non-null (n=", n, ", k=", k, ")");
    const int levels = bt_levels(d);
    const int64_t quintets = bt_full_quintets(k);
    const int64_t tail_at = bt_tail_offset(k, d);
    const int tail_weights = bt_tail_weights(k);
    const int tail_bytes = bt_tail_bytes(k, d);
    const int64_t rb = bt_row_bytes(k, d);
    // Codes of columns c0 .. c0 + len - 1 of row r, range-checked.
    auto gather = [&](int64_t r, int64_t c0, int len, int8_t* out) {
        for (int j = 0; j < len; ++j) {
            const int64_t c = c0 + j;
            const int code = codes[r * k + c];
            TRIT_CHECK(code >= -levels && code <= levels, "bt_pack: code ", code, " at (row ", r,
                       ", col ", c, ") is outside [-", levels, ", ", levels,
                       "], the range of depth d = ", d);
            out[j] = static_cast<int8_t>(code);
        }
    };
    for (int64_t r = 0; r < n; ++r) {
        uint8_t* row = packed + r * rb;
        for (int64_t q = 0; q < quintets; ++q) {
            int8_t quintet[kBtQuintet] = {};
            gather(r, q * kBtQuintet, kBtQuintet, quintet);
            for (int i = 0; i < d; ++i)
                row[q * d + i] = bt_encode_plane(quintet, i);
        }
        int8_t tail[kBtQuintet] = {};
        gather(r, quintets * kBtQuintet, tail_weights, tail);
        for (int b = 0; b < tail_bytes; ++b)
            row[tail_at + b] = bt_encode_tail_byte(tail, tail_weights, d, b);
    }
}

void bt_validate(const uint8_t* packed, int64_t n, int64_t k, int d) {
    check_shape("bt_validate", n, k, d);
    TRIT_CHECK(packed != nullptr, "bt_validate: packed must be non-null");
    validate("bt_validate", packed, n, k, d);
}

void bt_unpack(const uint8_t* packed, int64_t n, int64_t k, int d, int8_t* codes) {
    check_shape("bt_unpack", n, k, d);
    TRIT_CHECK(packed != nullptr && codes != nullptr,
               "bt_unpack: packed and codes must be non-null (n=", n, ", k=", k, ")");
    validate("bt_unpack", packed, n, k, d);
    const int64_t rb = bt_row_bytes(k, d);
    const int64_t tail_col = bt_full_quintets(k) * kBtQuintet;
    for (int64_t r = 0; r < n; ++r) {
        const uint8_t* row = packed + r * rb;
        for (int64_t c = 0; c < k; ++c) {
            int code = 0;
            if (c < tail_col) {
                const int64_t q = c / kBtQuintet;
                const int j = static_cast<int>(c % kBtQuintet);
                for (int i = 0; i < d; ++i)
                    code += bt_pow3(i) * bt_trit(row[q * d + i], j);
            } else {
                code = bt_tail_code(row, k, d, static_cast<int>(c - tail_col));
            }
            codes[r * k + c] = static_cast<int8_t>(code);
        }
    }
}

void bt_gemm_ref(const uint8_t* packed, int64_t n, int64_t k, int d, const int8_t* x, int64_t m,
                 int64_t group, int32_t* acc) {
    check_product("bt_gemm_ref", packed, n, k, d, x, m, group, acc);
    check_int32_range("bt_gemm_ref", k, d, group);
    validate("bt_gemm_ref", packed, n, k, d);
    gemm(packed, n, k, d, x, m, group, acc);
}

void bt_gemv_ref(const uint8_t* packed, int64_t n, int64_t k, int d, const int8_t* x, int64_t group,
                 int32_t* acc) {
    bt_gemm_ref(packed, n, k, d, x, /*m=*/1, group, acc);
}

void bt_gemm_f32_ref(const uint8_t* packed, int64_t n, int64_t k, int d, const float* x, int64_t m,
                     int64_t group, float* acc) {
    check_product("bt_gemm_f32_ref", packed, n, k, d, x, m, group, acc);
    validate("bt_gemm_f32_ref", packed, n, k, d);
    gemm(packed, n, k, d, x, m, group, acc);
}

}  // namespace trit::formats
