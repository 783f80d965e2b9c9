// The GPU runtime: see kernels/runtime_cuda.h.
#include "kernels/runtime_cuda.h"

#include <c10/core/DeviceGuard.h>
#include <cuda_runtime_api.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <string>

#include "core/error.h"
#include "core/quant_linear.h"
#include "core/vit.h"
#include "exporters/format_table.h"
#include "exporters/formats/tbits.h"
#include "exporters/formats/tern2.h"
#include "exporters/half.h"
#include "kernels/act_pack.h"
#include "kernels/bin1_gemm.h"
#include "kernels/bt_gemm.h"
#include "kernels/bt_nib4.h"
#include "kernels/cuda_check.h"
#include "kernels/tern24_dense.h"
#include "kernels/torch_stream.h"

namespace trit::kernels {

struct CudaModel::Layer {
    std::string name;
    exporters::FormatId format;
    int64_t out = 0, in = 0;
    bool int8_act = false;
    bool level_act = false;         // ternary / bool activations (BWTA) with the file's scale
    exporters::PackedActQuantizer act;
    bool b1 = false;                // level_act on the b1 GEMM (bin1, one scale group, sm_80+)
    bool as_tern2 = false;          // bin1 off the b1 GEMM: its +-1 codes packed as tern2 (a, w)
    int64_t group = 0, groups = 1;  // scale groups along in (along k where the rows are padded)
    int64_t k = 0;                  // the packed rows' length: in, or in padded (int8 activations)
    PackedWeights w;                // packed layers: device pointers into a, b
    torch::Tensor act_scale;        // level_act: float32 (1), s_A
    torch::Tensor w_plane;          // b1: the bin1 codes as a tbits binary plane, int32 (out, words)
    torch::Tensor a, b;             // packed arrays, uint8 (out, row_bytes)
    torch::Tensor w_scale;          // float32 (scale_rows, groups)
    torch::Tensor w_scale_half;     // fp16 scales: w_scale's fp16 bits (int16), else undefined
    torch::Tensor dense;            // PackedWeights::dense: tern24's codes as tern2, bt's (d <= 2) as nibbles
    torch::Tensor planes;           // PackedWeights::planes: bt's codes as trit planes (bt GEMM)
    torch::Tensor bias;             // float32 (out) or undefined
    torch::Tensor weight;           // float layers: (out, in); packed float-activation layers: codes as float
};

namespace {

Format kernel_format(const exporters::FormatId& f) {
    switch (f.kind) {
        case exporters::WeightFormat::kTern2: return Format::kTern2;
        case exporters::WeightFormat::kTern24: return Format::kTern24;
        case exporters::WeightFormat::kBin1: return Format::kBin1;
        case exporters::WeightFormat::kBt: return Format::kBt;
        case exporters::WeightFormat::kFloat: break;
    }
    TRIT_FAIL("kernel_format: ", f.name(), " is not a packed format");
}

torch::Tensor upload_bytes(const std::vector<uint8_t>& v, int64_t rows, const c10::Device& d) {
    return torch::from_blob(const_cast<uint8_t*>(v.data()), {rows, static_cast<int64_t>(v.size()) / rows},
                            torch::kUInt8)
        .to(d);
}

torch::Tensor upload_floats(const std::vector<float>& v, std::vector<int64_t> shape, const c10::Device& d) {
    return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32).to(d);
}

// Every fast int8 product asks k % kPadCols == 0 (kernels/product.h); a layer whose in is not a
// multiple runs them on rows padded with zero codes, its input padded with zero columns.
constexpr int64_t kPadCols = 64;

// The packed length of an int8-activation layer's rows: in, or in rounded up to kPadCols where
// the padding keeps the scale groups (one group, or groups of a multiple of kPadCols columns).
int64_t padded_k(const exporters::PackedLayer& p, int64_t group, int64_t groups) {
    const int64_t k = formats::ceil_div(p.in, kPadCols) * kPadCols;
    return groups == 1 || group % kPadCols == 0 ? k : p.in;
}

// The layer's codes packed as `f` (its own format, or tern2 for bin1's +-1 codes), each row
// followed by k - in zero codes: they add 0 to every sum, so the int32 accumulators and the fused
// epilogue's y are those of the file's layer.
exporters::Arrays repack_rows(const exporters::PackedLayer& p, exporters::FormatId f, int64_t k) {
    std::vector<int8_t> codes(static_cast<size_t>(p.out * p.in));
    exporters::unpack_codes(p.format, p.packed, p.out, p.in, codes.data());
    std::vector<int8_t> padded(static_cast<size_t>(p.out * k), 0);
    for (int64_t r = 0; r < p.out; ++r)
        std::copy_n(codes.data() + r * p.in, p.in, padded.data() + r * k);
    return exporters::pack_codes(f, padded.data(), p.out, k);
}

}  // namespace

