// A training run's recipe: a typed struct read from TOML (configs/*.toml), every key checked.
//
//   steps = 1000            eval_every = 100    eval_batches = 8    log_every = 10
//   save_every = 500        keep_checkpoints = 3                     out_dir = "runs/x"
//   seed = 0                device = "cpu"      dtype = "f32"       recompute = false    peak_tflops = 0
//   keep_layers = 1         with recompute: the last keep_layers layers keep their activations (Mamba: the slim
//                           set), the others only their input (0 means 1; >= the layer count: nothing
//                           recomputed; TrainOptions)
//   [model]  arch = "llama" | "mamba";  config = "path/config.json" | preset = "name";  [model.hf_config] fields
//            or init = "hf_checkpoint_dir" (start from pretrained weights; arch and shape come from it)
//   [data]   dir = "data/x" (from `anvil prepare`);  seq_len = T;  batch = B;  micro_batches = 1;
//            shuffle = true (false: windows in stream order, every epoch the same; for runs compared step by
//            step with another trainer on the same batches, tools/train_parity.py)
//   [optim]  lr;  betas = [0.9, 0.95];  eps = 1e-8;  weight_decay = 0.1;  grad_clip = 1.0 (0: off);
//            schedule = "cosine" | "wsd";  warmup_steps = 0;  decay_fraction = 0.2 (wsd);  min_lr_ratio = 0.1
//
// One optimizer step consumes micro_batches batches of B windows of T tokens. Relative paths are relative to
// the working directory. An unknown key, a wrong type or an impossible value is an anvil::Error naming the key
// and where it came from (file:line, or the --set argument).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "models/factory.h"
#include "train/lr_schedule.h"

namespace anvil {

struct DataConfig {
  std::string dir;
  int64_t seq_len = 0;
  int64_t batch = 0;
  int64_t micro_batches = 1;
  bool shuffle = true;
};

struct OptimConfig {
  double lr = 0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1, grad_clip = 1.0;
  std::string schedule = "cosine";
  int64_t warmup_steps = 0;
  double decay_fraction = 0.2, min_lr_ratio = 0.1;
};

struct TrainConfig {
  std::string source;      // the recipe file, for messages
  ModelSpec model;
  std::string model_init;  // [model] init
  DataConfig data;
  OptimConfig optim;
  int64_t steps = 0;
  int64_t eval_every = 0;  // 0: only at the end
  int64_t eval_batches = 8;
  int64_t log_every = 10;
  int64_t save_every = 0;  // 0: only at the end (and on Ctrl-C)
  int64_t keep_checkpoints = 3;
  std::string out_dir;
  uint64_t seed = 0;
  std::string device = "cpu";  // cpu | gpu | gpu:N
  std::string dtype = "f32";   // compute dtype: f32 | bf16 (GPU)
  bool recompute = false;
  int64_t keep_layers = 1;     // TrainOptions::keep_layers
  double peak_tflops = 0;      // for MFU; 0: look the device up (GPU only)

  LrSchedule schedule() const;
  int64_t tokens_per_step() const { return data.batch * data.seq_len * data.micro_batches; }
};

// overrides: "key=value" with a dotted key ("optim.lr=1e-3"); the value is read as TOML, or as a string when it
// is not valid TOML (so --set out_dir=runs/x needs no quotes).
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides = {});
TrainConfig parse_train_config(std::string_view toml_text, const std::string& source,
                               const std::vector<std::string>& overrides = {});

nlohmann::json to_json(const TrainConfig& c);

}  // namespace anvil
