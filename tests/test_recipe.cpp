// Recipes: the shipped recipes parse; every mistake a user can make (unknown key, wrong type,
// out-of-range value, bad --set, bad regex, epochs and steps both) names the key path and the line
// or the --set that caused it; the written recipe reads back to itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/recipe.h"
#include "tests/support/process.h"

namespace trit {
namespace {

using ::testing::HasSubstr;

// The message of the trit::Error that parsing `text` throws ("" when it does not throw).
std::string parse_error(const std::string& text, const std::vector<std::string>& sets = {}) {
    try {
        parse_recipe(text, "r.yaml", sets);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(Recipe, ShippedRecipesParse) {
    for (const char* name : {"recipes/fashion_mnist_fp32.yaml", "recipes/fashion_mnist_ternary.yaml"}) {
        Recipe r = load_recipe(testing::source_path(name));
        EXPECT_EQ(r.model.hidden, (std::vector<int64_t>{256, 128})) << name;
        EXPECT_EQ(r.output.dir, "runs/" + r.name);
    }
    Recipe t = load_recipe(testing::source_path("recipes/fashion_mnist_ternary.yaml"));
    EXPECT_EQ(t.quantization.weight.method, "absmean");
    EXPECT_EQ(t.quantization.activation.method, "int8_per_token");
}

TEST(Recipe, DefaultsAndNameFromFile) {
    Recipe r = parse_recipe("{}", "dir/my_run.yaml");
    EXPECT_EQ(r.name, "my_run");
    EXPECT_EQ(r.training.epochs, 10);
    EXPECT_EQ(r.quantization.weight.method, "none");
    EXPECT_EQ(r.quantization.targets, (std::vector<std::string>{"re:.*"}));
}

TEST(Recipe, UnknownKeyNamesPathLineAndKnownKeys) {
    const std::string e = parse_error("optimizer:\n  lr: 0.1\n  lrr: 0.2\n");
    EXPECT_THAT(e, HasSubstr("r.yaml:3"));
    EXPECT_THAT(e, HasSubstr("optimizer.lrr"));
    EXPECT_THAT(e, HasSubstr("known keys"));
    EXPECT_THAT(parse_error("modle:\n  type: mlp\n"), HasSubstr("unknown key 'modle'"));
}

TEST(Recipe, WrongTypesAndRangesNameExpectation) {
    EXPECT_THAT(parse_error("optimizer:\n  lr: fast\n"), HasSubstr("r.yaml:2: optimizer.lr: expected a number"));
    EXPECT_THAT(parse_error("optimizer:\n  lr: -1\n"), HasSubstr("optimizer.lr: expected a number in (0"));
    EXPECT_THAT(parse_error("training:\n  batch_size: 0\n"), HasSubstr("training.batch_size: expected an integer in [1"));
    EXPECT_THAT(parse_error("training:\n  batch_size: 1.5\n"), HasSubstr("training.batch_size"));
    EXPECT_THAT(parse_error("model:\n  hidden: 256\n"), HasSubstr("model.hidden: expected a list of integers"));
    EXPECT_THAT(parse_error("model:\n  bias: maybe\n"), HasSubstr("model.bias: expected true or false"));
    EXPECT_THAT(parse_error("model: mlp\n"), HasSubstr("model: expected a mapping"));
    EXPECT_THAT(parse_error("seed: -3\n"), HasSubstr("seed: expected a non-negative integer"));
    EXPECT_THAT(parse_error("quantization:\n  weight:\n    threshold: 2\n"),
                HasSubstr("quantization.weight.threshold: expected a number in [0, 1]"));
    EXPECT_THAT(parse_error("- a\n- b\n"), HasSubstr("expected a mapping of keys"));
}

TEST(Recipe, DuplicateKeysAreRejected) {
    EXPECT_THAT(parse_error("model:\n  hidden: [4]\nseed: 1\nmodel:\n  hidden: [8]\n"),
                HasSubstr("r.yaml:4: model: duplicate key (first at line 1)"));
    EXPECT_THAT(parse_error("optimizer:\n  lr: 0.1\n  lr: 0.2\n"),
                HasSubstr("r.yaml:3: optimizer.lr: duplicate key (first at line 2)"));
}

TEST(Recipe, ChoicesListKnownValues) {
    const std::string e = parse_error("quantization:\n  weight:\n    method: absmedian\n");
    EXPECT_THAT(e, HasSubstr("quantization.weight.method"));
    EXPECT_THAT(e, HasSubstr("{none, absmean, absmax_threshold, binary, balanced}"));
    EXPECT_THAT(parse_error("model:\n  type: cnn\n"), HasSubstr("expected one of {mlp}"));
}

TEST(Recipe, EpochsOrStepsNotBoth) {
    EXPECT_THAT(parse_error("training:\n  epochs: 2\n  steps: 100\n"), HasSubstr("exactly one of"));
    EXPECT_EQ(parse_recipe("training:\n  steps: 100\n", "r.yaml").training.epochs, 0);
    EXPECT_THAT(parse_error("training:\n  epochs: 0\n"), HasSubstr("exactly one of"));
}

TEST(Recipe, ModelMustFitDataset) {
    EXPECT_THAT(parse_error("model:\n  input: 100\n"), HasSubstr("model.input: fashion_mnist images have 784"));
    EXPECT_THAT(parse_error("model:\n  classes: 5\n"), HasSubstr("10 classes"));
}

TEST(Recipe, InvalidRegexIsRejected) {
    EXPECT_THAT(parse_error("quantization:\n  targets: ['re:fc[']\n"),
                HasSubstr("quantization.targets: invalid regular expression"));
}

TEST(Recipe, InvalidYamlNamesLine) {
    EXPECT_THAT(parse_error("model:\n  hidden: [1, 2\n"), HasSubstr("not valid YAML"));
}

TEST(Recipe, SetOverridesAnyKeyAndIsNamedInErrors) {
    Recipe r = parse_recipe("optimizer:\n  lr: 0.1\n", "r.yaml",
                            {"optimizer.lr=3e-4", "model.hidden=[64, 32]", "training.steps=5",
                             "training.epochs=0", "name=other"});
    EXPECT_DOUBLE_EQ(r.optimizer.lr, 3e-4);
    EXPECT_EQ(r.model.hidden, (std::vector<int64_t>{64, 32}));
    EXPECT_EQ(r.training.steps, 5);
    EXPECT_EQ(r.name, "other");
    EXPECT_THAT(parse_error("{}", {"optimizer.lr=abc"}), HasSubstr("--set optimizer.lr: expected a number"));
    EXPECT_THAT(parse_error("{}", {"optimizer.lrr=1"}), HasSubstr("--set optimizer.lrr: unknown key"));
    EXPECT_THAT(parse_error("{}", {"optimizer"}), HasSubstr("expected key.path=value"));
    EXPECT_THAT(parse_error("seed: 1\n", {"seed.x=1"}), HasSubstr("'seed' holds a value"));
    EXPECT_THAT(parse_error("{}", {"a..b=1"}), HasSubstr("empty key"));
}

TEST(Recipe, WrittenRecipeReadsBackToItself) {
    Recipe r = load_recipe(testing::source_path("recipes/fashion_mnist_ternary.yaml"),
                           {"optimizer.lr=0.0123456789", "quantization.ignore=[fc2]"});
    const std::string text = recipe_to_yaml(r);
    Recipe back = parse_recipe(text, "resolved.yaml");
    EXPECT_EQ(recipe_to_yaml(back), text);
    EXPECT_DOUBLE_EQ(back.optimizer.lr, 0.0123456789);
    EXPECT_EQ(back.quantization.ignore, (std::vector<std::string>{"fc2"}));
}

TEST(Recipe, MissingFileIsNamed) {
    try {
        load_recipe("/nonexistent/recipe.yaml");
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_THAT(e.what(), HasSubstr("/nonexistent/recipe.yaml"));
    }
}

}  // namespace
}  // namespace trit