CudaModel::CudaModel(const exporters::PackedModel& model, int device_index) : device_(torch::kCUDA, 0) {
    const ModelConfig& c = model.recipe.model;
    linears_ = model.architecture == exporters::ModelArchitecture::kLinears;
    TRIT_CHECK(linears_ || c.type == "mlp" || c.type == "vit" || c.type == "gpt", "CudaModel: model type '",
               c.type, "' is not supported; known: mlp, vit, gpt");
    TRIT_CHECK(torch::cuda::is_available(), "CudaModel: no CUDA device is available to LibTorch");
    const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
    TRIT_CHECK(device_index >= 0 && device_index < count, "CudaModel: device index ", device_index,
               " is out of range (", count, " CUDA devices)");
    device_ = c10::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index));
    activation_ = c.activation;
    const c10::DeviceGuard guard(device_);
    int major = 0;
    TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_index));

    for (const exporters::PackedLayer& p : model.layers) {
        auto l = std::make_unique<Layer>();
        l->name = p.name;
        l->format = p.format;
        l->out = p.out;
        l->in = p.in;
        l->k = p.in;
        if (!p.bias.empty()) l->bias = upload_floats(p.bias, {p.out}, device_);
        if (!p.format.packed()) {
            l->weight = upload_floats(p.weight, {p.out, p.in}, device_);
            layers_.push_back(std::move(l));
            continue;
        }
        l->int8_act = p.activation == ActQuantMethod::kInt8PerToken;
        l->level_act = p.activation == ActQuantMethod::kTernary;
        l->group = p.spec.granularity == ScaleGranularity::kGroup ? p.spec.group_size : p.in;
        l->groups = p.scale_cols;
        l->w_scale = upload_floats(p.scale, {p.scale_rows, p.scale_cols}, device_);
        if (p.spec.fp16_scales) {  // the file's fp16 values, exactly: ProductOut::w_scale_half
            std::vector<int16_t> halves(p.scale.size());
            for (size_t e = 0; e < halves.size(); ++e)
                halves[e] = static_cast<int16_t>(f32_to_f16_bits(p.scale[e]));
            l->w_scale_half =
                torch::from_blob(halves.data(), {p.scale_rows, p.scale_cols}, torch::kInt16)
                    .to(device_);
        }
        if (l->int8_act || l->level_act) {
            // The b1 GEMM takes bin1 weights with one scale group on sm_80+ (ternary or bool
            // activations); other bin1 layers run the tern2 kernels on their +-1 codes packed as
            // tern2 (2 bits a weight on the device), as no int8 kernel takes bin1.
            const bool bin1 = p.format.kind == exporters::WeightFormat::kBin1;
            l->b1 = l->level_act && bin1 && l->groups == 1 && major >= 8;
            l->as_tern2 = bin1 && !l->b1;
            if (l->int8_act) l->k = padded_k(p, l->group, l->groups);
            if (l->k != p.in && l->groups == 1) l->group = l->k;  // still one group
            const exporters::FormatId f =
                l->as_tern2 ? exporters::FormatId{exporters::WeightFormat::kTern2, 0} : p.format;
            const bool repack = l->k != p.in || l->as_tern2;
            const exporters::Arrays repacked =
                repack ? repack_rows(p, f, l->k) : exporters::Arrays{};
            const exporters::Arrays& arrays = repack ? repacked : p.packed;
            l->a = upload_bytes(arrays[0], p.out, device_);
            if (arrays.size() > 1) l->b = upload_bytes(arrays[1], p.out, device_);
            l->w.format = kernel_format(f);
            l->w.depth = static_cast<int>(p.format.depth);
            l->w.a = l->a.data_ptr<uint8_t>();
            l->w.b = l->b.defined() ? l->b.data_ptr<uint8_t>() : nullptr;
            l->w.n = p.out;
            l->w.k = l->k;
            l->w.pdl = true;  // uploaded once here, never written by a kernel
            if (l->int8_act && l->w.format == Format::kTern24) {
                // The dense path (kernels/tern24_dense.h: from 2 tokens, and for 1 on small layers):
                // the codes once more as tern2 (2 bits a weight).
                l->dense =
                    torch::empty({p.out, formats::tern2_row_bytes(l->k)},
                                 torch::TensorOptions().dtype(torch::kUInt8).device(device_));
                tern24_to_tern2(l->w.a, l->w.b, p.out, l->k, l->dense.data_ptr<uint8_t>(),
                                current_stream(device_));
                l->w.dense = l->dense.data_ptr<uint8_t>();
            }
            if (l->int8_act && l->w.format == Format::kBt && l->w.depth <= kBtNib4MaxDepth) {
                // The one-token GEMV's nibbles (4 bits a weight; the bt bytes stay for m > 1).
                l->dense =
                    torch::empty({p.out, bt_nib4_row_bytes(l->k)},
                                 torch::TensorOptions().dtype(torch::kUInt8).device(device_));
                bt_to_nib4(l->w.a, l->w.depth, p.out, l->k, l->dense.data_ptr<uint8_t>(),
                           current_stream(device_));
                l->w.dense = l->dense.data_ptr<uint8_t>();
            }
            if (l->w.format == Format::kBt) {
                // The trit planes of the bt GEMM (kernels/bt_gemm.h), for 9 tokens or more.
                l->planes =
                    torch::empty({bt_planes_bytes(l->w.depth, p.out, l->k)},
                                 torch::TensorOptions().dtype(torch::kUInt8).device(device_));
                bt_to_planes(l->w.a, l->w.depth, p.out, l->k, l->planes.data_ptr<uint8_t>(),
                             current_stream(device_));
                l->w.planes = l->planes.data_ptr<uint8_t>();
            }
            if (l->level_act) {
                l->act = p.act;
                l->act_scale = upload_floats({p.act.scale}, {1}, device_);
                // Without the b1 GEMM: the int8 products on the grid's codes.
                if (l->b1) {
                    l->w_plane = torch::empty({p.out, formats::tbits_row_words(p.in)},
                                              torch::TensorOptions().dtype(torch::kInt32).device(device_));
                    tbits_from_bin1(l->a.data_ptr<uint8_t>(), p.out, p.in,
                                    reinterpret_cast<uint32_t*>(l->w_plane.data_ptr<int32_t>()),
                                    current_stream(device_));
                }
            }
        } else {
            std::vector<int8_t> codes(static_cast<size_t>(p.out * p.in));
            exporters::unpack_codes(p.format, p.packed, p.out, p.in, codes.data());
            l->weight = torch::from_blob(codes.data(), {p.out, p.in}, torch::kInt8).to(torch::kFloat32).to(device_);
        }
        layers_.push_back(std::move(l));
    }
    if (!linears_ && c.type != "mlp") build_module(model);
    if (const auto* vit = dynamic_cast<const Vit*>(module_.get())) {
        vit_ = true;
        tokens_ = vit->tokens();
    } else if (!linears_ && c.type == "gpt") {
        tokens_ = c.context;
    }
}

