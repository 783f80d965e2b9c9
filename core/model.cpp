// The model factory: one line per model family.
#include "core/model.h"

#include "core/error.h"
#include "core/gpt.h"
#include "core/vit.h"

namespace trit {

std::shared_ptr<Model> make_model(const ModelConfig& config) {
    if (config.type == "mlp") return make_mlp(config);
    if (config.type == "vit") return std::make_shared<Vit>(config);
    if (config.type == "gpt") return std::make_shared<Gpt>(config);
    TRIT_FAIL("model.type: unknown model '", config.type, "'; known: mlp, vit, gpt");
}

}  // namespace trit
