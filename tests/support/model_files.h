// Test helpers for model files: compare two PackedModels field by field, write a valid one with one
// thing changed, and read a file back for its error. Header-only: only tests that link the
// exporters include it.
#pragma once

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "exporters/model_file.h"
#include "exporters/pack.h"
#include "tests/support/error_of.h"

namespace trit::testing {

// Every field of every layer and tensor equal (floats bit for bit).
inline void expect_same_model(const exporters::PackedModel& a, const exporters::PackedModel& b) {
    EXPECT_EQ(a.recipe_yaml, b.recipe_yaml);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    for (size_t i = 0; i < a.layers.size(); ++i) {
        const auto &x = a.layers[i], &y = b.layers[i];
        EXPECT_EQ(x.name, y.name);
        EXPECT_TRUE(x.format == y.format) << x.name;
        EXPECT_EQ(x.packed, y.packed) << x.name;
        EXPECT_EQ(x.scale, y.scale) << x.name;  // exact float equality
        EXPECT_EQ(x.bias, y.bias) << x.name;
        EXPECT_EQ(x.weight, y.weight) << x.name;
        EXPECT_EQ(x.activation, y.activation) << x.name;
        EXPECT_EQ(exporters::describe_spec(x.spec), exporters::describe_spec(y.spec)) << x.name;
    }
    ASSERT_EQ(a.tensors.size(), b.tensors.size());
    for (size_t i = 0; i < a.tensors.size(); ++i) {
        const auto &x = a.tensors[i], &y = b.tensors[i];
        EXPECT_EQ(x.name, y.name);
        EXPECT_EQ(x.shape, y.shape) << x.name;
        EXPECT_EQ(x.values, y.values) << x.name;
        EXPECT_EQ(x.dtype, y.dtype) << x.name;
    }
}

// A valid file with one thing changed in the PackedModel before writing; returns its path.
inline std::string damaged(const std::string& dir, const std::string& name, exporters::PackedModel m,
                           const std::function<void(exporters::PackedModel&)>& change) {
    change(m);
    const std::string path = dir + "/" + name + ".h5";
    exporters::write_model(path, m);
    return path;
}

// The error reading `path` gives, or "" when it loads.
inline std::string load_error(const std::string& path) {
    return error_of([&] { exporters::read_model(path); });
}

}  // namespace trit::testing
