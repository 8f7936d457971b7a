#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "train/train_config.h"

using namespace anvil;

namespace {

const char* kRecipe = R"(steps = 200
eval_every = 50
out_dir = "runs/t"
seed = 5

[model]
arch = "llama"
config = "configs/models/llama-tiny.json"

[data]
dir = "data/x"
seq_len = 128
batch = 8
micro_batches = 2

[optim]
lr = 3e-3
betas = [0.9, 0.99]
schedule = "wsd"
warmup_steps = 10
decay_fraction = 0.25
)";

// The message of the anvil::Error that parsing throws.
std::string error_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  try {
    parse_train_config(text, "recipe.toml", sets);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(TrainConfig, ParsesEveryKeyWithDefaults) {
  TrainConfig c = parse_train_config(kRecipe, "recipe.toml");
  EXPECT_EQ(c.steps, 200);
  EXPECT_EQ(c.eval_every, 50);
  EXPECT_EQ(c.log_every, 10);  // default
  EXPECT_EQ(c.model.arch, "llama");
  EXPECT_EQ(c.model.config_path, "configs/models/llama-tiny.json");
  EXPECT_EQ(c.data.seq_len, 128);
  EXPECT_EQ(c.data.micro_batches, 2);
  EXPECT_TRUE(c.data.shuffle);  // default
  EXPECT_EQ(c.tokens_per_step(), 128 * 8 * 2);
  EXPECT_DOUBLE_EQ(c.optim.lr, 3e-3);
  EXPECT_DOUBLE_EQ(c.optim.beta2, 0.99);
  EXPECT_DOUBLE_EQ(c.optim.eps, 1e-8);
  EXPECT_EQ(c.optim.schedule, "wsd");
  EXPECT_EQ(c.schedule().decay_steps(), 50);
  EXPECT_EQ(c.seed, 5u);
  EXPECT_EQ(c.device, "cpu");
  EXPECT_EQ(c.keep_layers, 1);  // default: only the last layer keeps everything
  EXPECT_EQ(to_json(c)["optim"]["betas"][1].get<double>(), 0.99);
}

TEST(TrainConfig, KeepLayers) {
  TrainConfig c = parse_train_config(std::string("recompute = true\nkeep_layers = 24\n") + kRecipe, "recipe.toml");
  EXPECT_TRUE(c.recompute);
  EXPECT_EQ(c.keep_layers, 24);
  EXPECT_EQ(to_json(c)["keep_layers"].get<int64_t>(), 24);
  EXPECT_EQ(parse_train_config(kRecipe, "recipe.toml", {"keep_layers=0"}).keep_layers, 0);  // means 1
  std::string e = error_of(std::string("keep_layers = -2\n") + kRecipe);
  EXPECT_TRUE(has(e, "keep_layers") && has(e, ">= 0") && has(e, "-2") && has(e, "recipe.toml:1")) << e;
  e = error_of(kRecipe, {"keep_layers=-1"});
  EXPECT_TRUE(has(e, "keep_layers") && has(e, "--set keep_layers=-1")) << e;
  EXPECT_TRUE(has(error_of(kRecipe, {"keep_layers=half"}), "integer"));
}

TEST(TrainConfig, UnknownKeyNamesKeyAndFile) {
  std::string e = error_of(std::string(kRecipe) + "lrr = 1\n");
  EXPECT_TRUE(has(e, "lrr") && has(e, "recipe.toml") && has(e, "unknown key")) << e;
  e = error_of(std::string(kRecipe) + "weight_decai = 0.1\n");  // lands in [optim]
  EXPECT_TRUE(has(e, "optim.weight_decai") && has(e, "recipe.toml:22")) << e;
  EXPECT_TRUE(has(e, "optim.weight_decay")) << "the message lists the known keys: " << e;
  e = error_of(std::string(kRecipe) + "[extra]\nx = 1\n");
  EXPECT_TRUE(has(e, "extra")) << e;
}

TEST(TrainConfig, WrongTypesAndImpossibleValues) {
  EXPECT_TRUE(has(error_of(kRecipe, {"optim.lr=-1"}), "optim.lr")) << error_of(kRecipe, {"optim.lr=-1"});
  EXPECT_TRUE(has(error_of(kRecipe, {"data.batch=0"}), "data.batch"));
  EXPECT_TRUE(has(error_of(kRecipe, {"data.seq_len=\"long\""}), "integer"));
  EXPECT_TRUE(has(error_of(kRecipe, {"optim.betas=[0.9]"}), "two numbers"));
  EXPECT_TRUE(has(error_of(kRecipe, {"data.shuffle=no"}), "data.shuffle"));
  EXPECT_TRUE(has(error_of(kRecipe, {"optim.betas=[0.9, 1.0]"}), "optim.betas"));
  EXPECT_TRUE(has(error_of(kRecipe, {"optim.schedule=linear"}), "optim.schedule"));
  EXPECT_TRUE(has(error_of(kRecipe, {"optim.warmup_steps=500"}), "optim.warmup_steps"));
  EXPECT_TRUE(has(error_of(kRecipe, {"optim.decay_fraction=0.99"}), "optim.decay_fraction"));
  EXPECT_TRUE(has(error_of(kRecipe, {"dtype=bf16"}), "GPU-only"));
  EXPECT_TRUE(has(error_of(kRecipe, {"device=tpu"}), "device"));
  EXPECT_TRUE(has(error_of(kRecipe, {"model.arch=gpt"}), "model.arch"));
  EXPECT_TRUE(has(error_of(kRecipe, {"model.preset=x"}), "model.preset"));  // with model.config
  EXPECT_TRUE(has(error_of(kRecipe, {"model.init=hf/dir"}), "model.arch"));  // init decides the shape
  EXPECT_TRUE(has(error_of("steps = 1\n"), "data.dir")) << "a missing required key is named";
  EXPECT_TRUE(has(error_of("steps = [\n"), "valid TOML"));
}

TEST(TrainConfig, SetOverridesAnyKey) {
  TrainConfig c = parse_train_config(kRecipe, "recipe.toml",
                                     {"optim.lr=1e-4", "out_dir=runs/other", "steps=7", "optim.warmup_steps=0",
                                      "recompute=true", "model.hf_config.hidden_size=64", "data.shuffle=false"});
  EXPECT_DOUBLE_EQ(c.optim.lr, 1e-4);
  EXPECT_EQ(c.out_dir, "runs/other");  // not TOML: taken as a string
  EXPECT_EQ(c.steps, 7);
  EXPECT_TRUE(c.recompute);
  EXPECT_FALSE(c.data.shuffle);
  EXPECT_EQ(to_json(c)["data"]["shuffle"], false);
  EXPECT_EQ(c.model.overrides["hidden_size"].get<int>(), 64);
  std::string e = error_of(kRecipe, {"optim.lrr=1"});
  EXPECT_TRUE(has(e, "optim.lrr") && has(e, "--set optim.lrr=1")) << e;
  EXPECT_TRUE(has(error_of(kRecipe, {"steps"}), "KEY=VALUE"));
  EXPECT_TRUE(has(error_of(kRecipe, {"steps.x=1"}), "table"));
}

// Every recipe the repository ships must load.
TEST(TrainConfig, ShippedRecipesAreValid) {
  int n = 0;
  for (auto& e : std::filesystem::directory_iterator(std::string(ANVIL_SOURCE_DIR) + "/configs")) {
    if (e.path().extension() != ".toml") continue;
    SCOPED_TRACE(e.path().string());
    TrainConfig c = load_train_config(e.path().string());
    if (!c.model.config_path.empty()) {
      EXPECT_TRUE(std::filesystem::exists(std::string(ANVIL_SOURCE_DIR) + "/" + c.model.config_path));
    }
    n++;
  }
  EXPECT_GE(n, 5);
}
