// GPU tests of the tbits packing kernels (kernels/act_pack.h) and the b1 tensor-core GEMMs
// (kernels/bin1_gemm.h): planes bit-exact with the tbits CPU reference, each case's int32
// accumulators (bin_tern, bool_tern, tern_tern, bool_bin) bit-exact with tbits_gemm_*_ref over a
// shape table and every tile, the fused float epilogue bit-exact with product.h's formula, and the
// host-side launch contracts.
// TRIT_BIN1_TIMING=1 also prints GEMM-alone and quantize+GEMM timings (BWTA shapes).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "exporters/formats/act_levels.h"
#include "exporters/formats/bin1.h"
#include "exporters/formats/tbits.h"
#include "kernels/act_pack.h"
#include "kernels/bin1_gemm.h"
#include "kernels/cuda_check.h"
#include "tests/gpu/gpu_test_util.h"

namespace {

namespace f = trit::formats;
namespace k = trit::kernels;
using k::Bin1GemmCase;
using k::Bin1GemmTile;
using trit::gputest::DeviceBuffer;
using trit::gputest::random_codes;
using trit::gputest::random_floats;
using trit::gputest::RequiresGpu;
using Words = std::vector<uint32_t>;

template <typename T>
std::string first_mismatches(const std::vector<T>& got, const std::vector<T>& want, int64_t cols,
                             int64_t* count) {
    std::ostringstream os;
    *count = 0;
    for (size_t e = 0; e < std::min(got.size(), want.size()); ++e) {
        if (got[e] == want[e]) continue;
        if ((*count)++ < 8) {
            os << "  [" << e / cols << "][" << e % cols << "] got " << +got[e] << " want "
               << +want[e] << "\n";
        }
    }
    if (got.size() != want.size()) os << "  size " << got.size() << " vs " << want.size() << "\n";
    return os.str();
}

template <typename T>
void expect_equal(const std::vector<T>& got, const std::vector<T>& want, int64_t cols,
                  const std::string& what) {
    int64_t count = 0;
    const std::string msg = first_mismatches(got, want, cols, &count);
    EXPECT_TRUE(count == 0 && got.size() == want.size())
        << what << ": " << count << " mismatches, first:\n"
        << msg;
}

// ---- packing -------------------------------------------------------------------------------

struct PackShape {
    int64_t rows, k;
};

class TbitsPackGpu : public RequiresGpu<::testing::Test> {};

const std::vector<PackShape> kPackShapes = {{1, 1},   {1, 31},   {3, 255},   {7, 256},
                                            {2, 257}, {5, 1000}, {128, 768}, {17, 3072}};

TEST_F(TbitsPackGpu, TernaryAndBoolCodesMatchReference) {
    for (const PackShape& s : kPackShapes) {
        SCOPED_TRACE("rows=" + std::to_string(s.rows) + " k=" + std::to_string(s.k));
        const int64_t rw = f::tbits_row_words(s.k);
        // Out-of-range codes mixed in: the kernel saturates them and counts them.
        auto codes = random_codes(s.rows * s.k, -3, 3, 11 + s.rows * 7 + s.k);
        std::vector<int8_t> tern(codes.size()), boo(codes.size());
        unsigned want_t = 0, want_b = 0;
        for (size_t e = 0; e < codes.size(); ++e) {
            tern[e] = static_cast<int8_t>(std::clamp<int>(codes[e], -1, 1));
            boo[e] = static_cast<int8_t>(std::clamp<int>(codes[e], 0, 1));
            want_t += codes[e] < -1 || codes[e] > 1;
            want_b += codes[e] < 0 || codes[e] > 1;
        }
        Words ref_t(2 * s.rows * rw), ref_b(s.rows * rw);
        f::tbits_ternary_pack(tern.data(), s.rows, s.k, ref_t.data());
        f::tbits_bool_pack(boo.data(), s.rows, s.k, ref_b.data());

        DeviceBuffer<int8_t> d_codes(codes);
        DeviceBuffer<uint32_t> d_t(ref_t.size()), d_b(ref_b.size());
        DeviceBuffer<unsigned> d_count(2);
        d_t.poison(), d_b.poison();
        TRIT_CUDA_CHECK(cudaMemset(d_count.get(), 0, 2 * sizeof(unsigned)));
        k::tbits_pack_ternary(d_codes.get(), s.rows, s.k, d_t.get(), d_count.get(), nullptr);
        k::tbits_pack_bool(d_codes.get(), s.rows, s.k, d_b.get(), d_count.get() + 1, nullptr);
        TRIT_CUDA_CHECK(cudaDeviceSynchronize());
        expect_equal(d_t.download(), ref_t, rw, "ternary planes");
        expect_equal(d_b.download(), ref_b, rw, "bool plane");
        const auto counts = d_count.download();
        EXPECT_EQ(counts[0], want_t);
        EXPECT_EQ(counts[1], want_b);
        // A null counter is allowed.
        k::tbits_pack_ternary(d_codes.get(), s.rows, s.k, d_t.get(), nullptr, nullptr);
        TRIT_CUDA_CHECK(cudaDeviceSynchronize());
        expect_equal(d_t.download(), ref_t, rw, "ternary planes, no counter");
    }
}

// act_levels_quantize_ref(levels = 3) / act_bool_quantize_ref, then the tbits pack.
void check_quantize(const std::vector<float>& x, int64_t rows, int64_t cols, float scale) {
    const int64_t rw = f::tbits_row_words(cols);
    std::vector<int8_t> q(x.size());
    Words ref_t(2 * rows * rw), ref_b(rows * rw);
    f::act_levels_quantize_ref(x.data(), rows, cols, scale, 3, q.data());
    f::tbits_ternary_pack(q.data(), rows, cols, ref_t.data());
    f::act_bool_quantize_ref(x.data(), rows, cols, scale, q.data());
    f::tbits_bool_pack(q.data(), rows, cols, ref_b.data());
    DeviceBuffer<float> d_x(x);
    DeviceBuffer<uint32_t> d_t(ref_t.size()), d_b(ref_b.size());
    d_t.poison(), d_b.poison();
    k::tbits_quantize_ternary(d_x.get(), rows, cols, scale, d_t.get(), nullptr);
    k::tbits_quantize_bool(d_x.get(), rows, cols, scale, d_b.get(), nullptr);
    TRIT_CUDA_CHECK(cudaDeviceSynchronize());
    expect_equal(d_t.download(), ref_t, rw, "quantized ternary planes");
    expect_equal(d_b.download(), ref_b, rw, "quantized bool plane");
}

TEST_F(TbitsPackGpu, QuantizeMatchesActLevelsReference) {
    for (const PackShape& s : kPackShapes) {
        SCOPED_TRACE("rows=" + std::to_string(s.rows) + " k=" + std::to_string(s.k));
        check_quantize(random_floats(s.rows * s.k, -1.0f, 1.0f, 3 + s.rows + s.k), s.rows, s.k,
                       0.37f);
    }
}

TEST_F(TbitsPackGpu, QuantizeSpecialValues) {
    constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
    constexpr float kInf = std::numeric_limits<float>::infinity();
    const float below = std::nextafter(0.5f, 0.0f), above = std::nextafter(0.5f, 1.0f);
    // Ties (+-0.5 -> 0, 1.5 -> 2 -> 1), neighbours of the ties, NaN, +-Inf, zeros, subnormals.
    std::vector<float> x = {0.5f,   -0.5f, below, above,  -below, -above, 1.5f,    -1.5f,
                            kNan,   kInf,  -kInf, 0.0f,   -0.0f,  1e-40f, -1e-40f, 3e38f,
                            -3e38f, 0.25f, 0.75f, -0.75f, 2.5f,   1.0f,   -1.0f,   0.49999f};
    check_quantize(x, 1, static_cast<int64_t>(x.size()), 1.0f);
    // A scale whose quotients land near +-0.5 after rounding: x / 0.1f.
    std::vector<float> y;
    for (int i = -40; i <= 40; ++i)
        y.push_back(0.05f + 1e-9f * static_cast<float>(i));
    for (int i = -40; i <= 40; ++i)
        y.push_back(-0.05f + 1e-9f * static_cast<float>(i));
    check_quantize(y, 2, static_cast<int64_t>(y.size()) / 2, 0.1f);
}

TEST_F(TbitsPackGpu, FromBin1MatchesReference) {
    for (const PackShape& s : kPackShapes) {
        SCOPED_TRACE("n=" + std::to_string(s.rows) + " k=" + std::to_string(s.k));
        std::vector<int8_t> codes = random_codes(s.rows * s.k, 0, 1, 21 + s.k);
        for (auto& c : codes)
            c = static_cast<int8_t>(2 * c - 1);
        std::vector<uint8_t> b1(s.rows * f::bin1_row_bytes(s.k));
        f::bin1_pack(codes.data(), s.rows, s.k, b1.data());
        Words ref(s.rows * f::tbits_row_words(s.k));
        f::tbits_from_bin1(b1.data(), s.rows, s.k, ref.data());
        DeviceBuffer<uint8_t> d_b1(b1);
        DeviceBuffer<uint32_t> d_w(ref.size());
        d_w.poison();
        k::tbits_from_bin1(d_b1.get(), s.rows, s.k, d_w.get(), nullptr);
        TRIT_CUDA_CHECK(cudaDeviceSynchronize());
        expect_equal(d_w.download(), ref, f::tbits_row_words(s.k), "binary plane");
    }
}

TEST(TbitsPackContract, RejectsBadArguments) {
    alignas(16) int8_t c[16] = {};
    alignas(16) float x[16] = {};
    alignas(16) uint32_t p[64] = {};
    const auto msg = [](auto fn) {
        try {
            fn();
        } catch (const trit::Error& e) {
            return std::string(e.what());
        }
        return std::string("<no trit::Error>");
    };
    EXPECT_NE(msg([&] { k::tbits_pack_ternary(c, 0, 4, p, nullptr, nullptr); }).find("rows=0, k=4"),
              std::string::npos);
    EXPECT_NE(msg([&] { k::tbits_pack_bool(c, 1, 0, p, nullptr, nullptr); }).find("rows=1, k=0"),
              std::string::npos);
    EXPECT_NE(
        msg([&] { k::tbits_pack_ternary(nullptr, 1, 4, p, nullptr, nullptr); }).find("non-null"),
        std::string::npos);
    EXPECT_NE(msg([&] { k::tbits_quantize_ternary(x, 1, 4, 0.0f, p, nullptr); }).find("scale"),
              std::string::npos);
    EXPECT_NE(msg([&] {
                  k::tbits_quantize_bool(x, 1, 4, std::numeric_limits<float>::quiet_NaN(), p,
                                         nullptr);
              }).find("scale"),
              std::string::npos);
    const auto* odd = reinterpret_cast<uint32_t*>(reinterpret_cast<char*>(p) + 2);
    EXPECT_NE(msg([&] {
                  k::tbits_pack_ternary(c, 1, 4, const_cast<uint32_t*>(odd), nullptr, nullptr);
              }).find("aligned"),
              std::string::npos);
    EXPECT_NE(msg([&] {
                  k::tbits_quantize_ternary(x, int64_t{1} << 40, int64_t{1} << 40, 1.0f, p,
                                            nullptr);
              }).find("overflows"),
              std::string::npos);
}

// ---- GEMM ----------------------------------------------------------------------------------

struct Operands {
    Words a, b;                // host planes
    std::vector<int32_t> ref;  // (m, n)
};

// Random codes packed per case, and the CPU reference product.
Operands make_operands(Bin1GemmCase c, int64_t m, int64_t n, int64_t kk, uint64_t seed) {
    const int64_t rw = f::tbits_row_words(kk);
    Operands o;
    o.a.resize(k::bin1_gemm_planes_a(c) * m * rw);
    o.b.resize(k::bin1_gemm_planes_b(c) * n * rw);
    o.ref.resize(m * n);
    const auto tern_a = random_codes(m * kk, -1, 1, seed);
    const auto tern_b = random_codes(n * kk, -1, 1, seed + 1);
    if (c == Bin1GemmCase::kBinTern) {
        auto bin = random_codes(n * kk, 0, 1, seed + 2);
        for (auto& v : bin)
            v = static_cast<int8_t>(2 * v - 1);
        f::tbits_ternary_pack(tern_a.data(), m, kk, o.a.data());
        f::tbits_binary_pack(bin.data(), n, kk, o.b.data());
        f::tbits_gemm_bin_tern_ref(o.b.data(), n, kk, o.a.data(), m, o.ref.data());
    } else if (c == Bin1GemmCase::kBoolBin) {
        const auto boo = random_codes(m * kk, 0, 1, seed + 3);
        auto bin = random_codes(n * kk, 0, 1, seed + 2);
        for (auto& v : bin)
            v = static_cast<int8_t>(2 * v - 1);
        f::tbits_bool_pack(boo.data(), m, kk, o.a.data());
        f::tbits_binary_pack(bin.data(), n, kk, o.b.data());
        f::tbits_gemm_bool_bin_ref(o.b.data(), n, kk, o.a.data(), m, o.ref.data());
    } else if (c == Bin1GemmCase::kBoolTern) {
        const auto boo = random_codes(m * kk, 0, 1, seed + 3);
        f::tbits_bool_pack(boo.data(), m, kk, o.a.data());
        f::tbits_ternary_pack(tern_b.data(), n, kk, o.b.data());
        f::tbits_gemm_bool_tern_ref(o.b.data(), n, kk, o.a.data(), m, o.ref.data());
    } else {
        f::tbits_ternary_pack(tern_a.data(), m, kk, o.a.data());
        f::tbits_ternary_pack(tern_b.data(), n, kk, o.b.data());
        f::tbits_gemm_tern_tern_ref(o.b.data(), n, kk, o.a.data(), m, o.ref.data());
    }
    return o;
}

std::vector<int32_t> run_acc(Bin1GemmCase c, const Operands& o, int64_t m, int64_t n, int64_t kk,
                             Bin1GemmTile tile, bool b_early = false) {
    DeviceBuffer<uint32_t> d_a(o.a), d_b(o.b);
    DeviceBuffer<int32_t> d_acc(m * n);
    d_acc.poison();
    k::ProductOut out;
    out.acc = d_acc.get();
    k::bin1_gemm(c, d_a.get(), m, d_b.get(), n, kk, out, nullptr, tile, b_early);
    TRIT_CUDA_CHECK(cudaDeviceSynchronize());
    return d_acc.download();
}

struct GemmShape {
    Bin1GemmCase c;
    int64_t m, n, k;
};

void PrintTo(const GemmShape& s, std::ostream* os) {
    *os << k::bin1_gemm_case_name(s.c) << " m=" << s.m << " n=" << s.n << " k=" << s.k;
}

std::string gemm_name(const ::testing::TestParamInfo<GemmShape>& info) {
    const GemmShape& s = info.param;
    return std::string(k::bin1_gemm_case_name(s.c)) + "_m" + std::to_string(s.m) + "_n" +
           std::to_string(s.n) + "_k" + std::to_string(s.k);
}

std::vector<GemmShape> gemm_table() {
    std::vector<GemmShape> t;
    for (Bin1GemmCase c : {Bin1GemmCase::kBinTern, Bin1GemmCase::kBoolTern, Bin1GemmCase::kTernTern,
                           Bin1GemmCase::kBoolBin})
        for (int64_t m : {1, 7, 128, 130, 512})
            for (int64_t n : {1, 8, 100, 768})
                for (int64_t kk : {1, 255, 256, 768, 3072})
                    t.push_back({c, m, n, kk});
    return t;
}

class Bin1GemmShapes : public RequiresGpu<::testing::TestWithParam<GemmShape>> {};

TEST_P(Bin1GemmShapes, AccumulatorsMatchReferenceOnEveryTile) {
    const GemmShape s = GetParam();
    const Operands o = make_operands(s.c, s.m, s.n, s.k, 1000 + s.m * 31 + s.n * 7 + s.k);
    bool b_early = false;  // both launch modes, in turn
    for (Bin1GemmTile tile : {Bin1GemmTile::kAuto, Bin1GemmTile::kTiny, Bin1GemmTile::kSmall,
                              Bin1GemmTile::kMedium, Bin1GemmTile::kWide, Bin1GemmTile::kLarge}) {
        b_early = !b_early;
        SCOPED_TRACE(std::string("tile ") + k::bin1_gemm_tile_name(tile) + (b_early ? " b_early" : ""));
        expect_equal(run_acc(s.c, o, s.m, s.n, s.k, tile, b_early), o.ref, s.n, "acc");
    }
}

INSTANTIATE_TEST_SUITE_P(Table, Bin1GemmShapes, ::testing::ValuesIn(gemm_table()), gemm_name);

class Bin1GemmGpu : public RequiresGpu<::testing::Test> {};

TEST_F(Bin1GemmGpu, ExtremeSumsAtLongK) {
    // All codes +-1 everywhere: |acc| = k at every output, the int32 algebra's largest values.
    constexpr int64_t kM = 33, kN = 17, kK = 65536 + 3;
    const int64_t rw = f::tbits_row_words(kK);
    const std::vector<int8_t> ones(std::max(kM, kN) * kK, 1), minus(kM * kK, -1);
    Words a(2 * kM * rw), w(kN * rw), kk(2 * kN * rw), att(kM * rw);
    f::tbits_ternary_pack(minus.data(), kM, kK, a.data());
    f::tbits_binary_pack(ones.data(), kN, kK, w.data());
    f::tbits_ternary_pack(ones.data(), kN, kK, kk.data());
    f::tbits_bool_pack(ones.data(), kM, kK, att.data());
    const auto run = [&](Bin1GemmCase c, const Words& ha, const Words& hb) {
        Operands o{ha, hb, {}};
        return run_acc(c, o, kM, kN, kK, Bin1GemmTile::kAuto);
    };
    expect_equal(run(Bin1GemmCase::kBinTern, a, w), std::vector<int32_t>(kM * kN, -kK), kN,
                 "bin_tern");
    expect_equal(run(Bin1GemmCase::kBoolTern, att, kk), std::vector<int32_t>(kM * kN, kK), kN,
                 "bool_tern");
    expect_equal(run(Bin1GemmCase::kTernTern, a, kk), std::vector<int32_t>(kM * kN, -kK), kN,
                 "tern_tern");
    expect_equal(run(Bin1GemmCase::kBoolBin, att, w), std::vector<int32_t>(kM * kN, kK), kN,
                 "bool_bin");
    Words wm(kN * rw);
    f::tbits_binary_pack(minus.data(), kN, kK, wm.data());
    expect_equal(run(Bin1GemmCase::kBoolBin, att, wm), std::vector<int32_t>(kM * kN, -kK), kN,
                 "bool_bin, weights -1");
}

TEST_F(Bin1GemmGpu, Bin1ArrayUsedDirectlyAsWeights) {
    // k % 256 == 0: the bin1 packed bytes are the binary plane; no repack.
    constexpr int64_t kM = 130, kN = 100, kK = 768;
    auto bin = random_codes(kN * kK, 0, 1, 77);
    for (auto& v : bin)
        v = static_cast<int8_t>(2 * v - 1);
    const auto x = random_codes(kM * kK, -1, 1, 78);
    std::vector<uint8_t> b1(kN * f::bin1_row_bytes(kK));
    f::bin1_pack(bin.data(), kN, kK, b1.data());
    std::vector<int32_t> ref(kM * kN);
    f::bin1_gemm_ref(b1.data(), kN, kK, x.data(), kM, /*group=*/kK, ref.data());

    DeviceBuffer<uint8_t> d_b1(b1);
    DeviceBuffer<int8_t> d_x(x);
    DeviceBuffer<uint32_t> d_planes(2 * kM * f::tbits_row_words(kK));
    DeviceBuffer<int32_t> d_acc(kM * kN);
    k::tbits_pack_ternary(d_x.get(), kM, kK, d_planes.get(), nullptr, nullptr);
    k::ProductOut out;
    out.acc = d_acc.get();
    k::bin1_gemm(Bin1GemmCase::kBinTern, d_planes.get(), kM,
                 reinterpret_cast<const uint32_t*>(d_b1.get()), kN, kK, out, nullptr);
    TRIT_CUDA_CHECK(cudaDeviceSynchronize());
    expect_equal(d_acc.download(), ref, kN, "bin1 bytes as plane vs bin1_gemm_ref");

    // The same weights against bool activations (bool_bin), codes packed on the device.
    const auto boo = random_codes(kM * kK, 0, 1, 79);
    f::bin1_gemm_ref(b1.data(), kN, kK, boo.data(), kM, /*group=*/kK, ref.data());
    DeviceBuffer<int8_t> d_boo(boo);
    k::tbits_pack_bool(d_boo.get(), kM, kK, d_planes.get(), nullptr, nullptr);
    d_acc.poison();
    k::bin1_gemm(Bin1GemmCase::kBoolBin, d_planes.get(), kM,
                 reinterpret_cast<const uint32_t*>(d_b1.get()), kN, kK, out, nullptr);
    TRIT_CUDA_CHECK(cudaDeviceSynchronize());
    expect_equal(d_acc.download(), ref, kN, "bool_bin: bin1 bytes as plane vs bin1_gemm_ref");
}

uint32_t float_bits(float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
}

// y bit for bit against the formula for every case, per-tensor and per-row scales.
void fused_epilogue_case(int64_t kN, bool offset, bool b_early, int64_t kK) {
    constexpr int64_t kM = 130;
    for (Bin1GemmCase c : {Bin1GemmCase::kBinTern, Bin1GemmCase::kBoolTern, Bin1GemmCase::kTernTern,
                           Bin1GemmCase::kBoolBin}) {
        for (const bool per_row : {false, true}) {
            SCOPED_TRACE(std::string(k::bin1_gemm_case_name(c)) + (per_row ? " per-row" : ""));
            const Operands o = make_operands(c, kM, kN, kK, 4242);
            const auto ws = random_floats(per_row ? kN : 1, -0.02f, 0.02f, 5);
            const auto xs = random_floats(per_row ? kM : 1, 0.1f, 2.0f, 6);
            const auto bias = random_floats(kN, -1.0f, 1.0f, 7);
            // product.h with G = 1: s = +0 + ws * float(acc); y = s * xs + bias, no FMA.
            std::vector<uint32_t> want(kM * kN);
            for (int64_t i = 0; i < kM; ++i) {
                for (int64_t j = 0; j < kN; ++j) {
                    volatile float prod =
                        ws[per_row ? j : 0] * static_cast<float>(o.ref[i * kN + j]);
                    volatile float s = 0.0f + prod;
                    volatile float t = s * xs[per_row ? i : 0];
                    want[i * kN + j] = float_bits(t + bias[j]);
                }
            }
            DeviceBuffer<uint32_t> d_a(o.a), d_b(o.b);
            DeviceBuffer<float> d_ws(ws), d_xs(xs), d_bias(bias), d_y(kM * kN + 1);
            d_y.poison();
            k::ProductOut out;
            out.y = d_y.get() + (offset ? 1 : 0);
            out.w_scale = d_ws.get();
            out.w_scale_rows = per_row ? kN : 1;
            out.x_scale = d_xs.get();
            out.x_scale_rows = per_row ? kM : 1;
            out.bias = d_bias.get();
            k::bin1_gemm(c, d_a.get(), kM, d_b.get(), kN, kK, out, nullptr, Bin1GemmTile::kAuto, b_early);
            TRIT_CUDA_CHECK(cudaDeviceSynchronize());
            std::vector<uint32_t> got;
            const std::vector<float> y = d_y.download();
            for (size_t e = offset ? 1 : 0; e < (offset ? y.size() : y.size() - 1); ++e)
                got.push_back(float_bits(y[e]));
            expect_equal(got, want, kN, "y bits");
        }
    }
}

TEST_F(Bin1GemmGpu, FusedEpilogueMatchesProductFormula) {
    // n even with y 8-byte aligned (pairs of columns stored together), n odd, and n even with y
    // one float off (one store per column); b early and not; k = 3000: small tiles with k groups.
    struct Variant {
        int64_t n;
        bool offset, b_early;
        int64_t k;
    };
    for (const Variant v : {Variant{100, false, false, 300}, Variant{101, false, true, 300}, Variant{100, true, true, 300},
                            Variant{101, false, false, 3000}, Variant{100, true, true, 3000}}) {
        SCOPED_TRACE(::testing::Message() << "n=" << v.n << (v.offset ? " y+1" : "") << (v.b_early ? " b_early" : "")
                                          << " k=" << v.k);
        fused_epilogue_case(v.n, v.offset, v.b_early, v.k);
    }
}

// ---- contracts (host-only: checked before any CUDA call) ---------------------------------------

std::string gemm_error(Bin1GemmCase c, const uint32_t* a, int64_t m, const uint32_t* b, int64_t n,
                       int64_t kk, const k::ProductOut& out) {
    try {
        k::bin1_gemm(c, a, m, b, n, kk, out, nullptr);
    } catch (const trit::Error& e) {
        return e.what();
    }
    return "<no trit::Error>";
}

TEST(Bin1GemmContract, EachRuleRejectedWithShape) {
    alignas(16) static uint32_t a[64] = {}, b[64] = {};
    alignas(16) static int32_t acc[16] = {};
    alignas(16) static float y[16] = {}, s[16] = {};
    k::ProductOut out;
    out.acc = acc;
    const auto has = [](const std::string& msg, std::initializer_list<const char*> parts) {
        for (const char* p : parts) {
            if (msg.find(p) == std::string::npos) return ::testing::AssertionFailure() << msg;
        }
        return ::testing::AssertionSuccess();
    };
    const auto C = Bin1GemmCase::kBinTern;
    EXPECT_TRUE(has(gemm_error(C, a, 0, b, 8, 256, out), {"bin_tern", "m=0, n=8, k=256", ">= 1"}));
    EXPECT_TRUE(has(gemm_error(C, a, 4, b, 0, 256, out), {"m=4, n=0, k=256"}));
    EXPECT_TRUE(has(gemm_error(Bin1GemmCase::kTernTern, a, 4, b, 8, 0, out),
                    {"tern_tern", "m=4, n=8, k=0"}));
    EXPECT_TRUE(has(gemm_error(C, a, 4, b, 8, (int64_t{1} << 30) + 1, out),
                    {"k=1073741825", "exceeds 2^30", "m=4, n=8"}));
    EXPECT_TRUE(has(gemm_error(C, a, int64_t{1} << 40, b, int64_t{1} << 40, 256, out),
                    {"overflow", "k=256"}));
    EXPECT_TRUE(has(gemm_error(C, nullptr, 4, b, 8, 256, out), {"non-null", "m=4, n=8, k=256"}));
    EXPECT_TRUE(has(gemm_error(Bin1GemmCase::kBoolTern, a, 4, nullptr, 8, 256, out),
                    {"bool_tern", "non-null"}));
    const auto* a4 = a + 1;  // 4 bytes past a 16-byte boundary
    EXPECT_TRUE(has(gemm_error(C, a4, 4, b, 8, 256, out), {"16-byte aligned", "m=4, n=8, k=256"}));
    EXPECT_TRUE(has(gemm_error(C, a, 4, b + 2, 8, 256, out), {"16-byte aligned"}));

    k::ProductOut both = out;
    both.y = y;
    EXPECT_TRUE(has(gemm_error(C, a, 4, b, 8, 256, both), {"exactly one", "m=4, n=8, k=256"}));
    EXPECT_TRUE(has(gemm_error(C, a, 4, b, 8, 256, k::ProductOut{}), {"exactly one"}));
    k::ProductOut bad_acc;
    bad_acc.acc = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(acc) + 1);
    EXPECT_TRUE(has(gemm_error(C, a, 4, b, 8, 256, bad_acc), {"4-byte aligned"}));
    k::ProductOut fy;
    fy.y = y;
    EXPECT_TRUE(has(gemm_error(C, a, 4, b, 8, 256, fy), {"w_scale and x_scale", "k=256"}));
    fy.w_scale = s, fy.x_scale = s, fy.w_scale_rows = 3;
    EXPECT_TRUE(has(gemm_error(C, a, 4, b, 8, 256, fy), {"w_scale_rows=3", "1 or n"}));
    fy.w_scale_rows = 8, fy.x_scale_rows = 5;
    EXPECT_TRUE(has(gemm_error(C, a, 4, b, 8, 256, fy), {"x_scale_rows=5", "1 or m"}));
}

