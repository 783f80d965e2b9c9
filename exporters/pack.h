// From a trained model to a PackedModel: each selected linear layer is quantized with the
// quantizer it was trained with when the format can hold it, otherwise by round-to-nearest into
// the format (and a note says so); the other layers stay float, and so do the model's other
// tensors (embeddings, norms, ...).
#pragma once

#include <string>
#include <vector>

#include "core/model.h"
#include "exporters/packed_model.h"

namespace trit::exporters {

struct ExportOptions {
    FormatId format;
    std::vector<std::string> layers;  // layers to pack; the others stay float
    FloatDType float_dtype = FloatDType::kF32;  // storage of the float layers and other tensors
    std::string scale_dtype;  // "" (format default: float16 for bt, float32 else), float32, float16
    int64_t group_size = 0;   // bt: inputs per scale (0: as trained, else 64)
};

struct ExportResult {
    PackedModel model;
    std::vector<std::string> notes;  // one line per layer whose quantization export chose
};

// The spec a layer trained with `trained` is stored with in `options.format`; `note` receives a
// line when it is not what training used.
WeightQuantSpec export_spec(const WeightQuantSpec& trained, const ExportOptions& options,
                            std::string* note);

ExportResult pack_model(const Recipe& recipe, const std::string& recipe_yaml, Model& model,
                        const ExportOptions& options);

// Describes a spec in a few words ("absmean/channel", "balanced d=2/group 64, fp16 scales").
std::string describe_spec(const WeightQuantSpec& spec);

}  // namespace trit::exporters
