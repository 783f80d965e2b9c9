// Tiny synthetic training runs for tests: see tiny_run.h.
#include "tests/support/tiny_run.h"

#include <fstream>
#include <random>

#include "core/error.h"
#include "core/model.h"
#include "core/recipe.h"
#include "tests/support/synthetic_idx.h"
#include "trainers/checkpoint.h"

namespace trit::testing {

const std::string& tiny_data_dir() {
    static const std::string dir = [] {
        std::string d = make_temp_dir("trit-tiny-data");
        write_synthetic_fashion_mnist(d, /*n_train=*/640, /*n_test=*/200, /*seed=*/17);
        return d;
    }();
    return dir;
}

std::string tiny_recipe_yaml(const std::string& extra) {
    return "name: tiny\n"
           "seed: 3\n"
           "model: {hidden: [32]}\n"
           "data: {path: '" + tiny_data_dir() + "'}\n"
           "quantization:\n"
           "  weight: {method: absmean, granularity: channel}\n"
           "  activation: {method: int8_per_token}\n" +
           extra;
}

const std::string& tiny_text_dir() {
    static const std::string dir = [] {
        std::string d = make_temp_dir("trit-tiny-text");
        const char* who[] = {"The cat", "A dog", "My friend", "The old man", "Every child"};
        const char* did[] = {"sat on", "looked at", "ran past", "dreamed of", "laughed at"};
        const char* what[] = {"the mat.", "a tree.", "the moon.", "his hat.", "the sea."};
        std::mt19937 rng(5);  // raw draws only: the same text on every standard library
        std::ofstream out(d + "/tiny");
        for (int i = 0; i < 600; ++i) {
            out << who[rng() % 5] << " " << did[rng() % 5] << " " << what[rng() % 5] << "\n";
            if (rng() % 3 == 0) out << who[rng() % 5] << " " << did[rng() % 5] << " " << what[rng() % 5] << "\n";
            out << "%\n";
        }
        TRIT_CHECK(out.good(), "cannot write ", d, "/tiny");
        return d;
    }();
    return dir;
}

std::string tiny_gpt_recipe_yaml(const std::string& extra) {
    return "name: tiny_gpt\n"
           "seed: 3\n"
           "model: {type: gpt, dim: 32, depth: 1, heads: 2, context: 32}\n"
           "data: {dataset: fortunes, path: '" + tiny_text_dir() + "'}\n" +
           extra;
}

std::map<std::string, torch::Tensor> checkpoint_parameters(const std::string& run_dir) {
    const std::string path = run_dir + "/" + trainers::kCheckpointFile;
    Recipe r = parse_recipe(trainers::read_checkpoint_recipe(path), path);
    auto model = make_model(r.model);
    trainers::load_checkpoint(path, *model, nullptr, nullptr);
    std::map<std::string, torch::Tensor> out;
    for (const auto& p : model->named_parameters()) out[p.key()] = p.value().clone();
    return out;
}

}  // namespace trit::testing
