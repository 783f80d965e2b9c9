// `trit inspect model.h5`: a table per layer (format, shape, bits per weight, zero fraction,
// bytes, activations: a ternary / bool quantizer with its scale), one per other tensor (shape,
// dtype, bytes), the attention's activation quantizers, and totals against FP32 and FP16.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/ptq.h"
#include "exporters/model_file.h"

namespace trit::cli {
namespace {

// "ternary [-1, 1] s=0.0123456789": a quantizer's codes and its float32 scale, all its digits.
std::string quantizer_text(const exporters::PackedActQuantizer& q) {
    std::ostringstream os;
    os << exporters::describe_act_quantizer(q) << " s=" << std::setprecision(9) << q.scale;
    return os.str();
}

std::string activation_text(const exporters::PackedLayer& l) {
    switch (l.activation) {
        case ActQuantMethod::kInt8PerToken: return "int8/token";
        case ActQuantMethod::kTernary: return quantizer_text(l.act);
        case ActQuantMethod::kNone: break;
    }
    return "float";
}

}  // namespace

Command add_inspect(CLI::App& app) {
    auto path = std::make_shared<std::string>();
    CLI::App* sub = app.add_subcommand("inspect", "Describe a model file: formats, sizes, bits per weight");
    sub->add_option("model", *path, "Model file (.h5)")->required();
    sub->footer("Example:\n  trit inspect fmnist-tern2.h5");
    return {sub, [path]() {
        exporters::PackedModel m = exporters::read_model(*path);
        if (m.architecture == exporters::ModelArchitecture::kLinears)
            std::cout << *path << ": " << m.producer << ", the linear layers of a foreign model (no architecture), "
                      << "quantized by trit ptq from " << m.ptq.source << "\n";
        else
            std::cout << *path << ": " << m.producer << ", model " << m.recipe.model.type << " from recipe '"
                      << m.recipe.name << "'" << (m.ptq.present ? ", quantized by trit ptq from " + m.ptq.source : "")
                      << "\n";
        // Transformer layer names ("blocks.0.attn.q") are longer than the mlp's.
        int name_w = 10;
        for (const auto& l : m.layers)
            name_w = std::max(name_w, static_cast<int>(l.name.size()) + 2);
        for (const auto& t : m.tensors)
            name_w = std::max(name_w, static_cast<int>(t.name.size()) + 2);
        for (const auto& q : m.act_quantizers)
            name_w = std::max(name_w, static_cast<int>(q.name.size()) + 2);
        std::cout << std::left << std::setw(name_w) << "layer" << std::setw(10) << "format"
                  << std::setw(12) << "shape" << std::right << std::setw(12) << "codes B"
                  << std::setw(10) << "scales B" << std::setw(10) << "bias B" << std::setw(9)
                  << "bits/w" << std::setw(8) << "zeros" << std::setw(10) << "vs FP32"
                  << "  scales, activations\n";
        int64_t q_bytes = 0, q_codes = 0, q_fp32 = 0, all_bytes = 0, all_fp32 = 0;
        for (const auto& l : m.layers) {
            const int64_t n = l.out * l.in, fp32 = 4 * n;
            const int64_t weight = l.weight_bytes(), bias = 4 * static_cast<int64_t>(l.bias.size());
            const int64_t scales = l.format.packed() ? l.scale_bytes() : 0;
            std::ostringstream shape, zeros, extra;
            shape << l.out << "x" << l.in;
            if (l.format.packed()) {
                std::vector<int8_t> codes(static_cast<size_t>(n));
                exporters::unpack_codes(l.format, l.packed, l.out, l.in, codes.data());
                int64_t z = 0;
                for (int8_t c : codes) z += c == 0;
                zeros << std::fixed << std::setprecision(1) << 100.0 * z / n << "%";
                extra << scale_granularity_name(l.spec.granularity)
                      << (l.spec.granularity == ScaleGranularity::kGroup ? " " + std::to_string(l.spec.group_size) : "")
                      << (l.spec.fp16_scales ? " fp16" : " fp32") << ", "
                      << activation_text(l);
                q_bytes += weight;
                q_codes += weight - scales;
                q_fp32 += fp32;
            } else {
                zeros << "-";
                extra << exporters::float_dtype_name(l.weight_dtype);
            }
            all_bytes += weight + bias;
            all_fp32 += fp32 + bias;
            std::cout << std::left << std::setw(name_w) << l.name << std::setw(10)
                      << l.format.name() << std::setw(12) << shape.str() << std::right
                      << std::setw(12) << weight - scales << std::setw(10) << scales
                      << std::setw(10) << bias << std::fixed << std::setprecision(2) << std::setw(9)
                      << 8.0 * weight / n << std::setw(8) << zeros.str() << std::setw(9) << "1/"
                      << std::setprecision(1) << static_cast<double>(fp32) / weight << "  "
                      << extra.str() << "\n";
        }
        if (!m.tensors.empty()) {
            std::cout << std::left << std::setw(name_w) << "tensor" << std::setw(10) << "dtype"
                      << std::setw(16) << "shape" << std::right << std::setw(12) << "bytes"
                      << "\n";
            for (const auto& t : m.tensors) {
                std::ostringstream shape;
                shape << "(";
                for (size_t i = 0; i < t.shape.size(); ++i)
                    shape << (i ? ", " : "") << t.shape[i];
                shape << ")";
                std::cout << std::left << std::setw(name_w) << t.name << std::setw(10)
                          << exporters::float_dtype_name(t.dtype) << std::setw(16) << shape.str()
                          << std::right << std::setw(12) << t.bytes() << "\n";
                all_bytes += t.bytes();
                all_fp32 += 4 * t.numel();
            }
        }
        if (!m.act_quantizers.empty()) {
            std::cout << std::left << std::setw(name_w) << "attention" << "activations (quantizer)\n";
            for (const auto& q : m.act_quantizers)
                std::cout << std::left << std::setw(name_w) << q.name << quantizer_text(q) << "\n";
        }
        if (m.ptq.present) {
            std::cout << "trit ptq report (calibration: " << m.ptq.calibration << "):\n"
                      << cli::format_ptq_report(m.ptq.layers);
        }
        std::cout << std::fixed << std::setprecision(2);
        if (q_fp32 > 0) {
            auto ratio = [](int64_t a, int64_t b) { return static_cast<double>(a) / static_cast<double>(b); };
            std::cout << "packed layers, FP32 weights " << q_fp32 << " B, FP16 " << q_fp32 / 2 << " B:\n"
                      << "  codes          " << std::setw(9) << q_codes << " B = 1/" << ratio(q_fp32, q_codes)
                      << " of FP32, 1/" << ratio(q_fp32 / 2, q_codes) << " of FP16\n"
                      << "  codes + scales " << std::setw(9) << q_bytes << " B = 1/" << ratio(q_fp32, q_bytes)
                      << " of FP32, 1/" << ratio(q_fp32 / 2, q_bytes) << " of FP16\n";
        }
        std::cout << "whole model: " << all_bytes << " B of weights, scales, biases"
                  << (m.tensors.empty()
                          ? ""
                          : " and " + std::to_string(m.tensors.size()) + " other tensors")
                  << " = 1/" << static_cast<double>(all_fp32) / all_bytes << " of FP32 ("
                  << all_fp32 << " B)\n";
        return 0;
    }};
}

}  // namespace trit::cli
