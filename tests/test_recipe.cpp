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
    EXPECT_THAT(parse_error("model:\n  type: cnn\n"), HasSubstr("expected one of {mlp, vit, gpt}"));
    EXPECT_THAT(parse_error("data:\n  dataset: cifar\n"),
                HasSubstr("expected one of {fashion_mnist, fortunes}"));
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

TEST(Recipe, TransformerKeysAndDefaults) {
    Recipe v = parse_recipe("model:\n  type: vit\n", "r.yaml");
    EXPECT_EQ(v.model.dim, 96);
    EXPECT_EQ(v.model.depth, 4);
    EXPECT_EQ(v.model.heads, 4);
    EXPECT_EQ(v.model.patch, 7);
    EXPECT_EQ(v.model.mlp_hidden, 0);
    EXPECT_EQ(v.model.activation, "gelu");
    EXPECT_FALSE(v.model.bias);
    EXPECT_FALSE(v.model.subln);
    EXPECT_DOUBLE_EQ(v.model.norm_eps, 1e-5);
    EXPECT_EQ(v.data.dataset, "fashion_mnist");

    Recipe g = parse_recipe("model:\n  type: gpt\n", "r.yaml");
    EXPECT_EQ(g.model.dim, 128);
    EXPECT_EQ(g.model.context, 256);
    EXPECT_EQ(g.data.dataset, "fortunes");  // gpt's dataset is the default
    EXPECT_EQ(g.data.path, kDefaultFortunesDir);
    EXPECT_DOUBLE_EQ(g.data.valid_fraction, 0.1);

    Recipe set = parse_recipe(
        "model:\n  type: gpt\n  dim: 48\n  depth: 3\n  heads: 6\n  mlp_hidden: 100\n"
        "  activation: swiglu\n  subln: true\n  norm_eps: 1e-6\n  bias: true\n  context: 64\n"
        "data:\n  dataset: fortunes\n  path: /tmp/f\n  valid_fraction: 0.2\n",
        "r.yaml");
    EXPECT_EQ(set.model.dim, 48);
    EXPECT_EQ(set.model.depth, 3);
    EXPECT_EQ(set.model.heads, 6);
    EXPECT_EQ(set.model.mlp_hidden, 100);
    EXPECT_EQ(set.model.activation, "swiglu");
    EXPECT_TRUE(set.model.subln);
    EXPECT_DOUBLE_EQ(set.model.norm_eps, 1e-6);
    EXPECT_TRUE(set.model.bias);
    EXPECT_EQ(set.model.context, 64);
    EXPECT_EQ(set.data.path, "/tmp/f");
    EXPECT_DOUBLE_EQ(set.data.valid_fraction, 0.2);
    EXPECT_EQ(parse_recipe("model:\n  type: vit\n  patch: 4\n  activation: relu2\n", "r.yaml")
                  .model.patch,
              4);
}

