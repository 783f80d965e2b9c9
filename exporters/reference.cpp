// Validation reference and logit comparison: see reference.h.
#include "exporters/reference.h"

#include <torch/torch.h>

#include "core/error.h"
#include "core/quant_linear.h"

namespace trit::exporters {

void configure_reference(Model& model, const PackedModel& packed) {
    torch::NoGradGuard no_grad;
    for (auto& [name, layer] : quant_linears(model)) {
        const PackedLayer& p = packed.layer(name);
        TRIT_CHECK(p.out == layer->options.out_features() && p.in == layer->options.in_features(),
                   "layer ", name, ": the file's shape (", p.out, ", ", p.in,
                   ") differs from the checkpoint's model");
        if (p.format.packed()) {
            LinearQuantSpec spec;
            spec.weight = p.spec;
            spec.activation = p.activation;
            layer->set_quant(spec);
        } else {
            layer->set_quant(LinearQuantSpec{});
            layer->weight.copy_(torch::from_blob(const_cast<float*>(p.weight.data()), {p.out, p.in},
                                                 torch::kFloat32));
        }
    }
    model.eval();
}

Comparison compare_logits(const torch::Tensor& packed_in, const torch::Tensor& ref_in,
                          const torch::Tensor& labels_in) {
    torch::Tensor packed = packed_in.to(torch::kCPU, torch::kFloat64);
    torch::Tensor ref = ref_in.to(torch::kCPU, torch::kFloat64);
    torch::Tensor labels = labels_in.to(torch::kCPU);
    TRIT_CHECK(packed.sizes() == ref.sizes() && packed.dim() == 2, "compare_logits: shapes ",
               packed.sizes(), " and ", ref.sizes(), " differ");
    Comparison c;
    c.examples = packed.size(0);
    if (c.examples == 0) return c;
    c.max_abs_error = (packed - ref).abs().max().item<double>();
    c.max_abs_logit = ref.abs().max().item<double>();
    c.relative_error = c.max_abs_logit > 0 ? c.max_abs_error / c.max_abs_logit : c.max_abs_error;
    torch::Tensor pa = packed.argmax(1), ra = ref.argmax(1);
    torch::Tensor agree = pa.eq(ra);
    c.top1_agreement = agree.to(torch::kFloat64).mean().item<double>();
    torch::Tensor bad = (~agree).nonzero();
    if (bad.numel() > 0) c.first_disagreement = bad[0][0].item<int64_t>();
    c.packed_accuracy = pa.eq(labels).to(torch::kFloat64).mean().item<double>();
    c.reference_accuracy = ra.eq(labels).to(torch::kFloat64).mean().item<double>();
    return c;
}

}  // namespace trit::exporters