TEST(Bin1GemmContract, TileChoice) {
    constexpr int kSms = 132;
    const auto C = Bin1GemmCase::kBinTern;
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 1, 768, 768, kSms), Bin1GemmTile::kTiny);
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 16, 3072, 768, kSms), Bin1GemmTile::kTiny);
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 128, 768, 3072, kSms), Bin1GemmTile::kSmall);
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 512, 3072, 768, kSms), Bin1GemmTile::kMedium);
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 4096, 3072, 768, kSms), Bin1GemmTile::kLarge);
    // wide (64 x 128): one-plane b, k >= 3072, tiles >= 3/5 of the SMs; else as before.
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 2048, 768, 3072, kSms), Bin1GemmTile::kWide);  // 192 tiles
    EXPECT_EQ(k::bin1_gemm_choose_tile(Bin1GemmCase::kBoolBin, 2048, 1024, 4096, kSms), Bin1GemmTile::kWide);
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 2048, 768, 2816, kSms), Bin1GemmTile::kMedium);  // k < 3072
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 1024, 768, 3072, kSms), Bin1GemmTile::kWide);    // 96 wide tiles
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 256, 2560, 3072, kSms), Bin1GemmTile::kWide);    // 80
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 768, 768, 3072, kSms), Bin1GemmTile::kMedium);   // 72
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, 256, 768, 3072, kSms), Bin1GemmTile::kSmall);    // 24
    EXPECT_EQ(k::bin1_gemm_choose_tile(C, int64_t{1} << 40, int64_t{1} << 40, 4096, kSms),
              Bin1GemmTile::kLarge);  // tile counts past int64 saturate
    // two-plane b (attention): never wide; tern_tern's large tile is 128 x 64 (192 tiles here).
    EXPECT_EQ(k::bin1_gemm_choose_tile(Bin1GemmCase::kBoolTern, 2048, 768, 3072, kSms), Bin1GemmTile::kMedium);
    EXPECT_EQ(k::bin1_gemm_choose_tile(Bin1GemmCase::kTernTern, 2048, 384, 3072, kSms), Bin1GemmTile::kMedium);
    // k groups: small tiles, >= 8 k-blocks, one wave.
    EXPECT_EQ(k::bin1_gemm_k_groups(C, Bin1GemmTile::kAuto, 128, 768, 3072, kSms), k::kBin1GemmKGroups);
    EXPECT_EQ(k::bin1_gemm_k_groups(C, Bin1GemmTile::kAuto, 128, 768, 1792, kSms), 1);   // 7 k-blocks
    EXPECT_EQ(k::bin1_gemm_k_groups(C, Bin1GemmTile::kAuto, 256, 768, 3072, kSms), 1);   // 192 tiles
    EXPECT_EQ(k::bin1_gemm_k_groups(C, Bin1GemmTile::kAuto, 2048, 768, 3072, kSms), 1);  // wide
    EXPECT_EQ(k::bin1_gemm_k_groups(C, Bin1GemmTile::kTiny, 8, 768, 3072, kSms), 1);
    EXPECT_EQ(k::bin1_gemm_planes_a(Bin1GemmCase::kBoolTern), 1);
    EXPECT_EQ(k::bin1_gemm_planes_b(Bin1GemmCase::kBinTern), 1);
    EXPECT_EQ(k::bin1_gemm_planes_b(Bin1GemmCase::kTernTern), 2);
    EXPECT_EQ(k::bin1_gemm_planes_a(Bin1GemmCase::kBoolBin), 1);
    EXPECT_EQ(k::bin1_gemm_planes_b(Bin1GemmCase::kBoolBin), 1);
    EXPECT_EQ(std::string(k::bin1_gemm_case_name(Bin1GemmCase::kBoolBin)), "bool_bin");
}

