// HDF5 model file: see model_file.h and docs/formats.md.
#include "exporters/model_file.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/fs.h"
#include "core/model.h"
#include "core/quant_linear.h"
#include "core/transformer.h"
#include "exporters/h5.h"
#include "exporters/half.h"

namespace trit::exporters {
namespace {

h5::DType storage_dtype(FloatDType d) {
    switch (d) {
        case FloatDType::kF32: return h5::DType::kF32;
        case FloatDType::kF16: return h5::DType::kF16;
        case FloatDType::kBF16: return h5::DType::kBF16;
    }
    return h5::DType::kF32;
}

// Writes float values as `d` (values are already representable in it).
void write_floats(h5::Group& g, const std::string& name, FloatDType d, const std::vector<int64_t>& shape,
                  const std::vector<float>& v) {
    if (d == FloatDType::kF32) return g.write(name, h5::DType::kF32, shape, v.data());
    std::vector<uint16_t> bits(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        bits[i] = d == FloatDType::kF16 ? f32_to_f16_bits(v[i]) : f32_to_bf16_bits(v[i]);
    g.write(name, storage_dtype(d), shape, bits.data());
}

std::vector<float> read_floats(const h5::Group& g, const std::string& name, FloatDType d,
                               const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    if (d == FloatDType::kF32) {
        g.read(name, h5::DType::kF32, shape, v.data());
    } else {
        std::vector<uint16_t> bits(v.size());
        g.read(name, storage_dtype(d), shape, bits.data());
        for (size_t i = 0; i < v.size(); ++i)
            v[i] = d == FloatDType::kF16 ? f16_bits_to_f32(bits[i]) : bf16_bits_to_f32(bits[i]);
    }
    return v;
}

// The float dtype a dataset is stored in, as one of ours.
FloatDType dataset_float_dtype(const h5::Group& g, const std::string& name) {
    const h5::DatasetInfo info = g.info(name);
    switch (info.dtype) {
        case h5::DType::kF32: return FloatDType::kF32;
        case h5::DType::kF16: return FloatDType::kF16;
        case h5::DType::kBF16: return FloatDType::kBF16;
        default: break;
    }
    TRIT_FAIL(g.file_path(), ":", g.path(), "/", name, ": expected float32, float16 or bfloat16, found ",
              h5::dtype_name(info.dtype));
}

std::string where(const h5::Group& g, const std::string& what = "") {
    return g.file_path() + ":" + g.path() + (what.empty() ? "" : "/" + what);
}

// The format a method/sparsity/depth combination must be stored in.
bool spec_fits_format(const WeightQuantSpec& s, FormatId f) {
    switch (f.kind) {
        case WeightFormat::kTern2:
            return (s.method == WeightQuantMethod::kAbsmean ||
                    s.method == WeightQuantMethod::kAbsmaxThreshold) && !s.sparse24;
        case WeightFormat::kTern24:  // also balanced depth 1 (ternary) pruned 2:4 by trit ptq
            return (s.method == WeightQuantMethod::kAbsmean || s.method == WeightQuantMethod::kAbsmaxThreshold ||
                    (s.method == WeightQuantMethod::kBalanced && s.depth == 1)) && s.sparse24;
        case WeightFormat::kBin1: return s.method == WeightQuantMethod::kBinary && !s.sparse24;
        case WeightFormat::kBt:
            return s.method == WeightQuantMethod::kBalanced && s.depth == f.depth && !s.sparse24;
        case WeightFormat::kFloat: return false;
    }
    return false;
}

// A BWTA activation quantizer, in a layer's group or its own: attributes act_mode, act_lo, act_hi
// and the scalar float32 dataset act_scale (exactly the trained scale, whatever --float-dtype).
void write_act_quantizer(h5::Group& g, const PackedActQuantizer& q) {
    g.set_attr("act_mode", act_level_mode_name(q.mode));
    g.set_attr("act_lo", q.grid.lo);
    g.set_attr("act_hi", q.grid.hi);
    g.write("act_scale", h5::DType::kF32, {}, &q.scale);
}

PackedActQuantizer read_act_quantizer(const h5::Group& g, const std::string& name) {
    PackedActQuantizer q;
    q.name = name;
    try {
        q.mode = parse_act_level_mode(g.attr_string("act_mode"));
    } catch (const Error& e) {
        TRIT_FAIL(where(g), "@act_mode: ", e.what());
    }
    q.grid = ActGrid{g.attr_int("act_lo"), g.attr_int("act_hi"), false};
    const ActGrid want = exported_act_grid(q.mode);
    TRIT_CHECK(q.grid == want, where(g), ": activation grid (act_lo, act_hi) = ", describe_grid(q.grid),
               " for a ", act_level_mode_name(q.mode), " quantizer; expected ", describe_grid(want),
               " (only ternary and bool activations are stored)");
    g.read("act_scale", h5::DType::kF32, {}, &q.scale);
    TRIT_CHECK(std::isfinite(q.scale) && q.scale > 0, where(g, "act_scale"), ": ", q.scale,
               "; expected a finite positive activation scale");
    return q;
}

void write_layer(h5::Group& layers, const PackedLayer& l) {
    h5::Group g = layers.create_group(l.name);
    g.set_attr("format", l.format.name());
    g.set_attr("out_features", l.out);
    g.set_attr("in_features", l.in);
    if (!l.bias.empty()) g.write("bias", h5::DType::kF32, {l.out}, l.bias.data());
    if (!l.format.packed()) {
        write_floats(g, "weight", l.weight_dtype, {l.out, l.in}, l.weight);
        return;
    }
    g.set_attr("method", weight_quant_method_name(l.spec.method));
    g.set_attr("granularity", scale_granularity_name(l.spec.granularity));
    g.set_attr("group_size", l.spec.group_size);
    g.set_attr("threshold", l.spec.threshold);
    g.set_attr("depth", l.spec.depth);
    g.set_attr("sparse24", static_cast<int64_t>(l.spec.sparse24));
    g.set_attr("activation", act_quant_method_name(l.activation));
    if (l.activation == ActQuantMethod::kTernary) write_act_quantizer(g, l.act);
    const auto arrays = packed_arrays(l.format, l.in);
    for (size_t i = 0; i < arrays.size(); ++i)
        g.write(arrays[i].name, h5::DType::kU8, {l.out, arrays[i].row_bytes}, l.packed[i].data());
    write_floats(g, "scale", l.spec.fp16_scales ? FloatDType::kF16 : FloatDType::kF32,
                 {l.scale_rows, l.scale_cols}, l.scale);
}

// `out`, `in` < 0 and has_bias unset: a foreign model's layer, whose shape and bias the file
// itself gives (checked for consistency with its datasets).
PackedLayer read_layer(const h5::Group& layers, const std::string& name, int64_t out, int64_t in,
                       std::optional<bool> has_bias, int64_t version) {
    PackedLayer l;
    l.name = name;
    TRIT_CHECK(layers.has_group(name), where(layers, name), ": missing (the recipe's model has a layer '",
               name, "')");
    h5::Group g = layers.open_group(name);
    if (out < 0) {
        out = g.attr_int("out_features");
        in = g.attr_int("in_features");
        TRIT_CHECK(out >= 1 && in >= 1, where(g), ": shape (", out, ", ", in, "); expected positive sizes");
        has_bias = g.has("bias");
    }
    l.format = [&] {
        try {
            return parse_format(g.attr_string("format"));
        } catch (const Error& e) {
            TRIT_FAIL(where(g), "@format: ", e.what());
        }
    }();
    l.out = g.attr_int("out_features");
    l.in = g.attr_int("in_features");
    TRIT_CHECK(l.out == out && l.in == in, where(g), ": shape (", l.out, ", ", l.in,
               ") does not match the recipe's model (", out, ", ", in, ")");
    if (*has_bias) {
        l.bias = read_floats(g, "bias", FloatDType::kF32, {out});
        for (int64_t i = 0; i < out; ++i)
            TRIT_CHECK(std::isfinite(l.bias[i]), where(g, "bias"), ": value ", i, " is not finite");
    } else {
        TRIT_CHECK(!g.has("bias"), where(g, "bias"), ": present, but the recipe's model has no bias");
    }
    if (!l.format.packed()) {
        l.weight_dtype = dataset_float_dtype(g, "weight");
        l.weight = read_floats(g, "weight", l.weight_dtype, {out, in});
        return l;
    }
    try {
        l.spec.method = parse_weight_quant_method(g.attr_string("method"));
        l.spec.granularity = parse_scale_granularity(g.attr_string("granularity"));
        l.activation = parse_act_quant_method(g.attr_string("activation"));
    } catch (const Error& e) {
        TRIT_FAIL(where(g), ": ", e.what());
    }
    if (l.activation == ActQuantMethod::kTernary) {
        TRIT_CHECK(version >= 2, where(g), "@activation: ternary activations need format_version 2, the file is version ",
                   version);
        l.act = read_act_quantizer(g, name);
    }
    l.spec.group_size = g.attr_int("group_size");
    l.spec.threshold = g.attr_double("threshold");
    l.spec.depth = g.attr_int("depth");
    l.spec.sparse24 = g.attr_int("sparse24") != 0;
    TRIT_CHECK(l.spec.group_size >= 1, where(g), "@group_size: expected >= 1, got ", l.spec.group_size);
    TRIT_CHECK(spec_fits_format(l.spec, l.format), where(g), ": format ", l.format.name(),
               " cannot hold codes of ", weight_quant_method_name(l.spec.method),
               l.spec.sparse24 ? " with 2:4 sparsity" : "");
    const auto arrays = packed_arrays(l.format, in);
    for (const auto& a : arrays) l.packed.push_back(g.read_bytes(a.name, h5::DType::kU8, {out, a.row_bytes}));
    try {
        validate_codes(l.format, l.packed, out, in);
    } catch (const Error& e) {
        TRIT_FAIL(where(g), ": invalid packed codes: ", e.what());
    }
    std::tie(l.scale_rows, l.scale_cols) = scale_shape(l.spec, out, in);
    const FloatDType sd = dataset_float_dtype(g, "scale");
    TRIT_CHECK(sd != FloatDType::kBF16, where(g, "scale"), ": expected float32 or float16, found bfloat16");
    l.spec.fp16_scales = sd == FloatDType::kF16;
    l.scale = read_floats(g, "scale", sd, {l.scale_rows, l.scale_cols});
    for (size_t i = 0; i < l.scale.size(); ++i)
        TRIT_CHECK(std::isfinite(l.scale[i]) && l.scale[i] >= 0, where(g, "scale"), ": value ", i, " is ",
                   l.scale[i], "; expected a finite non-negative scale");
    return l;
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string out = "(";
    for (size_t i = 0; i < shape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + ")";
}

// One model tensor, checked against the shape the recipe's model gives it.
PackedTensor read_tensor(const h5::Group& tensors, const std::string& name,
                         const std::vector<int64_t>& shape) {
    PackedTensor t;
    t.name = name;
    t.shape = shape;
    TRIT_CHECK(tensors.has_dataset(name), where(tensors, name),
               tensors.has(name) ? ": not a dataset" : ": missing",
               " (the recipe's model has a tensor '", name, "' of shape ", shape_text(shape), ")");
    const std::vector<int64_t> found = tensors.info(name).shape;
    TRIT_CHECK(found == shape, where(tensors, name), ": shape ", shape_text(found),
               " does not match the recipe's model ", shape_text(shape));
    t.dtype = dataset_float_dtype(tensors, name);
    t.values = read_floats(tensors, name, t.dtype, shape);
    for (size_t i = 0; i < t.values.size(); ++i)
        TRIT_CHECK(std::isfinite(t.values[i]), where(tensors, name), ": value ", i,
                   " is not finite");
    return t;
}

}  // namespace

namespace {

// Whether every value of a raw float buffer is finite.
bool all_finite(FloatDType d, const void* data, int64_t n) {
    if (d == FloatDType::kF32) {
        const float* v = static_cast<const float*>(data);
        for (int64_t i = 0; i < n; ++i)
            if (!std::isfinite(v[i])) return false;
        return true;
    }
    const uint16_t* v = static_cast<const uint16_t*>(data);
    const uint16_t exp = d == FloatDType::kF16 ? 0x7C00 : 0x7F80;  // all-ones exponent: inf, NaN
    for (int64_t i = 0; i < n; ++i)
        if ((v[i] & exp) == exp) return false;
    return true;
}

void write_ptq(h5::Group& root, const PtqInfo& info) {
    h5::Group g = root.create_group("ptq");
    g.set_attr("recipe", info.recipe_yaml);
    g.set_attr("source", info.source);
    g.set_attr("calibration", info.calibration);
    h5::Group layers = g.create_group("layers");
    for (size_t i = 0; i < info.layers.size(); ++i) {
        const PtqLayerReport& r = info.layers[i];
        h5::Group l = layers.create_group(r.name);
        l.set_attr("order", static_cast<int64_t>(i));
        l.set_attr("method", r.method);
        l.set_attr("format", r.format);
        l.set_attr("bits_per_weight", r.bits_per_weight);
        l.set_attr("error_basis", r.error_basis);
        l.set_attr("mse", r.mse);
        l.set_attr("relative_error", r.relative_error);
        l.set_attr("seconds", r.seconds);
    }
}

PtqInfo read_ptq(const h5::Group& root) {
    PtqInfo info;
    if (!root.has_group("ptq")) return info;
    h5::Group g = root.open_group("ptq");
    info.present = true;
    info.recipe_yaml = g.attr_string("recipe");
    info.source = g.attr_string("source");
    info.calibration = g.attr_string("calibration");
    TRIT_CHECK(g.has_group("layers"), where(g, "layers"), ": missing");
    h5::Group layers = g.open_group("layers");
    std::vector<std::pair<int64_t, PtqLayerReport>> rows;
    for (const auto& name : layers.children()) {
        h5::Group l = layers.open_group(name);
        PtqLayerReport r;
        r.name = name;
        r.method = l.attr_string("method");
        r.format = l.attr_string("format");
        r.bits_per_weight = l.attr_double("bits_per_weight");
        r.error_basis = l.attr_string("error_basis");
        r.mse = l.attr_double("mse");
        r.relative_error = l.attr_double("relative_error");
        r.seconds = l.attr_double("seconds");
        TRIT_CHECK(r.error_basis == "output" || r.error_basis == "weight", where(l), "@error_basis: '",
                   r.error_basis, "'; expected output or weight");
        rows.emplace_back(l.attr_int("order"), r);
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [order, r] : rows) info.layers.push_back(std::move(r));
    return info;
}

}  // namespace

struct ModelWriter::State {
    std::string path, tmp;
    std::optional<h5::File> file;
    std::optional<h5::Group> root, layers, tensors, quantizers;
    int64_t version = 1;
    bool closed = false;
};

ModelWriter::ModelWriter(const std::string& path, const PackedModel& header) : s_(std::make_unique<State>()) {
    s_->path = path;
    // Written under a temporary name and renamed when complete: a reader never sees half a file.
    s_->tmp = path + ".tmp";
    s_->file.emplace(h5::File::create(s_->tmp));
    s_->root.emplace(s_->file->root());
    h5::Group& root = *s_->root;
    root.set_attr("format", kModelFileFormat);
    root.set_attr("format_version", int64_t{1});  // raised by close() where needed
    root.set_attr("producer", header.producer.empty() ? std::string("trit ") + TRIT_VERSION : header.producer);
    if (header.architecture == ModelArchitecture::kLinears) {
        root.set_attr("architecture", "linears");
        s_->version = 3;
    } else {
        root.set_attr("recipe", header.recipe_yaml);
    }
    s_->layers.emplace(root.create_group("layers"));
    s_->tensors.emplace(root.create_group("tensors"));
}

ModelWriter::~ModelWriter() {
    if (s_ && !s_->closed) {
        s_->quantizers.reset();
        s_->tensors.reset();
        s_->layers.reset();
        s_->root.reset();
        s_->file.reset();
        std::remove(s_->tmp.c_str());
    }
}

void ModelWriter::add_layer(const PackedLayer& l) {
    write_layer(*s_->layers, l);
    if (l.activation == ActQuantMethod::kTernary) s_->version = std::max<int64_t>(s_->version, 2);
}

void ModelWriter::add_tensor(const PackedTensor& t) {
    TRIT_CHECK(static_cast<int64_t>(t.values.size()) == t.numel(), "write_model: tensor ", t.name, " has ",
               t.values.size(), " values for shape ", shape_text(t.shape));
    write_floats(*s_->tensors, t.name, t.dtype, t.shape, t.values);
}

void ModelWriter::add_tensor_raw(const std::string& name, FloatDType dtype, const std::vector<int64_t>& shape,
                                 const void* data) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    TRIT_CHECK(all_finite(dtype, data, n), "write_model: tensor '", name, "' holds a value that is not finite");
    s_->tensors->write(name, storage_dtype(dtype), shape, data);
}

void ModelWriter::add_act_quantizer(const PackedActQuantizer& q) {
    if (!s_->quantizers) s_->quantizers.emplace(s_->root->create_group("act_quantizers"));
    h5::Group g = s_->quantizers->create_group(q.name);
    write_act_quantizer(g, q);
    s_->version = std::max<int64_t>(s_->version, 2);
}

void ModelWriter::set_ptq(const PtqInfo& info) { write_ptq(*s_->root, info); }

void ModelWriter::close() {
    TRIT_CHECK(!s_->closed, "ModelWriter: ", s_->path, " is already closed");
    s_->root->set_attr("format_version", s_->version);
    s_->quantizers.reset();  // groups closed before the file
    s_->tensors.reset();
    s_->layers.reset();
    s_->root.reset();
    s_->file->close();
    s_->file.reset();
    fs::replace_file(s_->tmp, s_->path);
    s_->closed = true;
}

void write_model(const std::string& path, const PackedModel& m) {
    ModelWriter w(path, m);
    for (const auto& l : m.layers) w.add_layer(l);
    for (const auto& t : m.tensors) w.add_tensor(t);
    for (const auto& q : m.act_quantizers) w.add_act_quantizer(q);
    if (m.ptq.present) w.set_ptq(m.ptq);
    w.close();
}

PackedModel read_model(const std::string& path) {
    h5::File f = h5::File::open(path);
    h5::Group root = f.root();
    PackedModel m;
    const std::string format = root.has_attr("format") ? root.attr_string("format") : "";
    TRIT_CHECK(format == kModelFileFormat, path, ":/@format: expected '", kModelFileFormat,
               "', found '", format, "' (not a trit model file)");
    const int64_t version = root.attr_int("format_version");
    TRIT_CHECK(version >= kModelFileVersionMin && version <= kModelFileVersion, path,
               ":/@format_version: this trit reads versions ", kModelFileVersionMin, " to ",
               kModelFileVersion, ", the file is version ", version);
    m.producer = root.attr_string("producer");
    m.ptq = read_ptq(root);
    const std::string architecture = root.has_attr("architecture") ? root.attr_string("architecture") : "recipe";
    if (architecture == "linears") {
        TRIT_CHECK(version >= 3, path, ":/@architecture: 'linears' needs format_version 3, the file is version ",
                   version);
        m.architecture = ModelArchitecture::kLinears;
        TRIT_CHECK(root.has_group("layers"), path, ":/layers: missing");
        h5::Group layers = root.open_group("layers");
        for (const auto& name : layers.children())
            m.layers.push_back(read_layer(layers, name, -1, -1, std::nullopt, version));
        if (root.has_group("tensors")) {
            h5::Group tensors = root.open_group("tensors");
            for (const auto& name : tensors.children())
                m.tensors.push_back(read_tensor(tensors, name, tensors.info(name).shape));
        }
        TRIT_CHECK(!root.has("act_quantizers"), path,
                   ":/act_quantizers: not expected in a foreign model's file (architecture 'linears')");
        return m;
    }
    TRIT_CHECK(architecture == "recipe", path, ":/@architecture: '", architecture,
               "'; expected linears (or no attribute: the recipe's model)");
    m.recipe_yaml = root.attr_string("recipe");
    try {
        m.recipe = parse_recipe(m.recipe_yaml, path + ":/@recipe");
    } catch (const Error& e) {
        TRIT_FAIL(path, ":/@recipe: the stored recipe does not parse: ", e.what());
    }
    TRIT_CHECK(root.has_group("layers"), path, ":/layers: missing");
    h5::Group layers = root.open_group("layers");

    // The recipe's model says which layers must be there, with which shapes.
    auto model = make_model(m.recipe.model);
    std::set<std::string> expected;
    for (auto& [name, layer] : quant_linears(*model)) {
        expected.insert(name);
        m.layers.push_back(read_layer(layers, name, layer->options.out_features(),
                                      layer->options.in_features(), layer->bias.defined(), version));
    }
    for (const auto& child : layers.children())
        TRIT_CHECK(expected.count(child), path, ":/layers/", child,
                   ": not a layer of the recipe's model (", m.recipe.model.type, ")");

    // The same for the tensors outside the linear layers. An mlp has none, and files written
    // before /tensors existed (all of them mlp files) have no such group.
    const auto model_tensor_list = model_tensors(*model);
    if (!root.has_group("tensors")) {
        TRIT_CHECK(model_tensor_list.empty(), path, ":/tensors: missing (the recipe's model, ",
                   m.recipe.model.type, ", has ", model_tensor_list.size(),
                   " tensors besides its linear layers, e.g. '", model_tensor_list.front().first,
                   "' of shape ", shape_text(model_tensor_list.front().second.sizes().vec()), ")");
    } else {
        h5::Group tensors = root.open_group("tensors");
        std::set<std::string> expected_tensors;
        for (const auto& [name, t] : model_tensor_list) {
            expected_tensors.insert(name);
            m.tensors.push_back(read_tensor(tensors, name, t.sizes().vec()));
        }
        for (const auto& child : tensors.children())
            TRIT_CHECK(expected_tensors.count(child), path, ":/tensors/", child,
                       ": not a tensor of the recipe's model (", m.recipe.model.type, ")");
    }

    // The attention's quantizers: one per attention point when the recipe quantizes attention
    // (quantization.attention: ternary), none otherwise.
    std::vector<std::string> points;
    if (m.recipe.quantization.attention == "ternary") {
        for (auto& [name, point] : act_points(*model))
            points.push_back(name);
        TRIT_CHECK(!points.empty(), path, ":/@recipe: quantization.attention is ternary, but the ",
                   m.recipe.model.type, " model has no attention");
    }
    const bool has_group = root.has_group("act_quantizers");
    if (points.empty()) {
        if (has_group) {
            const auto children = root.open_group("act_quantizers").children();
            TRIT_CHECK(children.empty(), path, ":/act_quantizers/", children.empty() ? "" : children.front(),
                       ": not expected: the recipe's quantization.attention is '", m.recipe.quantization.attention,
                       "'");
        }
        return m;
    }
    TRIT_CHECK(version >= 2, path, ":/@format_version: ternary attention needs format_version 2, the file is version ",
               version);
    TRIT_CHECK(has_group, path, ":/act_quantizers: missing (the recipe quantizes attention: a quantizer for each of ",
               points.size(), " attention points, e.g. '", points.front(), "')");
    h5::Group quantizers = root.open_group("act_quantizers");
    for (const auto& name : points) {
        TRIT_CHECK(quantizers.has_group(name), where(quantizers, name),
                   ": missing (the recipe quantizes attention point '", name, "')");
        m.act_quantizers.push_back(read_act_quantizer(quantizers.open_group(name), name));
    }
    for (const auto& child : quantizers.children())
        TRIT_CHECK(std::find(points.begin(), points.end(), child) != points.end(), path, ":/act_quantizers/",
                   child, ": not an attention point of the recipe's model (", m.recipe.model.type, ")");
    return m;
}

}  // namespace trit::exporters