int64_t CudaModel::layer_rows(const std::string& name, int64_t examples) const {
    if (vit_) {
        if (name == "head") return examples;  // the class token's row
        return examples * (name == "patch" ? tokens_ - 1 : tokens_);
    }
    return examples * tokens_;
}

torch::Tensor CudaModel::forward_layer(const std::string& name, const torch::Tensor& x) const {
    const auto it = std::find_if(layers_.begin(), layers_.end(), [&](const auto& l) { return l->name == name; });
    TRIT_CHECK(it != layers_.end(), "CudaModel: the packed model has no layer '", name, "'");
    const c10::DeviceGuard guard(device_);
    torch::NoGradGuard no_grad;
    return layer_forward(**it, x.to(device_, torch::kFloat32).contiguous());
}

CudaModel::~CudaModel() = default;

void CudaModel::build_module(const exporters::PackedModel& model) {
    module_ = make_model(model.recipe.model);
    exporters::load_float_values(*module_, model);
    torch::NoGradGuard no_grad;
    for (auto& [name, layer] : quant_linears(*module_)) {
        const auto it = std::find_if(layers_.begin(), layers_.end(),
                                     [&](const auto& l) { return l->name == name; });
        TRIT_CHECK(it != layers_.end(), "CudaModel: the packed model has no layer '", name, "'");
        const Layer* l = it->get();
        if (!l->format.packed()) continue;  // the module's own linear, with the file's weights
        layer->set_quant(LinearQuantSpec{});
        // The packed layer runs from the codes: an empty latent weight keeps the float copy off
        // the device.
        layer->weight.set_data(torch::empty({0, l->in}));
        if (layer->bias.defined() && l->bias.defined()) layer->bias.copy_(l->bias);
        layer->set_forward_override([this, l](const torch::Tensor& x) {
            const c10::DeviceGuard guard(device_);  // also when module() is called directly
            std::vector<int64_t> shape = x.sizes().vec();
            shape.back() = l->out;
            return layer_forward(*l, x.reshape({-1, l->in}).to(torch::kFloat32).contiguous())
                .reshape(shape);
        });
    }
    module_->to(device_);
    module_->eval();
}