// The k-group CTAs (512 threads) fit two per SM, so the next call's CTAs start beside this call's;
// the other tiles as many as before (at least one).
TEST_F(Bin1GemmGpu, KGroupCtasFitTwoPerSm) {
    for (Bin1GemmCase c : {Bin1GemmCase::kBinTern, Bin1GemmCase::kBoolTern, Bin1GemmCase::kTernTern,
                           Bin1GemmCase::kBoolBin}) {
        SCOPED_TRACE(k::bin1_gemm_case_name(c));
        EXPECT_GE(k::bin1_gemm_resident_ctas(c, Bin1GemmTile::kSmall, k::kBin1GemmKGroups), 2);
        for (Bin1GemmTile t : {Bin1GemmTile::kTiny, Bin1GemmTile::kSmall, Bin1GemmTile::kMedium,
                               Bin1GemmTile::kWide, Bin1GemmTile::kLarge})
            EXPECT_GE(k::bin1_gemm_resident_ctas(c, t, 1), 1) << k::bin1_gemm_tile_name(t);
    }
}

// k-group tiles walk their stages rotated by the tile's column index: every rotation (up to 24
// column tiles), stage counts 3 to 8, last stages holding 1 to 4 k-blocks, a partial last k-block
// and a partial last column tile, all exact.
TEST_F(Bin1GemmGpu, KGroupRotatedStagesExact) {
    int device = 0, sms = 0;
    TRIT_CUDA_CHECK(cudaGetDevice(&device));
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int64_t col_tiles = std::min(sms, 24);
    for (Bin1GemmCase c : {Bin1GemmCase::kBinTern, Bin1GemmCase::kBoolTern, Bin1GemmCase::kTernTern,
                           Bin1GemmCase::kBoolBin})
        for (int64_t kk : {2049, 2560, 3072, 4097, 6000, 8192}) {
            const int64_t m = 30, n = 32 * col_tiles - 5;
            SCOPED_TRACE(std::string(k::bin1_gemm_case_name(c)) + " k=" + std::to_string(kk));
            ASSERT_EQ(k::bin1_gemm_k_groups(c, Bin1GemmTile::kAuto, m, n, kk, sms), k::kBin1GemmKGroups);
            const Operands o = make_operands(c, m, n, kk, 7000 + kk);
            expect_equal(run_acc(c, o, m, n, kk, Bin1GemmTile::kAuto), o.ref, n, "acc");
            expect_equal(run_acc(c, o, m, n, kk, Bin1GemmTile::kAuto, true), o.ref, n, "acc b_early");
        }
}

