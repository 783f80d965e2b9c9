// GPTQ with optional 2:4 pruning: see gptq.h.
#include "quantizers/gptq.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "quantizers/hessian.h"

namespace trit::quantizers {
namespace {

torch::Tensor index_tensor(const std::vector<int64_t>& v, const torch::Device& device) {
    return torch::tensor(v, torch::TensorOptions().dtype(torch::kInt64)).to(device);
}

std::vector<int64_t> column_range(int64_t begin, int64_t end) {
    std::vector<int64_t> v;
    for (int64_t c = begin; c < end; ++c)
        v.push_back(c);
    return v;
}

}  // namespace

GptqResult gptq_quantize(const torch::Tensor& weight, const torch::Tensor& hessian,
                         const Grid& grid, const GptqOptions& opt) {
    grid_check(grid);
    TRIT_CHECK(weight.dim() == 2 && weight.size(0) >= 1 && weight.size(1) >= 1,
               "gptq_quantize: expected a 2-D (out, in) weight W, got ", weight.sizes());
    TRIT_CHECK(weight.is_floating_point(), "gptq_quantize: W must be floating point, got ",
               weight.scalar_type());
    const int64_t out = weight.size(0), n = weight.size(1);
    TRIT_CHECK(
        hessian.defined() && hessian.dim() == 2 && hessian.size(0) == n && hessian.size(1) == n,
        "gptq_quantize: H must be (in, in) = (", n, ", ", n, ") for W ", weight.sizes(), ", got ",
        hessian.defined() ? hessian.sizes() : torch::IntArrayRef{});
    TRIT_CHECK(opt.group_size >= 1, "gptq_quantize: group_size must be >= 1, got ", opt.group_size);
    TRIT_CHECK(opt.block_size >= 1, "gptq_quantize: block_size must be >= 1, got ", opt.block_size);
    TRIT_CHECK(opt.damp >= 0.0 && std::isfinite(opt.damp), "gptq_quantize: damp must be >= 0, got ",
               opt.damp);
    TRIT_CHECK(!opt.prune24 || grid.kind != GridKind::kBinary,
               "gptq_quantize: prune24 needs a grid with a zero code, got binary");
    torch::NoGradGuard no_grad;
    const torch::Device device = weight.device();
    const auto f64 = torch::TensorOptions().dtype(torch::kFloat64).device(device);
    torch::Tensor w = weight.detach().to(f64).clone();
    TRIT_CHECK(torch::isfinite(w).all().item<bool>(), "gptq_quantize: W holds a non-finite value");
    torch::Tensor h = hessian.detach().to(f64).clone();

    // 1. Dead inputs.
    GptqResult r;
    torch::Tensor dead = h.diagonal() == 0;
    r.dead_inputs = dead.sum().item<int64_t>();
    h.diagonal().masked_fill_(dead, 1.0);
    w.masked_fill_(dead.unsqueeze(0), 0.0);

    // 2. Processing order: perm[p] = original column at position p; pos is its inverse.
    torch::Tensor perm_t = torch::arange(n, f64.dtype(torch::kInt64));
    if (opt.act_order)
        perm_t = std::get<1>(torch::sort(h.diagonal(), /*stable=*/true, /*dim=*/0,
                                         /*descending=*/true));
    torch::Tensor perm_cpu = perm_t.to(torch::kCPU).contiguous();
    std::vector<int64_t> perm(perm_cpu.data_ptr<int64_t>(), perm_cpu.data_ptr<int64_t>() + n);
    std::vector<int64_t> pos(n);
    for (int64_t p = 0; p < n; ++p)
        pos[perm[p]] = p;
    h = h.index_select(0, perm_t).index_select(1, perm_t);

    // 3. U with U^T U = (H + lambda I)^-1, processing order.
    const InverseHessian inv = inverse_hessian(h, opt.damp, opt.max_damp_retries, "gptq_quantize");
    const torch::Tensor& u = inv.h_inv_chol;
    r.damp = inv.damp;
    r.damp_retries = inv.retries;
    const torch::Tensor u_diag_sq = u.diagonal().square();  // (n) in processing order

    const int64_t g = opt.group_size, groups = (n + g - 1) / g, quads = (n + 3) / 4;
    torch::Tensor scales = torch::zeros({out, groups}, f64);
    torch::Tensor codes = torch::zeros({out, n}, f64);  // original column order
    torch::Tensor keep;                                 // original column order
    if (opt.prune24) keep = torch::ones({out, n}, f64.dtype(torch::kBool));
    std::vector<bool> group_done(groups, false), quad_done(quads, false);
    if (opt.static_groups) {
        for (int64_t k = 0; k < groups; ++k) {
            const int64_t begin = k * g, width = std::min(n, begin + g) - begin;
            scales.select(1, k).copy_(grid_select_scale(grid, w.narrow(1, begin, width)));
            group_done[k] = true;
        }
    }
    torch::Tensor wp = w.index_select(1, perm_t);  // current weights, processing order
    torch::Tensor loss = torch::zeros({}, f64);

    // 4. Blocks of columns; inside a block every update is applied at once, beyond it lazily.
    for (int64_t i1 = 0; i1 < n; i1 += opt.block_size) {
        const int64_t i2 = std::min(n, i1 + opt.block_size), count = i2 - i1;
        torch::Tensor w1 = wp.narrow(1, i1, count).clone();  // (out, count)
        torch::Tensor err1 = torch::zeros({out, count}, f64);
        torch::Tensor u1 = u.narrow(0, i1, count).narrow(1, i1, count);
        // The current (error-updated) weights of original columns `cols`, all not yet processed,
        // at local step i: in-block columns are in w1; later ones still lack this block's updates.
        auto current = [&](const std::vector<int64_t>& cols, int64_t i) {
            std::vector<int64_t> in_block, in_block_at, later, later_at;
            for (size_t j = 0; j < cols.size(); ++j) {
                const int64_t p = pos[cols[j]];
                if (p < i2) {
                    in_block.push_back(p - i1);
                    in_block_at.push_back(static_cast<int64_t>(j));
                } else {
                    later.push_back(p);
                    later_at.push_back(static_cast<int64_t>(j));
                }
            }
            torch::Tensor vals = torch::empty({out, static_cast<int64_t>(cols.size())}, f64);
            if (!in_block.empty())
                vals.index_copy_(1, index_tensor(in_block_at, device),
                                 w1.index_select(1, index_tensor(in_block, device)));
            if (!later.empty()) {
                torch::Tensor lp = index_tensor(later, device);
                torch::Tensor v = wp.index_select(1, lp);
                if (i > 0) v = v - err1.narrow(1, 0, i).mm(u.narrow(0, i1, i).index_select(1, lp));
                vals.index_copy_(1, index_tensor(later_at, device), v);
            }
            return vals;
        };
        for (int64_t i = 0; i < count; ++i) {
            const int64_t c = perm[i1 + i];
            if (opt.prune24 && !quad_done[c / 4]) {
                const std::vector<int64_t> cols =
                    column_range(c / 4 * 4, std::min(n, c / 4 * 4 + 4));
                torch::Tensor vals = current(cols, i);
                torch::Tensor scores = vals.abs();
                if (opt.prune_criterion == PruneCriterion::kSaliency) {
                    std::vector<int64_t> ps;
                    for (int64_t col : cols)
                        ps.push_back(pos[col]);
                    scores = vals.square() / u_diag_sq.index_select(0, index_tensor(ps, device));
                }
                keep.narrow(1, cols.front(), static_cast<int64_t>(cols.size()))
                    .copy_(prune24_mask_from_scores(scores));
                quad_done[c / 4] = true;
            }
            const int64_t k = c / g;
            if (!group_done[k]) {
                torch::Tensor vals = current(column_range(k * g, std::min(n, k * g + g)), i);
                scales.select(1, k).copy_(grid_select_scale(grid, vals));
                group_done[k] = true;
            }
            torch::Tensor col = w1.select(1, i);  // (out)
            torch::Tensor s = scales.select(1, k);
            torch::Tensor code = grid_codes(grid, col, s);
            if (opt.prune24) code = code * keep.select(1, c);
            codes.select(1, c).copy_(code);
            torch::Tensor d = u1.select(0, i).select(0, i);
            torch::Tensor e = (col - code * s) / d;  // (out)
            loss += e.square().sum();
            w1.narrow(1, i, count - i)
                .sub_(e.unsqueeze(1) * u1.select(0, i).narrow(0, i, count - i));
            err1.select(1, i).copy_(e);
        }
        if (i2 < n)
            wp.narrow(1, i2, n - i2).sub_(err1.mm(u.narrow(0, i1, count).narrow(1, i2, n - i2)));
    }

    r.loss = loss.item<double>();
    r.layer.group_size = g;
    r.layer.codes = codes.to(torch::kFloat32).add(0.0);
    r.layer.scales = scales.to(torch::kFloat32);
    r.layer.dequant = dequantize_groups(r.layer.codes, r.layer.scales, g);
    if (opt.prune24) r.keep = keep;
    return r;
}

}  // namespace trit::quantizers
