// Layer selection: targets / ignore by name or re:regex, the output layer kept float unless named,
// and a pattern that selects nothing is an error listing the model's layers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/model.h"
#include "quantizers/layer_selection.h"

namespace trit {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> select(std::vector<std::string> targets, std::vector<std::string> ignore = {}) {
    ModelConfig mc;
    mc.hidden = {16, 8};
    auto model = make_model(mc);
    QuantizationConfig q;
    q.weight.method = "absmean";
    q.targets = std::move(targets);
    q.ignore = std::move(ignore);
    return quantizers::apply_quantization(*model, model->output_layer(), q);
}

using Names = std::vector<std::string>;

TEST(LayerSelection, RegexSkipsOutputLayerUnlessNamed) {
    EXPECT_EQ(select({"re:.*"}), (Names{"fc1", "fc2"}));
    EXPECT_EQ(select({"re:.*", "head"}), (Names{"fc1", "fc2", "head"}));
    EXPECT_EQ(select({"fc2"}), (Names{"fc2"}));
    EXPECT_EQ(select({"re:fc[0-9]+"}, {"fc1"}), (Names{"fc2"}));
    EXPECT_EQ(select({"re:.*", "head"}, {"re:f.*"}), (Names{"head"}));
}

TEST(LayerSelection, PatternSelectingNothingIsAnError) {
    try {
        select({"fc9"});
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("quantization.targets: 'fc9' selects no layer"));
        EXPECT_THAT(e.what(), HasSubstr("fc1, fc2, head"));
    }
    EXPECT_THROW(select({"re:.*"}, {"re:conv.*"}), Error);
}

TEST(LayerSelection, SpecIsSetOnSelectedLayersOnly) {
    ModelConfig mc;
    mc.hidden = {16};
    auto model = make_model(mc);
    QuantizationConfig q;
    q.weight.method = "absmax_threshold";
    q.weight.threshold = 0.1;
    q.activation.method = "int8_per_token";
    quantizers::apply_quantization(*model, model->output_layer(), q);
    for (auto& [name, layer] : quant_linears(*model)) {
        if (name == "head") {
            EXPECT_FALSE(layer->quant().enabled());
        } else {
            EXPECT_EQ(layer->quant().weight.method, WeightQuantMethod::kAbsmaxThreshold);
            EXPECT_DOUBLE_EQ(layer->quant().weight.threshold, 0.1);
            EXPECT_EQ(layer->quant().activation, ActQuantMethod::kInt8PerToken);
        }
    }
}

TEST(LayerSelection, FloatRecipeQuantizesNothing) {
    ModelConfig mc;
    auto model = make_model(mc);
    QuantizationConfig q;  // method none
    EXPECT_TRUE(quantizers::apply_quantization(*model, model->output_layer(), q).empty());
}

}  // namespace
}  // namespace trit