TEST(Recipe, KeysThatDoNotApplyAreErrors) {
    EXPECT_THAT(
        parse_error("model:\n  dim: 64\n"),
        HasSubstr("r.yaml:2: model.dim: does not apply to model type 'mlp' (its keys: type, "
                  "input, hidden, classes, activation, bias)"));
    EXPECT_THAT(parse_error("model:\n  type: vit\n  hidden: [64]\n"),
                HasSubstr("model.hidden: does not apply to model type 'vit'"));
    EXPECT_THAT(parse_error("model:\n  type: vit\n  context: 64\n"),
                HasSubstr("model.context: does not apply"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  patch: 4\n"),
                HasSubstr("model.patch: does not apply"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  input: 784\n"),
                HasSubstr("model.input: does not apply"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  classes: 10\n"),
                HasSubstr("model.classes: does not apply"));
    EXPECT_THAT(parse_error("data:\n  valid_fraction: 0.2\n"),
                HasSubstr("data.valid_fraction: does not apply to dataset 'fashion_mnist'"));
    EXPECT_THAT(
        parse_error("model:\n  type: gpt\ndata:\n  normalize: false\n"),
        HasSubstr("r.yaml:4: data.normalize: does not apply to dataset 'fortunes' (its keys: "
                  "dataset, path, valid_fraction)"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\ndata:\n  train_limit: 5\n"),
                HasSubstr("data.train_limit: does not apply"));
    EXPECT_THAT(parse_error("{}", {"model.subln=true"}),
                HasSubstr("--set model.subln: does not apply"));
}

TEST(Recipe, ModelTypeMustMatchDataset) {
    EXPECT_THAT(
        parse_error("model:\n  type: gpt\ndata:\n  dataset: fashion_mnist\n"),
        HasSubstr("r.yaml:4: data.dataset: model type 'gpt' trains on fortunes (mlp and vit: "
                  "fashion_mnist; gpt: fortunes), got 'fashion_mnist'"));
    EXPECT_THAT(parse_error("model:\n  type: vit\ndata:\n  dataset: fortunes\n"),
                HasSubstr("model type 'vit' trains on fashion_mnist"));
    EXPECT_THAT(parse_error("data:\n  dataset: fortunes\n"),
                HasSubstr("model type 'mlp' trains on fashion_mnist"));
    EXPECT_THAT(parse_error("model:\n  type: vit\n  classes: 5\n"), HasSubstr("10 classes"));
}

TEST(Recipe, TransformerRulesNameTheKey) {
    EXPECT_THAT(parse_error("model:\n  type: vit\n  heads: 5\n"),
                HasSubstr("r.yaml:3: model.heads: expected a divisor of model.dim = 96, got 5"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  dim: 36\n"),
                HasSubstr("model.heads: rotary positions need an even head dim, but model.dim / "
                          "model.heads = 36 / 4 = 9"));
    EXPECT_THAT(parse_error("model:\n  type: vit\n  patch: 5\n"),
                HasSubstr("r.yaml:3: model.patch: expected a divisor of the image side 28"));
    EXPECT_THAT(parse_error("model:\n  type: vit\n  input: 780\n"),
                HasSubstr("model.input: vit takes square images"));
    EXPECT_THAT(parse_error("model:\n  type: vit\n  activation: relu\n"),
                HasSubstr("model.activation: expected one of {gelu, relu2, swiglu}, got 'relu'"));
    EXPECT_THAT(parse_error("model:\n  activation: swiglu\n"),
                HasSubstr("model.activation: expected one of {relu, gelu}, got 'swiglu'"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  norm_eps: 0\n"),
                HasSubstr("model.norm_eps: expected a number in (0, 1]"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  mlp_hidden: -1\n"),
                HasSubstr("model.mlp_hidden: expected an integer in [0"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  context: 0\n"),
                HasSubstr("model.context: expected an integer in [1"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  depth: 0\n"),
                HasSubstr("model.depth: expected an integer in [1"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\n  subln: sometimes\n"),
                HasSubstr("model.subln: expected true or false"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\ndata:\n  valid_fraction: 0\n"),
                HasSubstr("data.valid_fraction: expected a number in (0, 0.5]"));
    EXPECT_THAT(parse_error("model:\n  type: gpt\ndata:\n  valid_fraction: 0.7\n"),
                HasSubstr("data.valid_fraction"));
}

TEST(Recipe, TransformerRecipesReadBackToThemselves) {
    for (const char* text : {"model:\n  type: vit\n  subln: true\n  norm_eps: 3e-6\n",
                             "model:\n  type: gpt\n  activation: relu2\n  context: 128\n"
                             "data:\n  valid_fraction: 0.05\n"}) {
        Recipe r = parse_recipe(text, "r.yaml", {"model.depth=2", "model.mlp_hidden=200"});
        const std::string yaml = recipe_to_yaml(r);
        Recipe back = parse_recipe(yaml, "resolved.yaml");
        EXPECT_EQ(recipe_to_yaml(back), yaml);
        EXPECT_EQ(back.model.depth, 2);
        EXPECT_EQ(back.model.mlp_hidden, 200);
        EXPECT_EQ(back.model.subln, r.model.subln);
        EXPECT_DOUBLE_EQ(back.model.norm_eps, r.model.norm_eps);
        EXPECT_DOUBLE_EQ(back.data.valid_fraction, r.data.valid_fraction);
        EXPECT_EQ(back.data.path, r.data.path);
        // Only the keys of the model type and dataset are written.
        // (Keys of model and data are indented by two spaces.)
        EXPECT_EQ(yaml.find("\n  hidden:"), std::string::npos) << yaml;
        EXPECT_EQ(yaml.find(r.model.type == "gpt" ? "\n  patch:" : "\n  context:"),
                  std::string::npos)
            << yaml;
        EXPECT_EQ(yaml.find(r.model.type == "gpt" ? "\n  normalize:" : "\n  valid_fraction:"),
                  std::string::npos)
            << yaml;
    }
    // The MLP recipe is written as before: no transformer or fortunes key.
    const std::string mlp = recipe_to_yaml(parse_recipe("{}", "r.yaml"));
    for (const char* key :
         {"\n  dim:", "\n  depth:", "\n  context:", "\n  patch:", "\n  valid_fraction:"})
        EXPECT_EQ(mlp.find(key), std::string::npos) << key;
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
