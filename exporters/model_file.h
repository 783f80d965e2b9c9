// The model file: one HDF5 file per model (layout in docs/formats.md, "Container"). write_model
// stores a PackedModel; read_model checks everything (format name and version, the recipe, every
// layer and every other tensor the recipe's model has and nothing else, each attribute, dataset
// dtype and shape, code validity, scales, finite floats) and reports the first problem by its path
// in the file.
#pragma once

#include <string>

#include "exporters/packed_model.h"

namespace trit::exporters {

void write_model(const std::string& path, const PackedModel& model);
PackedModel read_model(const std::string& path);

}  // namespace trit::exporters
