// The model file: one HDF5 file per model (layout in docs/formats.md, "Container"). write_model
// stores a PackedModel; read_model checks everything (format name and version, the recipe, every
// layer and every other tensor the recipe's model has and nothing else, each attribute, dataset
// dtype and shape, code validity, scales, finite floats) and reports the first problem by its path
// in the file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "exporters/packed_model.h"

namespace trit::exporters {

void write_model(const std::string& path, const PackedModel& model);
PackedModel read_model(const std::string& path);

// Writes a model file piece by piece, so that a model larger than memory can be written as its
// layers are quantized: the root attributes come from `header` (architecture, recipe, producer;
// its layers, tensors and quantizers are not written), then layers, tensors and quantizers are
// added one at a time, and close() sets format_version and renames `<path>.tmp` over `path`. A
// writer destroyed before close() removes the partial file. write_model is this, all at once.
class ModelWriter {
  public:
    ModelWriter(const std::string& path, const PackedModel& header);
    ~ModelWriter();
    ModelWriter(const ModelWriter&) = delete;
    ModelWriter& operator=(const ModelWriter&) = delete;

    void add_layer(const PackedLayer& layer);
    void add_tensor(const PackedTensor& tensor);
    // A float tensor from raw values of `dtype` (float32 values, or float16 / bfloat16 bit
    // patterns), e.g. straight from a memory-mapped source file; every value must be finite.
    void add_tensor_raw(const std::string& name, FloatDType dtype, const std::vector<int64_t>& shape,
                        const void* data);
    void add_act_quantizer(const PackedActQuantizer& q);
    // The /ptq group: the ptq recipe, source, calibration and the per-layer report.
    void set_ptq(const PtqInfo& info);
    void close();

  private:
    struct State;
    std::unique_ptr<State> s_;
};

}  // namespace trit::exporters
