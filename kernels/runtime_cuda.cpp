// The GPU runtime: see kernels/runtime_cuda.h.
#include "kernels/runtime_cuda.h"

#include <c10/core/DeviceGuard.h>
#include <cuda_runtime_api.h>
#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"
#include "core/quant_linear.h"
#include "kernels/act_int8_torch.h"
#include "kernels/torch_stream.h"

namespace trit::kernels {

struct CudaModel::Layer {
    std::string name;
    exporters::FormatId format;
    int64_t out = 0, in = 0;
    bool int8_act = false;
    int64_t group = 0, groups = 1;  // scale groups along in
    PackedWeights w;                // packed layers: device pointers into a, b
    torch::Tensor a, b;             // packed arrays, uint8 (out, row_bytes)
    torch::Tensor w_scale;          // float32 (scale_rows, groups)
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

}  // namespace

CudaModel::CudaModel(const exporters::PackedModel& model, int device_index) : device_(torch::kCUDA, 0) {
    const ModelConfig& c = model.recipe.model;
    TRIT_CHECK(c.type == "mlp" || c.type == "vit" || c.type == "gpt", "CudaModel: model type '",
               c.type, "' is not supported; known: mlp, vit, gpt");
    TRIT_CHECK(torch::cuda::is_available(), "CudaModel: no CUDA device is available to LibTorch");
    const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
    TRIT_CHECK(device_index >= 0 && device_index < count, "CudaModel: device index ", device_index,
               " is out of range (", count, " CUDA devices)");
    device_ = c10::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(device_index));
    activation_ = c.activation;
    const c10::DeviceGuard guard(device_);

    for (const exporters::PackedLayer& p : model.layers) {
        auto l = std::make_unique<Layer>();
        l->name = p.name;
        l->format = p.format;
        l->out = p.out;
        l->in = p.in;
        if (!p.bias.empty()) l->bias = upload_floats(p.bias, {p.out}, device_);
        if (!p.format.packed()) {
            l->weight = upload_floats(p.weight, {p.out, p.in}, device_);
            layers_.push_back(std::move(l));
            continue;
        }
        l->int8_act = p.activation == ActQuantMethod::kInt8PerToken;
        l->group = p.spec.granularity == ScaleGranularity::kGroup ? p.spec.group_size : p.in;
        l->groups = p.scale_cols;
        l->w_scale = upload_floats(p.scale, {p.scale_rows, p.scale_cols}, device_);
        if (l->int8_act) {
            l->a = upload_bytes(p.packed[0], p.out, device_);
            if (p.packed.size() > 1) l->b = upload_bytes(p.packed[1], p.out, device_);
            l->w.format = kernel_format(p.format);
            l->w.depth = static_cast<int>(p.format.depth);
            l->w.a = l->a.data_ptr<uint8_t>();
            l->w.b = l->b.defined() ? l->b.data_ptr<uint8_t>() : nullptr;
            l->w.n = p.out;
            l->w.k = p.in;
            l->w.pdl = true;  // uploaded once here, never written by a kernel
        } else {
            std::vector<int8_t> codes(static_cast<size_t>(p.out * p.in));
            exporters::unpack_codes(p.format, p.packed, p.out, p.in, codes.data());
            l->weight = torch::from_blob(codes.data(), {p.out, p.in}, torch::kInt8).to(torch::kFloat32).to(device_);
        }
        layers_.push_back(std::move(l));
    }
    if (c.type != "mlp") build_module(model);
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
    auto [q, sx] = act_int8_quantize(x);
    torch::Tensor y = torch::empty({m, l.out}, x.options());
    if (m == 0) return y;
    ProductOut out;
    out.y = y.data_ptr<float>();
    out.w_scale = l.w_scale.data_ptr<float>();
    out.w_scale_rows = l.w_scale.size(0);
    out.x_scale = sx.data_ptr<float>();
    out.x_scale_rows = m;
    out.bias = l.bias.defined() ? l.bias.data_ptr<float>() : nullptr;
    product(l.w, q.data_ptr<int8_t>(), m, l.group, out, current_stream(device_));
    return y;
}

torch::Tensor CudaModel::forward(const torch::Tensor& input) const {
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

std::vector<std::string> CudaModel::describe(int64_t m) const {
    std::vector<std::string> lines;
    for (const auto& l : layers_) {
        std::string s = l->name + " " + l->format.name() + " ";
        if (!l->format.packed()) {
            s += "float (LibTorch linear)";
        } else if (!l->int8_act) {
            s += "float activations (LibTorch matmul over unpacked codes)";
        } else {
            // The int8 codes tensor is 16-byte aligned like every CUDA allocation; any such
            // pointer stands in for it here.
            std::string why;
            const auto* x = reinterpret_cast<const int8_t*>(l->a.data_ptr<uint8_t>());
            choose_path(l->w, x, m, l->group, &why);
            s += why;
        }
        lines.push_back(s);
    }
    return lines;
}

}  // namespace trit::kernels
