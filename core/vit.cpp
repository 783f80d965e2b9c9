// ViT: see vit.h.
#include "core/vit.h"

#include <torch/nn/init.h>

#include "core/error.h"

namespace trit {

namespace {

// Validates before any member is built, so a bad config fails with its key, not a shape error.
const ModelConfig& checked(const ModelConfig& c) {
    TRIT_CHECK(c.type == "vit", "Vit: expected model.type vit, got '", c.type, "'");
    const ModelConfigProblem p = check_model_config(c);
    TRIT_CHECK(p.key.empty(), "model.", p.key, ": ", p.message);
    return c;
}

int64_t image_side(int64_t input) {
    int64_t s = 1;
    while ((s + 1) * (s + 1) <= input)
        ++s;
    return s;
}

}  // namespace

Vit::Vit(const ModelConfig& config)
    : relu2_(checked(config).activation == "relu2"), side_(image_side(config.input)), patch_size_(config.patch) {
    const BlockOptions options = block_options(config);
    const int64_t grid = side_ / patch_size_;
    patch_ =
        register_module("patch", QuantLinear(patch_size_ * patch_size_, config.dim, config.bias));
    // Small random class token and positions (as in ViT and GPT-2 implementations).
    cls_ = register_parameter("cls", torch::empty({1, 1, config.dim}));
    pos_ = register_parameter("pos", torch::empty({1, grid * grid + 1, config.dim}));
    torch::nn::init::normal_(cls_, /*mean=*/0.0, /*std=*/0.02);
    torch::nn::init::normal_(pos_, /*mean=*/0.0, /*std=*/0.02);
    block_list_ = register_module("blocks", torch::nn::ModuleList());
    for (int64_t i = 0; i < config.depth; ++i) {
        blocks_.emplace_back(options);
        block_list_->push_back(blocks_.back());
    }
    norm_ = register_module("norm", RmsNorm(config.dim, config.norm_eps));
    head_ = register_module("head", QuantLinear(config.dim, config.classes, config.bias));
}

torch::Tensor Vit::forward(const torch::Tensor& x) {
    return run(x, nullptr);
}

torch::Tensor Vit::forward_hidden(const torch::Tensor& x, std::vector<torch::Tensor>& hidden) {
    return run(x, &hidden);
}

bool Vit::input_nonnegative(const std::string& name) const {
    return relu2_ && name.size() > 9 && name.compare(name.size() - 9, 9, ".mlp.down") == 0;
}

torch::Tensor Vit::run(const torch::Tensor& x, std::vector<torch::Tensor>* hidden) {
    const int64_t input = side_ * side_;
    TRIT_CHECK(x.dim() == 2 && x.size(1) == input && x.is_floating_point(),
               "vit: expected float input (batch, ", input, ") (", side_, "x", side_,
               " images flattened), got ", x.scalar_type(), " ", x.sizes());
    const int64_t b = x.size(0), g = side_ / patch_size_, p = patch_size_;
    // (B, side*side) -> (B, g, p, g, p) -> (B, g, g, p, p): patches in row-major grid order.
    torch::Tensor patches =
        x.reshape({b, g, p, g, p}).permute({0, 1, 3, 2, 4}).reshape({b, g * g, p * p});
    torch::Tensor h = torch::cat({cls_.expand({b, 1, cls_.size(2)}), patch_->forward(patches)}, 1);
    h = h + pos_;  // (B, tokens, dim)
    for (auto& block : blocks_) {
        h = block->forward(h);
        if (hidden) hidden->push_back(h);
    }
    return head_->forward(norm_->forward(h.select(1, 0)));
}

}  // namespace trit
