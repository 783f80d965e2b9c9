// Validation reference and logit comparison: see reference.h.
#include "exporters/reference.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"
#include "core/quant_linear.h"
#include "exporters/format_table.h"

namespace trit::exporters {

void configure_reference(Model& model, const PackedModel& packed, bool use_file_codes) {
    for (auto& [name, layer] : quant_linears(model)) {
        const PackedLayer& p = packed.layer(name);
        TRIT_CHECK(p.out == layer->options.out_features() && p.in == layer->options.in_features(),
                   "layer ", name, ": the file's shape (", p.out, ", ", p.in,
                   ") differs from the checkpoint's model");
        if (!p.format.packed()) continue;
        LinearQuantSpec spec;
        spec.weight = p.spec;
        spec.activation = p.activation;
        if (p.activation == ActQuantMethod::kTernary) spec.act_mode = p.act.mode;
        layer->set_quant(spec);  // a layer trained with 2:4 sparsity keeps its stored mask (mask24)
        if (p.activation == ActQuantMethod::kTernary) {
            // set_quant gave the layer a fresh quantizer: the file's grid and (initialised) scale.
            layer->act->set_grid(p.act.grid);
            layer->act->set_scale(static_cast<double>(p.act.scale));
        }
        if (use_file_codes) {
            std::vector<int8_t> codes(static_cast<size_t>(p.out * p.in));
            unpack_codes(p.format, p.packed, p.out, p.in, codes.data());
            const torch::Tensor q = torch::from_blob(codes.data(), {p.out, p.in}, torch::kInt8).to(torch::kFloat32);
            const torch::Tensor s = torch::from_blob(const_cast<float*>(p.scale.data()), {p.scale_rows, p.scale_cols},
                                                     torch::kFloat32).clone();
            layer->freeze_weights({q, s});
        }
    }
    load_float_values(model, packed);
    model.eval();
}

Comparison compare_logits(const torch::Tensor& packed_in, const torch::Tensor& ref_in,
                          const torch::Tensor& labels_in) {
    torch::Tensor packed = packed_in.to(torch::kCPU, torch::kFloat64);
    torch::Tensor ref = ref_in.to(torch::kCPU, torch::kFloat64);
    torch::Tensor labels = labels_in.to(torch::kCPU);
    TRIT_CHECK(packed.sizes() == ref.sizes() && (packed.dim() == 2 || packed.dim() == 3),
               "compare_logits: shapes ", packed.sizes(), " and ", ref.sizes(),
               " differ or are neither (n, classes) nor (B, T, vocab)");
    TRIT_CHECK(labels.dim() == packed.dim() - 1 &&
                   labels.sizes() == packed.sizes().slice(0, packed.dim() - 1),
               "compare_logits: labels ", labels.sizes(), " do not fit logits ", packed.sizes());
    if (packed.dim() == 3) {
        packed = packed.reshape({-1, packed.size(2)});
        ref = ref.reshape({-1, ref.size(2)});
        labels = labels.reshape({-1});
    }
    Comparison c;
    c.examples = packed.size(0);
    if (c.examples == 0 || packed.size(1) == 0) return c;
    c.max_abs_error = (packed - ref).abs().max().item<double>();
    c.max_abs_logit = ref.abs().max().item<double>();
    c.relative_error = c.max_abs_logit > 0 ? c.max_abs_error / c.max_abs_logit : c.max_abs_error;
    torch::Tensor pa = packed.argmax(1), ra = ref.argmax(1);
    torch::Tensor agree = pa.eq(ra);
    c.agreements = agree.sum().item<int64_t>();
    torch::Tensor bad = (~agree).nonzero();
    if (bad.numel() > 0) c.first_disagreement = bad[0][0].item<int64_t>();
    c.packed_correct = pa.eq(labels).sum().item<int64_t>();
    c.reference_correct = ra.eq(labels).sum().item<int64_t>();
    return combine(Comparison{}, c);  // the fractions, from the counts
}

Comparison combine(const Comparison& a, const Comparison& b) {
    Comparison c;
    c.examples = a.examples + b.examples;
    c.max_abs_error = std::max(a.max_abs_error, b.max_abs_error);
    c.max_abs_logit = std::max(a.max_abs_logit, b.max_abs_logit);
    c.relative_error = c.max_abs_logit > 0 ? c.max_abs_error / c.max_abs_logit : c.max_abs_error;
    c.agreements = a.agreements + b.agreements;
    c.packed_correct = a.packed_correct + b.packed_correct;
    c.reference_correct = a.reference_correct + b.reference_correct;
    c.first_disagreement = a.first_disagreement >= 0   ? a.first_disagreement
                           : b.first_disagreement >= 0 ? a.examples + b.first_disagreement
                                                       : -1;
    if (c.examples > 0) {
        const double n = static_cast<double>(c.examples);
        c.top1_agreement = static_cast<double>(c.agreements) / n;
        c.packed_accuracy = static_cast<double>(c.packed_correct) / n;
        c.reference_accuracy = static_cast<double>(c.reference_correct) / n;
    }
    return c;
}

}  // namespace trit::exporters