torch::Tensor CudaModel::layer_forward(const Layer& l, const torch::Tensor& x) const {
    TRIT_CHECK(x.dim() == 2 && x.size(1) == l.in, "layer ", l.name, ": expected input (m, ", l.in, "), got ",
               x.sizes());
    if (!l.format.packed()) return torch::linear(x, l.weight, l.bias.defined() ? l.bias : torch::Tensor());
    if (l.level_act) return level_layer_forward(l, x);
    const int64_t m = x.size(0);
    if (!l.int8_act) {
        // Per scale group: acc (m, out, G) = x_g . codes_g^T, then sum_g s_w * acc + b.
        torch::Tensor acc;
        if (l.groups == 1) {
            acc = torch::matmul(x, l.weight.t()).unsqueeze(2);
        } else {
            const int64_t padded = l.groups * l.group;
            torch::Tensor xp = torch::constant_pad_nd(x, {0, padded - l.in}).view({m, l.groups, l.group});
            torch::Tensor wp = torch::constant_pad_nd(l.weight, {0, padded - l.in}).view({l.out, l.groups, l.group});
            acc = torch::einsum("mgc,ngc->mng", {xp, wp});
        }
        torch::Tensor y = (acc * l.w_scale.unsqueeze(0)).sum(2);
        return l.bias.defined() ? y + l.bias : y;
    }
    TRIT_CHECK(x.scalar_type() == torch::kFloat32, "layer ", l.name, ": expected float32 input, got ",
               x.scalar_type());
    torch::Tensor y = torch::empty({m, l.out}, x.options());
    if (m == 0) return y;
    // int8 per-token quantization and the product: one launch where a kernel fuses them (tern2, one
    // token, kernels/product.h), else the quantizer into q and sx, then the product. Padded rows
    // take x with zero columns: its per-token absmax, so its codes and scale, are x's.
    const torch::Tensor xc =
        l.k != l.in ? torch::constant_pad_nd(x, {0, l.k - l.in}) : x.contiguous();
    torch::Tensor q = torch::empty({m, l.k}, x.options().dtype(torch::kInt8));
    torch::Tensor sx = torch::empty({m}, x.options());
    ProductOut out;
    out.y = y.data_ptr<float>();
    out.w_scale = l.w_scale.data_ptr<float>();
    out.w_scale_rows = l.w_scale.size(0);
    if (l.w_scale_half.defined())
        out.w_scale_half = reinterpret_cast<const uint16_t*>(l.w_scale_half.data_ptr<int16_t>());
    out.bias = l.bias.defined() ? l.bias.data_ptr<float>() : nullptr;
    product_from_float(l.w, xc.data_ptr<float>(), m, l.group, out, q.data_ptr<int8_t>(), sx.data_ptr<float>(),
                       current_stream(device_));
    return y;
}

