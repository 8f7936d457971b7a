// anvil train: run a training recipe (configs/*.toml); see train/trainer.h and train/train_config.h.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/commands.h"
#include "models/factory.h"
#include "train/checkpoint.h"
#include "train/dataset.h"
#include "train/progress.h"
#include "train/train_config.h"
#include "train/trainer.h"

namespace anvil::cli {
namespace {

int run_train(int argc, char** argv) {
  CLI::App app{"Train a model from a TOML recipe.\n"
               "Example: anvil train configs/quickstart.toml --set steps=500 --resume auto",
               "anvil train"};
  std::string recipe, resume;
  std::vector<std::string> sets;
  app.add_option("recipe", recipe, "run recipe (TOML), e.g. configs/quickstart.toml")->required()
      ->check(CLI::ExistingFile);
  app.add_option("--set", sets, "override a recipe key, e.g. --set optim.lr=1e-3 (repeatable)")
      ->expected(1)->take_all();
  app.add_option("--resume", resume, "continue from a checkpoint directory, or 'auto' for out_dir/latest");
  CLI11_PARSE(app, argc, argv);

  TrainConfig cfg = load_train_config(recipe, sets);
  DatasetMeta meta = read_dataset_meta(cfg.data.dir);  // a missing dataset fails before a big model is built
  Device dev = parse_device(cfg.device);
  DType dtype = dtype_from_name(cfg.dtype);
  std::unique_ptr<CausalLM> model = cfg.model_init.empty()
                                        ? create_model(cfg.model, dev, dtype, /*trainable=*/true, cfg.seed)
                                        : load_model(cfg.model_init, dev, dtype, /*trainable=*/true);
  Trainer trainer(cfg, *model);
  std::string from = resume.empty() ? "" : resolve_resume(resume, cfg.out_dir);
  if (!from.empty()) trainer.resume(from);
  else if (resume == "auto") std::printf("no checkpoint in %s: starting afresh\n", cfg.out_dir.c_str());

  const ModelInfo& mi = model->info();
  std::printf("model %s: %s parameters, %lld layers, width %lld | %s %s\n", mi.arch.c_str(),
              human_count(double(mi.n_params)).c_str(), (long long)mi.layers, (long long)mi.width,
              dev.name().c_str(), cfg.dtype.c_str());
  std::printf("data %s: %s train tokens, %s val | %lld steps x %s tokens%s\n", cfg.data.dir.c_str(),
              human_count(double(meta.splits["train"].tokens)).c_str(),
              human_count(double(meta.splits["val"].tokens)).c_str(), (long long)cfg.steps,
              human_count(double(cfg.tokens_per_step())).c_str(),
              from.empty() ? "" : (" | resuming at step " + std::to_string(trainer.step())).c_str());
  std::fflush(stdout);

  Trainer::install_sigint_handler();
  TrainResult r = trainer.run();
  std::printf("metrics: %s/metrics.jsonl, plot: %s/loss.svg\n", cfg.out_dir.c_str(), cfg.out_dir.c_str());
  return r.interrupted ? 130 : 0;  // 130: the shell's code for a run ended by Ctrl-C (its checkpoint is saved)
}

Register reg({"train", "train a model from a TOML recipe (checkpoints, resume, metrics)", run_train});

}  // namespace
}  // namespace anvil::cli