TEST(Bin1GemmContract, ResidentCtasNeedsATileAndItsKGroups) {
    const auto rejected = [](Bin1GemmTile t, int groups, const std::string& part) {
        try {
            k::bin1_gemm_resident_ctas(Bin1GemmCase::kBoolTern, t, groups);
        } catch (const trit::Error& e) {
            if (std::string(e.what()).find(part) != std::string::npos) return ::testing::AssertionSuccess();
            return ::testing::AssertionFailure() << e.what();
        }
        return ::testing::AssertionFailure() << "no trit::Error";
    };
    EXPECT_TRUE(rejected(Bin1GemmTile::kAuto, 1, "bool_tern): name a tile, not auto"));
    EXPECT_TRUE(rejected(Bin1GemmTile::kMedium, k::kBin1GemmKGroups,
                         "k_groups=4 must be 1, or 4 with the small tile (got tile medium)"));
    EXPECT_TRUE(rejected(Bin1GemmTile::kSmall, 2, "k_groups=2 must be 1"));
}

// ---- timing (opt-in) -------------------------------------------------------------------------

// Median of `reps` event-timed runs of fn, in microseconds.
template <typename Fn>
float median_us(Fn fn, int reps) {
    cudaEvent_t e0, e1;
    TRIT_CUDA_CHECK(cudaEventCreate(&e0));
    TRIT_CUDA_CHECK(cudaEventCreate(&e1));
    for (int i = 0; i < 5; ++i)
        fn();
    std::vector<float> t;
    for (int i = 0; i < reps; ++i) {
        TRIT_CUDA_CHECK(cudaEventRecord(e0));
        fn();
        TRIT_CUDA_CHECK(cudaEventRecord(e1));
        TRIT_CUDA_CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        TRIT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1000.0f);
    }
    TRIT_CUDA_CHECK(cudaEventDestroy(e0));
    TRIT_CUDA_CHECK(cudaEventDestroy(e1));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