torch::Tensor CudaModel::level_layer_forward(const Layer& l, const torch::Tensor& x) const {
    const int64_t m = x.size(0);
    torch::Tensor y = torch::empty({m, l.out}, x.options());
    if (m == 0) return y;
    const cudaStream_t stream = current_stream(device_);
    ProductOut out;
    out.y = y.data_ptr<float>();
    out.w_scale = l.w_scale.data_ptr<float>();
    out.w_scale_rows = l.w_scale.size(0);
    out.x_scale = l.act_scale.data_ptr<float>();
    out.x_scale_rows = 1;
    out.bias = l.bias.defined() ? l.bias.data_ptr<float>() : nullptr;
    const bool boolean = l.act.mode == ActLevelMode::kBool;
    if (l.b1) {
        // Fused quantize + bit-pack (act_levels' codes), then the b1 GEMM and its epilogue.
        torch::Tensor planes = torch::empty({boolean ? 1 : 2, m, formats::tbits_row_words(l.in)},
                                            x.options().dtype(torch::kInt32));
        auto* a = reinterpret_cast<uint32_t*>(planes.data_ptr<int32_t>());
        if (boolean)
            tbits_quantize_bool(x.data_ptr<float>(), m, l.in, l.act.scale, a, stream);
        else
            tbits_quantize_ternary(x.data_ptr<float>(), m, l.in, l.act.scale, a, stream);
        bin1_gemm(boolean ? Bin1GemmCase::kBoolBin : Bin1GemmCase::kBinTern, a, m,
                  reinterpret_cast<const uint32_t*>(l.w_plane.data_ptr<int32_t>()), l.out, l.in, out, stream,
                  Bin1GemmTile::kAuto, /*b_early=*/true);  // planes and scales uploaded once
    } else {
        // The grid's int8 codes: act_levels' rounding (a true division by a device tensor, ties to
        // even, NaN -> 0), then the format's product as for int8 activations.
        const torch::Tensor q = (x / l.act_scale)
                                    .round_()
                                    .clamp_(static_cast<double>(l.act.grid.lo), static_cast<double>(l.act.grid.hi))
                                    .nan_to_num_(0.0)
                                    .to(torch::kInt8);
        product(l.w, q.data_ptr<int8_t>(), m, l.group, out, stream);
    }
    // As the training forward: an input row holding a NaN gives a NaN output row.
    y.masked_fill_(x.isnan().any(1, /*keepdim=*/true), std::numeric_limits<float>::quiet_NaN());
    return y;
}

