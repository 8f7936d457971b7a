// The training loop: micro-batch gradient accumulation, global-norm clipping, AdamW on fp32 masters, LR
// schedule, validation, metrics (JSONL + SVG), checkpoints with exact resume, and a clean stop on Ctrl-C.
//
// Each step: zero_grad; for each of micro_batches batches forward_backward(ids, targets, 1 / micro_batches);
// loss = mean of their losses; a NaN/inf loss or gradient stops the run with an error naming the step and the
// first parameter with a non-finite gradient (the last checkpoint stays the good one); clip scale =
// min(1, grad_clip / grad_norm); AdamW at lr = schedule(step).
//
// Exact resume: a checkpoint holds the fp32 masters, AdamW moments and step, and the loader's (epoch,
// position); with a deterministic model, N steps straight and k + resume + (N - k) give the same losses.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "models/model.h"
#include "train/train_config.h"

namespace anvil {

struct TrainResult {
  int64_t step = 0;          // optimizer steps done
  bool interrupted = false;  // stopped by request_stop() / SIGINT (a checkpoint was saved)
  double loss = 0;           // last training loss
  double val_loss = -1;      // last validation loss, -1 if none
  std::string checkpoint;    // last checkpoint written
};

class Trainer {
 public:
  // Opens the dataset (data.dir) and checks it against the model (vocabulary) and the recipe (seq_len, batch).
  Trainer(const TrainConfig& cfg, CausalLM& model);
  ~Trainer();

  // Restores masters, optimizer, loader position and step from a checkpoint directory. The recipe must agree
  // with the checkpoint's on the data order (data.seq_len, data.batch, data.micro_batches, seed, dataset).
  void resume(const std::string& checkpoint_dir);
  TrainResult run();

  int64_t step() const;
  double evaluate();  // mean validation loss over eval_batches batches; -1 without a validation split

  std::function<void(int64_t step, double loss)> on_step;  // after each optimizer step
  bool verbose = true;                                     // progress lines on stdout

  // Ctrl-C: the first SIGINT asks the loop to stop after the current step (and save); a second one kills.
  static void install_sigint_handler();
  static void request_stop();  // async-signal-safe
  static bool stop_requested();
  static void clear_stop();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace anvil
