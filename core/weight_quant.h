// Weight quantizers for (out, in) weights: W_eff = scale * W_q with one scale per granule (tensor,
// output channel, or group of input weights). Scales are statistics computed without autograd:
// they never receive a gradient; the latent weights get the straight-through gradient.
//   absmean (BitNet b1.58): s = mean|W|, W_q = clip(round(W / (s + eps)), -1, 1)
//   absmax_threshold (BitTorch): s = max|W|, W_q = sign(W) where |W| > lambda * s, else 0
//   binary (BWTA): mu = mean(W), s = mean|W - mu|, W_q = +1 where W - mu >= 0, else -1
//   balanced (balanced ternary, depth d): L = (3^d - 1) / 2, s = max|W| / L,
//       W_q = clip(round(W / s), -L, L) (0 where s = 0)
// Options: sparse24 keeps at most 2 non-zero codes in every 4 consecutive inputs (the largest
// |W|; ties to the lower index), fp16_scales rounds scales to fp16 before the codes are computed.
// A given `mask` (a QuantLinear's stored 2:4 mask, core/sparsity.h) keeps the codes it marks
// instead: the scales still come from the dense weight, the mask only zeroes codes.
#pragma once

#include <torch/types.h>

#include <string>

namespace trit {

inline constexpr float kAbsmeanEps = 1e-5f;  // keeps W / (g + eps) finite for an all-zero granule

enum class WeightQuantMethod { kNone, kAbsmean, kAbsmaxThreshold, kBinary, kBalanced };
enum class ScaleGranularity { kTensor, kChannel, kGroup };

struct WeightQuantSpec {
    WeightQuantMethod method = WeightQuantMethod::kNone;
    ScaleGranularity granularity = ScaleGranularity::kChannel;
    int64_t group_size = 64;   // input weights per scale (kGroup); the last group may be partial
    double threshold = 0.05;   // lambda of absmax_threshold
    int64_t depth = 2;         // trits per weight of balanced (1..4)
    bool sparse24 = false;     // 2:4 mask on the codes (ternary methods)
    bool fp16_scales = false;  // scales rounded to fp16 (what a file with fp16 scales holds)
    // A fixed keep mask, (out, in), non-zero where a code stays (ternary methods; any dtype and
    // device): applied instead of computing the 2:4 mask, whatever sparse24 says. Undefined: none.
    // QuantLinear sets it to its stored mask (mask24); the tensor is shared, not copied.
    torch::Tensor mask;
};

WeightQuantMethod parse_weight_quant_method(const std::string& name);
const char* weight_quant_method_name(WeightQuantMethod method);
ScaleGranularity parse_scale_granularity(const std::string& name);
const char* scale_granularity_name(ScaleGranularity granularity);
// Largest code magnitude of a method: 1 for the ternary and binary ones, (3^d - 1) / 2 balanced.
int64_t weight_quant_levels(const WeightQuantSpec& spec);

struct QuantizedWeights {
    torch::Tensor q;      // (out, in) float32 integer codes
    torch::Tensor scale;  // (1, 1) tensor, (out, 1) channel, (out, ceil(in / group)) group
};

// Quantizes a 2-D weight; the result carries no autograd history. method must not be none.
QuantizedWeights quantize_weight(const torch::Tensor& w, const WeightQuantSpec& spec);

// The 2:4 keep mask of `w`'s codes under `spec` (its sparse24 and mask ignored): (out, in) bool
// on w's device, true at the two inputs of every 4 consecutive ones that sparse24 keeps (the
// largest |w| among non-zero codes, ties to the lower index, then zero codes by index; a partial
// last group keeps up to 2). quantize_weight with sparse24 zeroes the codes it does not mark.
torch::Tensor sparse24_mask(const torch::Tensor& w, const WeightQuantSpec& spec);

// quantize_weight plus the effective weight W_eff = q * (expanded) scale, without autograd history.
struct QuantizedWeightsEff {
    QuantizedWeights w;
    torch::Tensor w_eff;  // (out, in)
};
QuantizedWeightsEff quantize_weight_eff(const torch::Tensor& w, const WeightQuantSpec& spec);

// A fused absmean, per-channel, dense quantize_weight_eff for contiguous float32 CUDA weights,
// registered by the CUDA kernels library (kernels::register_training_quantizers). Its scale sums
// in another order than the tensor ops, so a scale can be an ulp off theirs. Other specs (2:4,
// a mask) and devices take the tensor ops.
using AbsmeanChannelCudaImpl = QuantizedWeightsEff (*)(const torch::Tensor& w, bool fp16_scales);
void set_absmean_channel_cuda_impl(AbsmeanChannelCudaImpl impl);
// Broadcasts `scale` back to an (out, in) weight.
torch::Tensor expand_scale(const torch::Tensor& scale, const WeightQuantSpec& spec, int64_t in);
// scale * q in the weight's shape.
torch::Tensor dequantize(const QuantizedWeights& t, const WeightQuantSpec& spec);

// The training forward's effective weight: forward gives scale * W_q, backward passes the
// gradient straight through to `w` unchanged (STE). method = none returns `w` itself.
torch::Tensor weight_fake_quant(const torch::Tensor& w, const WeightQuantSpec& spec);

}  // namespace trit