torch::Tensor CudaModel::forward(const torch::Tensor& input) const {
    TRIT_CHECK(!linears_, "CudaModel::forward: the model holds a foreign model's layers without an architecture; "
               "run them one by one with forward_layer");
    const c10::DeviceGuard guard(device_);
    torch::NoGradGuard no_grad;
    if (module_) {
        // gpt takes int64 bytes as they are; the module checks shapes and values.
        torch::Tensor x = input.to(device_);
        return module_->forward(x.is_floating_point() ? x.to(torch::kFloat32) : x);
    }
    TRIT_CHECK(input.dim() == 2, "CudaModel::forward: expected (batch, features), got ",
               input.sizes());
    torch::Tensor x = input.to(device_, torch::kFloat32).contiguous();
    for (size_t i = 0; i < layers_.size(); ++i) {
        x = layer_forward(*layers_[i], x);
        if (i + 1 < layers_.size()) x = activation_ == "gelu" ? torch::gelu(x) : torch::relu(x);
    }
    return x;
}

std::vector<std::string> CudaModel::describe(int64_t examples) const {
    std::vector<std::string> lines;
    for (const auto& l : layers_) {
        const int64_t m = layer_rows(l->name, examples);
        std::string s = l->name + " (" + std::to_string(m) + (m == 1 ? " row) " : " rows) ") +
                        l->format.name() + " ";
        if (!l->format.packed()) {
            s += "float (LibTorch linear)";
        } else if (l->b1) {
            const bool boolean = l->act.mode == ActLevelMode::kBool;
            const Bin1GemmCase c = boolean ? Bin1GemmCase::kBoolBin : Bin1GemmCase::kBinTern;
            int sms = 1;
            TRIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_.index()));
            s += std::string(boolean ? "bool" : "ternary") + " activations: tbits_quantize + bin1_gemm " +
                 bin1_gemm_case_name(c) + " (tile " + bin1_gemm_tile_name(bin1_gemm_choose_tile(c, m, l->out, l->in, sms)) +
                 ")";
        } else if (l->level_act) {
            std::string why;
            const auto* x = reinterpret_cast<const int8_t*>(l->a.data_ptr<uint8_t>());
            choose_path(l->w, x, m, l->group, &why);
            s += std::string(l->act.mode == ActLevelMode::kBool ? "bool" : "ternary") +
                 " activations as int8 codes (b1 GEMM declined: " +
                 (l->format.kind != exporters::WeightFormat::kBin1 ? "not bin1 weights"
                  : l->groups > 1                                  ? "per-group weight scales"
                                                                   : "needs compute capability >= 8.0") +
                 "), " + why;
        } else if (!l->int8_act) {
            s += "float activations (LibTorch matmul over unpacked codes)";
        } else {
            // The int8 codes tensor is 16-byte aligned like every CUDA allocation; any such
            // pointer stands in for it here.
            std::string why;
            const auto* x = reinterpret_cast<const int8_t*>(l->a.data_ptr<uint8_t>());
            const ProductPath path = choose_path(l->w, x, m, l->group, &why);
            s += why;
            if (path == ProductPath::kGemm && l->w.format == Format::kBt) {
                // The scales stand in for the output and the x scales: bt_gemm_plan reads no
                // data, only the call's shape and pointers.
                ProductOut out;
                out.y = l->w_scale.data_ptr<float>();
                out.w_scale = out.y;
                out.w_scale_rows = l->w_scale.size(0);
                out.x_scale = out.y;
                const BtGemmPlan plan = bt_gemm_plan(l->w, x, m, l->group, out);
                s += std::string(plan.wgmma ? " (wgmma tiles of " : " (tiles of ") +
                     std::to_string(plan.tile_m) + " x " + std::to_string(plan.tile_n);
                if (plan.splits > 1) s += ", k split over " + std::to_string(plan.splits) + " CTAs";
                s += ")";
            }
        }
        if (l->as_tern2) s += " (the bin1 codes as tern2)";
        if (l->k != l->in)
            s += " (k padded from " + std::to_string(l->in) + " to " + std::to_string(l->k) +
                 " with zero weights)";
        lines.push_back(s);
    }
    return lines;
}

}  // namespace trit::kernels
