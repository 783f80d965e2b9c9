// The CPU reference runtime: runs a PackedModel from its packed codes. Packed layers quantize their
// input as the file says (int8 per token with act_int8_quantize_ref, or none), multiply with the
// format's reference product (exact int32 accumulators per scale group, or float), then
// y[i][j] = s_x[i] * sum_g (s_w[j][g] * acc[i][j][g]) + b[j] (sum over g in increasing order, in
// float; without activation quantization s_x = 1 and acc is the float product). Float layers use
// their stored weights. This is the contract the CUDA runtime must match.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "exporters/packed_model.h"

namespace trit::exporters {

// One layer on a (m, in) float input: (m, out) float output.
torch::Tensor layer_forward_cpu(const PackedLayer& layer, const torch::Tensor& x);

// The integer accumulators of a packed layer with int8 activations: (m, out, G) int32, from the
// input's int8 codes (m, in). Exposed for tests that check them against the exact product.
std::vector<int32_t> layer_accumulators(const PackedLayer& layer, const int8_t* x_codes, int64_t m);

// The whole model: (batch, features) -> logits.
torch::Tensor forward_cpu(const PackedModel& model, const torch::Tensor& x);

}  // namespace trit::exporters
