// Ternary weight quantizers for (out, in) weights. absmean (BitNet b1.58): g = mean|W| per scale
// granule, W_q = clip(round(W / (g + eps)), -1, 1). absmax_threshold (BitTorch): a = max|W| per
// granule, W_q = sign(W) where |W| > lambda * a, else 0. W_eff = scale * W_q. Scales are statistics:
// computed without autograd, they never receive a gradient.
#pragma once

#include <torch/types.h>

#include <string>

namespace trit {

inline constexpr float kAbsmeanEps = 1e-5f;  // keeps W / (g + eps) finite for an all-zero granule

enum class WeightQuantMethod { kNone, kAbsmean, kAbsmaxThreshold };
enum class ScaleGranularity { kTensor, kChannel, kGroup };

struct WeightQuantSpec {
    WeightQuantMethod method = WeightQuantMethod::kNone;
    ScaleGranularity granularity = ScaleGranularity::kChannel;
    int64_t group_size = 64;  // input weights per scale (kGroup); the last group may be partial
    double threshold = 0.05;  // lambda of absmax_threshold
};

WeightQuantMethod parse_weight_quant_method(const std::string& name);
ScaleGranularity parse_scale_granularity(const std::string& name);

struct TernaryWeights {
    torch::Tensor q;      // (out, in) float32 in {-1, 0, +1}
    torch::Tensor scale;  // (1, 1) tensor, (out, 1) channel, (out, ceil(in / group)) group
};

// Quantizes a 2-D weight; the result carries no autograd history.
TernaryWeights ternary_quantize(const torch::Tensor& w, const WeightQuantSpec& spec);
// Broadcasts `scale` back to the (out, in) weight shape.
torch::Tensor expand_scale(const torch::Tensor& scale, const WeightQuantSpec& spec, int64_t in);
// scale * q in the weight's shape.
torch::Tensor dequantize(const TernaryWeights& t, const WeightQuantSpec& spec);

// The training forward's effective weight: forward gives scale * W_q, backward passes the
// gradient straight through to `w` unchanged (STE). method = none returns `w` itself.
torch::Tensor weight_fake_quant(const torch::Tensor& w, const WeightQuantSpec& spec);

}  // namespace trit