TEST_F(Bin1GemmGpu, TimingBwtaShapes) {
    const char* env = std::getenv("TRIT_BIN1_TIMING");
    if (env == nullptr || std::string(env) != "1") GTEST_SKIP() << "set TRIT_BIN1_TIMING=1";
    // Weights rotate through enough copies to exceed 2x a 50 MB L2 at the largest shape.
    struct NK {
        int64_t n, k;
    };
    std::printf("case,m,n,k,tile,gemm_us,quantize_gemm_us,gemm_tops\n");
    for (const NK nk : {NK{768, 768}, NK{3072, 768}, NK{768, 3072}}) {
        for (int64_t m : {1, 128, 512, 2048}) {
            const int64_t rw = f::tbits_row_words(nk.k);
            const int64_t w_words = nk.n * rw;
            const int copies =
                static_cast<int>(std::max<int64_t>(2, (int64_t{100} << 20) / (w_words * 4) + 1));
            DeviceBuffer<uint32_t> d_w(w_words * copies), d_a(2 * m * rw);
            DeviceBuffer<float> d_x(random_floats(m * nk.k, -1.0f, 1.0f, 9));
            DeviceBuffer<int32_t> d_acc(m * nk.n);
            TRIT_CUDA_CHECK(cudaMemset(d_w.get(), 0x35, w_words * copies * 4));
            k::tbits_quantize_ternary(d_x.get(), m, nk.k, 0.5f, d_a.get(), nullptr);
            k::ProductOut out;
            out.acc = d_acc.get();
            int rot = 0;
            const auto gemm = [&] {
                k::bin1_gemm(Bin1GemmCase::kBinTern, d_a.get(), m,
                             d_w.get() + (rot++ % copies) * w_words, nk.n, nk.k, out, nullptr);
            };
            const float t_gemm = median_us(gemm, 50);
            const float t_both = median_us(
                [&] {
                    k::tbits_quantize_ternary(d_x.get(), m, nk.k, 0.5f, d_a.get(), nullptr);
                    gemm();
                },
                50);
            int dev = 0, sms = 0;
            TRIT_CUDA_CHECK(cudaGetDevice(&dev));
            TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
            std::printf("bin_tern,%lld,%lld,%lld,%s,%.2f,%.2f,%.1f\n", (long long)m,
                        (long long)nk.n, (long long)nk.k,
                        k::bin1_gemm_tile_name(
                            k::bin1_gemm_choose_tile(Bin1GemmCase::kBinTern, m, nk.n, nk.k, sms)),
                        t_gemm, t_both, 2.0 * m * nk.n * nk.k / (t_gemm * 1e6));
        }
    }
}

}  // namespace
