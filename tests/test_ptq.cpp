// Post-training quantization (quantizers/ptq.h): grids and the bt scale search, round to nearest,
// GPTQ against RTN and against a column-by-column reference with the full inverse Hessian, 2:4
// pruning, the Hessian accumulator, the layer output error, and the errors for bad input.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/weight_quant.h"
#include "quantizers/ptq.h"
#include "support/error_of.h"

namespace trit::quantizers {
namespace {

using trit::testing::expect_error;

torch::Tensor randn(std::vector<int64_t> shape, uint64_t seed) {
    torch::Generator gen = at::detail::createCPUGenerator(seed);
    return torch::randn(shape, gen, torch::kFloat32);
}

// Squared error of each group row (G, n) for scales (G).
torch::Tensor group_error(const Grid& grid, const torch::Tensor& w, const torch::Tensor& s) {
    torch::Tensor wd = w.to(torch::kFloat64), sd = s.to(torch::kFloat64).unsqueeze(1);
    return (wd - sd * grid_codes(grid, wd, sd)).square().sum(1);
}

std::vector<Grid> all_grids() {
    std::vector<Grid> g = {grid_absmean(), grid_absmax_threshold(0.05), grid_binary()};
    for (int64_t d = 1; d <= 4; ++d) {
        g.push_back(grid_balanced(d, ScaleRule::kStatistic));
        g.push_back(grid_balanced(d, ScaleRule::kSearch));
    }
    return g;
}

// Codes are integers in the grid: [-L, L], and +-1 only for binary.
void expect_codes_in_grid(const Grid& grid, const torch::Tensor& codes) {
    const double levels = static_cast<double>(grid_levels(grid));
    EXPECT_TRUE(torch::equal(codes, codes.round())) << grid_name(grid);
    EXPECT_LE(codes.abs().max().item<double>(), levels) << grid_name(grid);
    if (grid.kind == GridKind::kBinary) {
        EXPECT_TRUE((codes.abs() == 1).all().item<bool>());
    }
}

// A calibration problem with strongly correlated inputs: X = Z A, Z (rows, in) Gaussian, A a random
// mixing matrix plus a shared component, so the Hessian is far from diagonal.
struct Problem {
    torch::Tensor x, w, h;
};
Problem correlated_problem(int64_t rows, int64_t in, int64_t out, uint64_t seed) {
    Problem p;
    torch::Tensor z = randn({rows, in}, seed);
    torch::Tensor a = randn({in, in}, seed + 1) / std::sqrt(static_cast<double>(in));
    torch::Tensor common = randn({rows, 1}, seed + 2);
    p.x = z.mm(a) + 0.5 * common;
    p.w = randn({out, in}, seed + 3) * 0.05;
    HessianAccumulator acc(in);
    acc.add(p.x);
    p.h = acc.hessian();
    return p;
}

// ---------------------------------------------------------------------------------------------
// Grids and RTN

TEST(PtqGrid, BtSearchNeverWorseThanMaxOverL) {
    // Gaussian and heavy-tailed (Laplace) groups, full (64) and partial (37, 5, 1) widths.
    torch::Tensor gauss = randn({300, 64}, 11);
    torch::Tensor u = torch::rand({300, 64}, at::detail::createCPUGenerator(12)) * 0.999 + 0.0005;
    torch::Tensor laplace = -torch::log(u) * randn({300, 64}, 13).sign();
    for (int64_t d = 1; d <= 4; ++d) {
        for (const torch::Tensor& base : {gauss, laplace}) {
            for (int64_t width : {64, 37, 5, 1}) {
                torch::Tensor w = base.narrow(1, 0, width);
                torch::Tensor plain = grid_select_scale(grid_balanced(d, ScaleRule::kStatistic), w);
                const Grid search = grid_balanced(d, ScaleRule::kSearch);
                torch::Tensor best = grid_select_scale(search, w);
                torch::Tensor e_plain = group_error(search, w, plain);
                torch::Tensor e_best = group_error(search, w, best);
                // The plain scale is a candidate computed identically: no tolerance needed beyond
                // summation order (1e-12 relative).
                EXPECT_TRUE((e_best <= e_plain * (1 + 1e-12)).all().item<bool>())
                    << "d=" << d << " width=" << width;
                if (width >= 37) {  // the search must actually help on real groups
                    const double gain =
                        1.0 - e_best.sum().item<double>() / e_plain.sum().item<double>();
                    EXPECT_GT(gain, 0.02) << "d=" << d << " width=" << width;
                }
            }
        }
    }
}

TEST(PtqGrid, FusedCpuSearchMatchesTensorOps) {
    // The CPU search is a fused loop; the tensor-op search (used off the CPU) is its reference.
    // Summation order differs (sequential vs LibTorch's), so two candidates within an ulp of each
    // other may swap: the achieved errors must agree to 1e-12 and nearly all scales be identical.
    torch::Tensor u = torch::rand({500, 64}, at::detail::createCPUGenerator(41)) * 0.999 + 0.0005;
    torch::Tensor w = torch::cat({randn({500, 64}, 40), -torch::log(u) * randn({500, 64}, 42).sign()});
    for (int64_t d = 1; d <= 4; ++d) {
        for (bool fp16 : {false, true}) {
            Grid grid = grid_balanced(d, ScaleRule::kSearch);
            grid.fp16_scales = fp16;
            for (int64_t width : {64, 7}) {
                torch::Tensor v = w.narrow(1, 0, width).to(torch::kFloat64);  // as rtn and gptq call it
                torch::Tensor fused = grid_select_scale(grid, v);
                torch::Tensor ref = grid_search_scale_reference(grid, v);
                torch::Tensor e_fused = group_error(grid, v, fused), e_ref = group_error(grid, v, ref);
                EXPECT_TRUE(torch::allclose(e_fused, e_ref, 1e-12, 0)) << grid_name(grid) << " width=" << width;
                EXPECT_GE(torch::eq(fused, ref).to(torch::kFloat64).mean().item<double>(), 0.99)
                    << grid_name(grid) << " width=" << width;
            }
        }
    }
}

TEST(PtqGrid, Fp16ScalesAreFp16NumbersThatReproduceTheCodes) {
    torch::Tensor w = randn({64, 200}, 43) * 0.02;
    for (Grid grid : all_grids()) {
        grid.fp16_scales = true;
        const QuantizedLayer q = rtn_quantize(w, grid, 64);
        EXPECT_TRUE(torch::equal(q.scales, q.scales.to(torch::kHalf).to(torch::kFloat32))) << grid_name(grid);
        // Re-deriving the codes from the stored (fp16) scales gives the same codes.
        torch::Tensor s = q.scales.repeat_interleave(64, 1).narrow(1, 0, 200);
        EXPECT_TRUE(torch::equal(grid_codes(grid, w, s).add(0.0), q.codes)) << grid_name(grid);
    }
    EXPECT_EQ(grid_name([] {
                  Grid g = grid_balanced(2);
                  g.fp16_scales = true;
                  return g;
              }()),
              "bt2+search+fp16");
}

TEST(PtqGrid, BtSearchExactOnRepresentableWeights) {
    for (int64_t d = 1; d <= 4; ++d) {
        const int64_t levels = grid_levels(grid_balanced(d));
        for (int64_t width : {64, 13, 1}) {
            torch::Tensor c = torch::randint(-levels, levels + 1, {40, width},
                                             at::detail::createCPUGenerator(20 + d))
                                  .to(torch::kFloat32);
            c.select(1, 0).copy_(torch::where(c.select(1, 0) >= 0, 1.0f, -1.0f) * levels);  // max
            torch::Tensor s0 = torch::rand({40, 1}, at::detail::createCPUGenerator(30 + d)) + 0.01;
            torch::Tensor w = s0 * c;
            const Grid grid = grid_balanced(d, ScaleRule::kSearch);
            torch::Tensor s = grid_select_scale(grid, w);
            EXPECT_TRUE(torch::equal(grid_codes(grid, w, s.unsqueeze(1)), c)) << "d=" << d;
            EXPECT_TRUE(torch::allclose(s, s0.squeeze(1), /*rtol=*/1e-6, /*atol=*/0)) << "d=" << d;
            EXPECT_LE(group_error(grid, w, s).max().item<double>(),
                      1e-12 * w.square().sum().item<double>())
                << "d=" << d;
        }
    }
}

TEST(PtqRtn, CodesInGridAndDequantIsScaleTimesCodes) {
    torch::Tensor w = randn({7, 150}, 40);  // 150 = 2 * 64 + 22: a partial last group
    for (const Grid& grid : all_grids()) {
        const QuantizedLayer q = rtn_quantize(w, grid, 64);
        ASSERT_EQ(q.codes.sizes(), w.sizes());
        ASSERT_EQ(q.scales.sizes(), (std::vector<int64_t>{7, 3}));
        expect_codes_in_grid(grid, q.codes);
        torch::Tensor expanded = torch::cat({q.scales.select(1, 0).unsqueeze(1).expand({7, 64}),
                                             q.scales.select(1, 1).unsqueeze(1).expand({7, 64}),
                                             q.scales.select(1, 2).unsqueeze(1).expand({7, 22})},
                                            1);
        EXPECT_TRUE(torch::equal(q.dequant, expanded * q.codes)) << grid_name(grid);
        // The partial group is quantized on its own 22 weights.
        torch::Tensor tail_scale =
            grid_select_scale(grid, w.narrow(1, 128, 22).to(torch::kFloat64));
        EXPECT_TRUE(torch::equal(q.scales.select(1, 2), tail_scale.to(torch::kFloat32)))
            << grid_name(grid);
    }
}

TEST(PtqRtn, PartialGroupsEveryDepth) {
    for (int64_t d = 1; d <= 4; ++d) {
        for (int64_t in : {1, 5, 63, 65, 101}) {
            torch::Tensor w = randn({3, in}, 50 + in);
            const Grid grid = grid_balanced(d);
            const QuantizedLayer q = rtn_quantize(w, grid, 64);
            ASSERT_EQ(q.scales.size(1), (in + 63) / 64);
            expect_codes_in_grid(grid, q.codes);
            for (int64_t k = 0; k < q.scales.size(1); ++k) {
                const int64_t width = std::min<int64_t>(64, in - k * 64);
                torch::Tensor s =
                    grid_select_scale(grid, w.narrow(1, k * 64, width).to(torch::kFloat64));
                EXPECT_TRUE(torch::equal(q.scales.select(1, k), s.to(torch::kFloat32)))
                    << "d=" << d << " in=" << in << " group " << k;
            }
            // Every weight is represented: the error is bounded by half a step (max/L over 2) or
            // less, never the weight itself as if a column had been dropped.
            EXPECT_GT((q.codes != 0).sum().item<int64_t>(), 0);
        }
    }
}

TEST(PtqRtn, MatchesCoreQuantizersWithStatisticScales) {
    // Two paths that must agree: RTN with statistic scales and core's per-group quantize_weight.
    torch::Tensor w = randn({6, 100}, 60);
    struct Case {
        Grid grid;
        WeightQuantMethod method;
        int64_t depth;
    };
    for (const Case& c :
         {Case{grid_absmean(), WeightQuantMethod::kAbsmean, 1},
          Case{grid_absmax_threshold(0.05), WeightQuantMethod::kAbsmaxThreshold, 1},
          Case{grid_balanced(2, ScaleRule::kStatistic), WeightQuantMethod::kBalanced, 2},
          Case{grid_balanced(4, ScaleRule::kStatistic), WeightQuantMethod::kBalanced, 4}}) {
        WeightQuantSpec spec;
        spec.method = c.method;
        spec.granularity = ScaleGranularity::kGroup;
        spec.group_size = 32;
        spec.depth = c.depth;
        const QuantizedWeights core = quantize_weight(w, spec);
        const QuantizedLayer q = rtn_quantize(w, c.grid, 32);
        EXPECT_TRUE(torch::allclose(q.scales, core.scale, /*rtol=*/1e-6, /*atol=*/0))
            << grid_name(c.grid);
        EXPECT_TRUE(torch::equal(q.codes, core.q)) << grid_name(c.grid);
    }
}

// ---------------------------------------------------------------------------------------------
// GPTQ

// Column by column with the full inverse Hessian, O(n^3): after column c is processed, its row and
// column are eliminated from H^-1 (H^-1 <- H^-1 - H^-1[:, c] H^-1[c, :] / H^-1[c, c]), so H^-1 is
// always the inverse Hessian of the columns not yet processed. Scales and 2:4 masks are chosen
// from the current weights when a group's first column (in processing order) comes up.
struct Reference {
    torch::Tensor codes, scales;
    double loss = 0.0;
};
Reference reference_gptq(const torch::Tensor& w_in, const torch::Tensor& h_in, const Grid& grid,
                         int64_t g, double damp, bool act_order, bool prune_magnitude) {
    torch::Tensor w = w_in.to(torch::kFloat64).clone(), h = h_in.to(torch::kFloat64).clone();
    const int64_t out = w.size(0), n = w.size(1), groups = (n + g - 1) / g;
    torch::Tensor dead = h.diagonal() == 0;
    h.diagonal().masked_fill_(dead, 1.0);
    w.masked_fill_(dead.unsqueeze(0), 0.0);
    torch::Tensor order = torch::arange(n);
    if (act_order) order = std::get<1>(torch::sort(h.diagonal(), true, 0, true));
    torch::Tensor hinv = torch::inverse(h + torch::eye(n, torch::kFloat64) *
                                                (damp * h.diagonal().mean().item<double>()));
    Reference r;
    r.codes = torch::zeros({out, n}, torch::kFloat64);
    r.scales = torch::zeros({out, groups}, torch::kFloat64);
    torch::Tensor keep = torch::ones({out, n}, torch::kBool);
    std::vector<bool> group_done(groups, false), quad_done((n + 3) / 4, false);
    for (int64_t p = 0; p < n; ++p) {
        const int64_t c = order[p].item<int64_t>(), k = c / g;
        if (prune_magnitude && !quad_done[c / 4]) {
            const int64_t b = c / 4 * 4, width = std::min<int64_t>(4, n - b);
            keep.narrow(1, b, width).copy_(prune24_mask_from_scores(w.narrow(1, b, width).abs()));
            quad_done[c / 4] = true;
        }
        if (!group_done[k]) {
            const int64_t width = std::min(g, n - k * g);
            r.scales.select(1, k).copy_(grid_select_scale(grid, w.narrow(1, k * g, width)));
            group_done[k] = true;
        }
        torch::Tensor s = r.scales.select(1, k), col = w.select(1, c).clone();
        torch::Tensor code = grid_codes(grid, col, s) * keep.select(1, c);
        r.codes.select(1, c).copy_(code);
        const double d = hinv[c][c].item<double>();
        torch::Tensor e = (col - code * s) / d;
        r.loss += (col - code * s).square().sum().item<double>() / d;
        w -= e.unsqueeze(1) * hinv.select(0, c).unsqueeze(0);
        hinv = hinv - hinv.select(1, c).unsqueeze(1) * hinv.select(0, c).unsqueeze(0) / d;
    }
    return r;
}

TEST(Gptq, IdentityHessianEqualsRtn) {
    torch::Tensor w = randn({16, 100}, 70);
    torch::Tensor h = torch::eye(100, torch::kFloat64) * 2.0;
    for (const Grid& grid : all_grids()) {
        const QuantizedLayer rtn = rtn_quantize(w, grid, 32);
        GptqOptions opt;
        opt.group_size = 32;
        opt.block_size = 24;
        const GptqResult q = gptq_quantize(w, h, grid, opt);
        EXPECT_TRUE(torch::equal(q.layer.codes, rtn.codes)) << grid_name(grid);
        EXPECT_TRUE(torch::equal(q.layer.scales, rtn.scales)) << grid_name(grid);
        EXPECT_TRUE(torch::equal(q.layer.dequant, rtn.dequant)) << grid_name(grid);
    }
}

TEST(Gptq, MatchesUnblockedReference) {
    const Problem p = correlated_problem(96, 22, 6, 80);  // 22 = 2 * 8 + 6: partial group and quad
    struct Case {
        Grid grid;
        bool act_order, prune;
    };
    for (const Case& c : {Case{grid_balanced(2, ScaleRule::kSearch), false, false},
                          Case{grid_absmean(), false, false},
                          Case{grid_balanced(3, ScaleRule::kSearch), true, false},
                          Case{grid_balanced(1, ScaleRule::kStatistic), false, true},
                          Case{grid_balanced(2, ScaleRule::kSearch), true, true}}) {
        const Reference ref = reference_gptq(p.w, p.h, c.grid, 8, 0.01, c.act_order, c.prune);
        for (int64_t block : {1, 3, 128}) {
            GptqOptions opt;
            opt.group_size = 8;
            opt.block_size = block;
            opt.act_order = c.act_order;
            opt.prune24 = c.prune;
            opt.prune_criterion = PruneCriterion::kMagnitude;
            const GptqResult q = gptq_quantize(p.w, p.h, c.grid, opt);
            const std::string what = grid_name(c.grid) + (c.act_order ? " act_order" : "") +
                                     (c.prune ? " 2:4" : "") + " block " + std::to_string(block);
            EXPECT_TRUE(torch::equal(q.layer.codes, ref.codes.to(torch::kFloat32))) << what;
            // Same scales up to summation order (float64 sums rounded to float32).
            EXPECT_TRUE(torch::allclose(q.layer.scales, ref.scales.to(torch::kFloat32), 1e-6, 0))
                << what;
            EXPECT_NEAR(q.loss, ref.loss, 1e-9 * ref.loss) << what;
        }
    }
}

TEST(Gptq, BeatsRtnOnCorrelatedInputs) {
    const Problem p = correlated_problem(512, 128, 64, 90);
    struct Case {
        Grid grid;
        double max_ratio;  // GPTQ / RTN output error, asserted; measured values are printed
    };
    // Measured (seed 90): ratios 0.43-0.60 with searched scales; 0.75 leaves room for other seeds.
    for (const Case& c :
         {Case{grid_absmean(), 0.75}, Case{grid_balanced(1), 0.75}, Case{grid_balanced(2), 0.75},
          Case{grid_balanced(3), 0.75}, Case{grid_balanced(2, ScaleRule::kStatistic), 0.75},
          Case{grid_balanced(3, ScaleRule::kStatistic), 0.75}}) {
        const QuantizedLayer rtn = rtn_quantize(p.w, c.grid, 64);
        const GptqResult q = gptq_quantize(p.w, p.h, c.grid);
        const OutputError e_rtn = layer_output_error(p.x, p.w, rtn.dequant);
        const OutputError e_gptq = layer_output_error(p.x, p.w, q.layer.dequant);
        std::printf("[ptq] %-12s output rel. error: RTN %.4e  GPTQ %.4e  ratio %.3f\n",
                    grid_name(c.grid).c_str(), e_rtn.relative, e_gptq.relative,
                    e_gptq.mse / e_rtn.mse);
        EXPECT_LT(e_gptq.mse, c.max_ratio * e_rtn.mse) << grid_name(c.grid);
        // The reported loss is sum_rows e (H + lambda I) e^T with e = W - Q.
        torch::Tensor e = p.w.to(torch::kFloat64) - q.layer.dequant.to(torch::kFloat64);
        const double lambda = 0.01 * p.h.diagonal().mean().item<double>();
        const double expected =
            2.0 / 512 * e_gptq.mse * 512 * 64 + lambda * e.square().sum().item<double>();
        EXPECT_NEAR(q.loss, expected, 1e-6 * expected) << grid_name(c.grid);
    }
}

TEST(Gptq, ActOrderValidAndBeatsRtn) {
    const Problem p = correlated_problem(512, 128, 64, 100);
    // Inputs of very different scales make act_order matter.
    torch::Tensor col_scale = torch::linspace(0.2, 3.0, 128);
    const torch::Tensor x = p.x * col_scale;
    HessianAccumulator acc(128);
    acc.add(x);
    const torch::Tensor h = acc.hessian();
    for (const Grid& grid : {grid_absmean(), grid_balanced(2), grid_balanced(3)}) {
        const OutputError e_rtn = layer_output_error(x, p.w, rtn_quantize(p.w, grid, 64).dequant);
        for (bool static_groups : {false, true}) {
            GptqOptions opt;
            opt.act_order = true;
            opt.static_groups = static_groups;
            const GptqResult q = gptq_quantize(p.w, h, grid, opt);
            expect_codes_in_grid(grid, q.layer.codes);
            ASSERT_EQ(q.layer.scales.sizes(), (std::vector<int64_t>{64, 2}));
            EXPECT_TRUE(torch::equal(q.layer.dequant,
                                     dequantize_groups(q.layer.codes, q.layer.scales, 64)));
            const OutputError e = layer_output_error(x, p.w, q.layer.dequant);
            std::printf("[ptq] %-12s act_order%s: RTN %.4e  GPTQ %.4e\n", grid_name(grid).c_str(),
                        static_groups ? "+static" : "", e_rtn.relative, e.relative);
            EXPECT_LE(e.mse, e_rtn.mse) << grid_name(grid) << " static " << static_groups;
        }
    }
}

TEST(Gptq, DeadInputColumn) {
    Problem p = correlated_problem(256, 40, 8, 110);
    p.x.select(1, 5).zero_();
    p.x.select(1, 17).zero_();
    HessianAccumulator acc(40);
    acc.add(p.x);
    const torch::Tensor h = acc.hessian();
    ASSERT_EQ(h[5][5].item<double>(), 0.0);
    for (bool act_order : {false, true}) {
        GptqOptions opt;
        opt.group_size = 16;
        opt.act_order = act_order;
        const GptqResult q = gptq_quantize(p.w, h, grid_balanced(2), opt);
        EXPECT_EQ(q.dead_inputs, 2);
        EXPECT_TRUE(torch::isfinite(q.layer.dequant).all().item<bool>());
        EXPECT_TRUE((q.layer.codes.select(1, 5) == 0).all().item<bool>());
        EXPECT_TRUE((q.layer.codes.select(1, 17) == 0).all().item<bool>());
        EXPECT_LE(
            layer_output_error(p.x, p.w, q.layer.dequant).mse,
            layer_output_error(p.x, p.w, rtn_quantize(p.w, grid_balanced(2), 16).dequant).mse);
    }
}

TEST(Gptq, NonPositiveDefiniteHessianRetriesDamping) {
    // H = Q diag(lambda) Q^T with one eigenvalue -0.05 (mean diagonal ~1): damp 0.01 is not enough,
    // 0.1 is.
    const int64_t n = 24;
    torch::Tensor qm = std::get<0>(torch::linalg_qr(randn({n, n}, 120).to(torch::kFloat64)));
    torch::Tensor lambda =
        torch::rand({n}, at::detail::createCPUGenerator(121)).to(torch::kFloat64) + 0.5;
    lambda[0] = -0.05;
    torch::Tensor h = qm.mm(torch::diag(lambda)).mm(qm.t());
    h = (h + h.t()) / 2;
    torch::Tensor w = randn({4, n}, 122);
    const GptqResult q = gptq_quantize(w, h, grid_balanced(2));
    EXPECT_EQ(q.damp_retries, 1);
    EXPECT_NEAR(q.damp, 0.1, 1e-12);
    EXPECT_TRUE(torch::isfinite(q.layer.dequant).all().item<bool>());
    GptqOptions no_retry;
    no_retry.max_damp_retries = 0;
    expect_error([&] { gptq_quantize(w, h, grid_balanced(2), no_retry); },
                 {"gptq_quantize", "not positive definite", "damp"});
}

// ---------------------------------------------------------------------------------------------
// 2:4 pruning

void expect_2_of_4(const torch::Tensor& keep) {
    const int64_t out = keep.size(0), in = keep.size(1);
    for (int64_t b = 0; b < in; b += 4) {
        const int64_t width = std::min<int64_t>(4, in - b);
        torch::Tensor kept = keep.narrow(1, b, width).sum(1);
        EXPECT_TRUE((kept == std::min<int64_t>(2, width)).all().item<bool>()) << "columns " << b;
    }
    (void)out;
}

TEST(PtqPrune24, MagnitudeKeepsTheLargest) {
    for (int64_t in : {16, 13, 14, 15, 1, 2, 3}) {  // partial last groups of 1, 2 and 3
        torch::Tensor w = randn({5, in}, 130 + in);
        torch::Tensor keep = prune24_mask(w, PruneCriterion::kMagnitude);
        expect_2_of_4(keep);
        auto wa = w.accessor<float, 2>();
        auto ka = keep.accessor<bool, 2>();
        for (int64_t r = 0; r < 5; ++r)
            for (int64_t b = 0; b < in; b += 4)
                for (int64_t i = b; i < std::min<int64_t>(b + 4, in); ++i)
                    for (int64_t j = b; j < std::min<int64_t>(b + 4, in); ++j)
                        if (ka[r][i] && !ka[r][j]) {  // every kept weight >= every dropped one
                            EXPECT_GE(std::abs(wa[r][i]), std::abs(wa[r][j]));
                        }
    }
}

TEST(PtqPrune24, SaliencyWithIdentityHessianIsMagnitude) {
    torch::Tensor w = randn({9, 31}, 140);
    torch::Tensor h = torch::eye(31, torch::kFloat64) * 3.0;
    EXPECT_TRUE(torch::equal(prune24_mask(w, PruneCriterion::kSaliency, h),
                             prune24_mask(w, PruneCriterion::kMagnitude)));
}

TEST(PtqPrune24, SaliencyUsesTheInverseHessianDiagonal) {
    // Diagonal H: saliency = w^2 * H_ii / (1 + ...) ~ w^2 H_ii: a column with a large H_ii keeps a
    // smaller weight.
    torch::Tensor w = torch::tensor({{1.0f, 0.9f, 0.5f, 0.1f}});
    torch::Tensor h = torch::diag(torch::tensor({1.0, 1.0, 10.0, 1.0}));
    torch::Tensor keep = prune24_mask(w, PruneCriterion::kSaliency, h, 0.0);
    EXPECT_TRUE(torch::equal(keep, torch::tensor({{true, false, true, false}})));
}

TEST(PtqPrune24, RtnAndGptqWithMask) {
    const Problem p = correlated_problem(512, 126, 32, 150);  // 126: a partial last quad of 2
    for (PruneCriterion crit : {PruneCriterion::kMagnitude, PruneCriterion::kSaliency}) {
        torch::Tensor keep = prune24_mask(p.w, crit, p.h);
        const QuantizedLayer rtn = rtn_quantize(p.w, grid_balanced(2), 64, keep);
        expect_2_of_4(keep);
        EXPECT_TRUE((rtn.codes.masked_select(keep.logical_not()) == 0).all().item<bool>());
        GptqOptions opt;
        opt.prune24 = true;
        opt.prune_criterion = crit;
        const GptqResult q = gptq_quantize(p.w, p.h, grid_balanced(2), opt);
        ASSERT_TRUE(q.keep.defined());
        expect_2_of_4(q.keep);
        expect_2_of_4(q.keep);
        EXPECT_TRUE((q.layer.codes.masked_select(q.keep.logical_not()) == 0).all().item<bool>());
        const double e_rtn = layer_output_error(p.x, p.w, rtn.dequant).relative;
        const double e_gptq = layer_output_error(p.x, p.w, q.layer.dequant).relative;
        std::printf("[ptq] bt2 2:4 %s: RTN %.4e  GPTQ %.4e\n", prune_criterion_name(crit), e_rtn,
                    e_gptq);
        EXPECT_LT(e_gptq, 0.9 * e_rtn) << prune_criterion_name(crit);
    }
}

// ---------------------------------------------------------------------------------------------
// Hessian, output error, errors

TEST(PtqHessian, BatchesAccumulateToTheFullHessian) {
    torch::Tensor x = randn({70, 12}, 160);
    HessianAccumulator acc(12);
    acc.add(x.narrow(0, 0, 30));
    acc.add(x.narrow(0, 30, 40).reshape({4, 10, 12}));  // any leading shape
    EXPECT_EQ(acc.rows(), 70);
    torch::Tensor xd = x.to(torch::kFloat64);
    EXPECT_TRUE(torch::allclose(acc.hessian(), xd.t().mm(xd) * (2.0 / 70), 1e-12, 1e-12));
}

TEST(PtqOutputError, HandComputed) {
    torch::Tensor x = torch::tensor({{1.0f, 2.0f}, {0.0f, 1.0f}});
    torch::Tensor w = torch::tensor({{1.0f, 1.0f}});  // outputs 3, 1: mean square 5
    EXPECT_EQ(layer_output_error(x, w, w).mse, 0.0);
    const OutputError e = layer_output_error(x, w, torch::tensor({{1.0f, 0.0f}}));  // outputs 1, 0
    EXPECT_DOUBLE_EQ(e.mse, (4.0 + 1.0) / 2);
    EXPECT_DOUBLE_EQ(e.relative, 2.5 / 5.0);
    EXPECT_DOUBLE_EQ(layer_output_error(x, w, torch::zeros({1, 2})).relative, 1.0);
}

TEST(PtqErrors, BadInputsNameTheParameter) {
    torch::Tensor w = randn({4, 8}, 170);
    torch::Tensor h = torch::eye(8, torch::kFloat64);
    expect_error([&] { rtn_quantize(w, grid_balanced(2), 0); }, {"group_size", "0"});
    GptqOptions opt;
    opt.group_size = 0;
    expect_error([&] { gptq_quantize(w, h, grid_balanced(2), opt); }, {"group_size", "0"});
    opt = {};
    opt.damp = -0.1;
    expect_error([&] { gptq_quantize(w, h, grid_balanced(2), opt); }, {"damp", "-0.1"});
    expect_error([&] { prune24_mask(w, PruneCriterion::kSaliency, h, -1.0); }, {"damp"});
    opt = {};
    opt.block_size = 0;
    expect_error([&] { gptq_quantize(w, h, grid_balanced(2), opt); }, {"block_size"});
    expect_error([&] { gptq_quantize(w, torch::eye(7), grid_balanced(2)); },
                 {"H must be (in, in) = (8, 8)", "[7, 7]"});
    expect_error([&] { prune24_mask(w, PruneCriterion::kSaliency, torch::eye(7)); }, {"H must be"});
    expect_error([&] { prune24_mask(w, PruneCriterion::kSaliency); }, {"needs the Hessian"});
    for (int64_t d : {0, 5}) {
        expect_error([&] { rtn_quantize(w, grid_balanced(d), 64); }, {"depth", std::to_string(d)});
        expect_error([&] { gptq_quantize(w, h, grid_balanced(d)); }, {"depth", std::to_string(d)});
        expect_error([&] { grid_select_scale(grid_balanced(d), w); }, {"depth"});
    }
    Grid bad = grid_absmean();
    bad.scale_rule = ScaleRule::kSearch;
    expect_error([&] { rtn_quantize(w, bad, 64); }, {"search", "balanced"});
    expect_error(
        [&] {
            rtn_quantize(w, grid_binary(), 64, torch::ones({4, 8}, torch::kBool));
        },
        {"binary"});
    expect_error(
        [&] {
            rtn_quantize(w, grid_balanced(2), 64, torch::ones({4, 7}, torch::kBool));
        },
        {"keep"});
    expect_error([&] { layer_output_error(torch::ones({3, 7}), w, w); }, {"X must be"});
    expect_error([&] { HessianAccumulator(8).hessian(); }, {"no calibration rows"});
    expect_error([&] { HessianAccumulator(8).add(torch::ones({3, 7})); }, {"(..., 8)"});
}

}  // namespace
}  // namespace trit::quantizers
