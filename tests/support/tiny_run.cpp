// Tiny synthetic training runs for tests: see tiny_run.h.
#include "tests/support/tiny_run.h"

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
