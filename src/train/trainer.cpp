#include "train/trainer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "backends/backend.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train/fs_util.h"
#include "train/loader.h"
#include "train/loss_plot.h"
#include "train/metrics.h"
#include "train/optimizer.h"
#include "train/progress.h"

namespace anvil {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_sigint(int) {
  g_stop.store(true);
  const char msg[] = "\nanvil: Ctrl-C: stopping after this step and saving a checkpoint (Ctrl-C again to kill)\n";
  ssize_t ignored = ::write(2, msg, sizeof msg - 1);
  (void)ignored;
}

// Dense bf16 peaks for MFU when the recipe gives none. H200: the cuBLAS 8192^3 bf16 GEMM rate measured on the
// card (docs: TARGETS.md defines MFU against it), not the 989 TFLOP/s datasheet figure.
double lookup_peak_flops(Device d) {
  if (!d.is_gpu()) return 0;
  std::string name = backend(d).info().name;
  if (name.find("H200") != std::string::npos) return 771e12;
  return 0;
}

std::string short_float(double v) {  // 2.9e-4 rather than 2.9e-04
  char b[32];
  std::snprintf(b, sizeof b, "%.1e", v);
  std::string s = b;
  size_t e = s.find("e");
  if (e != std::string::npos && e + 2 < s.size() && s[e + 2] == '0') s.erase(e + 2, 1);
  return s;
}

std::string g4(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

}  // namespace

struct Trainer::State {
  TrainConfig cfg;
  CausalLM& model;
  LrSchedule sched;
  AdamW opt;
  std::unique_ptr<BatchLoader> train, val;
  TrainOptions topt;
  int64_t step = 0;
  int64_t resumed_from = -1;
  std::string last_checkpoint;
  double peak_flops = 0;

  State(const TrainConfig& c, CausalLM& m) : cfg(c), model(m), sched(c.schedule()), opt(m) {}

  json trainer_state() const {
    const DatasetMeta& meta = read_dataset_meta(cfg.data.dir);
    LoaderState ls = train->state();
    return {{"format", "anvil-trainer-state"}, {"version", 1}, {"step", step},
            {"loader", {{"epoch", ls.epoch}, {"position", ls.position}}},
            {"rng", {{"seed", cfg.seed}, {"generator", "philox4x32-10, counter-based: the seed is the whole state"}}},
            {"tokens_seen", step * cfg.tokens_per_step()},
            {"dataset", {{"tokenizer_id", tokenizer_id_hex(meta.tokenizer_id)},
                         {"train_tokens", meta.splits.count("train") ? meta.splits.at("train").tokens : 0}}},
            {"config", to_json(cfg)}};
  }

  std::string save() {
    json st = trainer_state();
    last_checkpoint = save_checkpoint(cfg.out_dir, step, cfg.keep_checkpoints, [&](const std::string& dir) {
      model.save(dir);
      opt.save((fs::path(dir) / "optimizer.safetensors").string());
      write_file_atomic((fs::path(dir) / "trainer_state.json").string(), st.dump(2) + "\n");
      // With the dataset's tokenizer beside the weights the checkpoint is a complete Hugging Face directory.
      fs::path tok = fs::path(cfg.data.dir) / "tokenizer.json", dst = fs::path(dir) / "tokenizer.json";
      if (fs::exists(tok) && !fs::exists(dst)) write_file_atomic(dst.string(), read_file_bytes(tok.string()));
    });
    return last_checkpoint;
  }

  [[noreturn]] void diverged(int64_t at, double loss, double norm) {
    std::string bad = opt.first_nonfinite_grad();
    ANVIL_THROW("train", str("a finite loss and gradient norm at step ", at),
                str("loss ", loss, ", grad norm ", norm,
                    bad.empty() ? std::string() : "; first non-finite gradient: " + bad,
                    "; last good checkpoint: ", last_checkpoint.empty() ? "none saved yet" : last_checkpoint,
                    " (lower optim.lr or set optim.grad_clip)"));
  }
};

Trainer::Trainer(const TrainConfig& cfg, CausalLM& model) : s_(std::make_unique<State>(cfg, model)) {
  auto train = std::make_shared<TokenStream>(cfg.data.dir, "train");
  const DatasetMeta& meta = train->meta();
  int64_t vocab = model.info().vocab;
  ANVIL_CHECK(vocab <= 0 || int64_t(meta.vocab_size) <= vocab, "train",
              str("a dataset whose token ids fit the model's vocabulary (", vocab, ")"),
              str("vocab_size ", meta.vocab_size, " in '", cfg.data.dir, "' (prepared with another tokenizer?)"));
  s_->train = std::make_unique<BatchLoader>(train, cfg.data.batch, cfg.data.seq_len, cfg.seed,
                                           cfg.data.shuffle);
  auto val = std::make_shared<TokenStream>(cfg.data.dir, "val");
  int64_t val_windows = val->size() > cfg.data.seq_len ? (val->size() - 1) / cfg.data.seq_len : 0;
  if (val_windows > 0)
    s_->val = std::make_unique<BatchLoader>(val, std::min(cfg.data.batch, val_windows), cfg.data.seq_len, cfg.seed,
                                            false);
  s_->topt.recompute = cfg.recompute;
  s_->topt.keep_layers = cfg.keep_layers;
  s_->peak_flops = cfg.peak_tflops > 0 ? cfg.peak_tflops * 1e12 : lookup_peak_flops(model.device());
}

Trainer::~Trainer() = default;

int64_t Trainer::step() const { return s_->step; }

void Trainer::resume(const std::string& dir) {
  State& s = *s_;
  std::string state_path = (fs::path(dir) / "trainer_state.json").string();
  json st;
  try {
    st = json::parse(read_file_bytes(state_path));
  } catch (const json::exception& e) {
    ANVIL_THROW("resume", "a valid trainer_state.json", str("'", state_path, "': ", e.what()));
  }
  ANVIL_CHECK(st.value("format", "") == "anvil-trainer-state", "resume", "format anvil-trainer-state",
              str("'", state_path, "'"));
  // The batch order depends on these; a different value would silently change the data the run sees.
  const json& old = st["config"];
  json now = to_json(s.cfg);
  auto same = [&](const json& a, const json& b, const std::string& key) {
    ANVIL_CHECK(a == b, "resume", str(key, " = ", a.dump(), " as in '", state_path, "'"),
                str(b.dump(), " in the recipe (the batch order would change)"));
  };
  for (const char* k : {"seq_len", "batch", "micro_batches"})
    same(old["data"][k], now["data"][k], str("data.", k));
  same(old["seed"], now["seed"], "seed");
  // Checkpoints written before data.shuffle existed have no such key: they were shuffled.
  same(old["data"].value("shuffle", true), now["data"]["shuffle"], "data.shuffle");
  same(st["dataset"], s.trainer_state()["dataset"], "the dataset (tokenizer and train tokens)");

  bool masters = s.opt.load((fs::path(dir) / "optimizer.safetensors").string());
  if (!masters) {  // f32 compute: the weights in model.safetensors are the masters
    SafetensorsIndex weights(dir);
    for (Param& p : s.model.params()) {
      ANVIL_CHECK(weights.contains(p.name), "resume", str("tensor '", p.name, "' in the checkpoint"),
                  str("none in '", dir, "'"));
      load_into(p.master, weights.get(p.name));
    }
  }
  s.model.sync_weights();
  s.step = st.at("step").get<int64_t>();
  ANVIL_CHECK(s.opt.steps_done() == s.step, "resume", str("optimizer step ", s.step, " as trainer_state.json says"),
              str(s.opt.steps_done(), " in '", dir, "/optimizer.safetensors'"));
  s.train->set_state({st["loader"]["epoch"].get<int64_t>(), st["loader"]["position"].get<int64_t>()});
  s.resumed_from = s.step;
  s.last_checkpoint = dir;
}

double Trainer::evaluate() {
  State& s = *s_;
  if (!s.val) return -1;
  int64_t vb = s.val->batch(), total = std::min(s.cfg.eval_batches * s.cfg.data.batch, s.val->windows());
  double sum = 0;
  for (int64_t first = 0; first < total; first += vb) {
    int64_t n = std::min(vb, total - first);
    Batch b = s.val->windows_at(first, n);
    sum += double(s.model.forward_loss(b.ids, b.targets)) * double(n);
  }
  return sum / double(total);
}

TrainResult Trainer::run() {
  State& s = *s_;
  const TrainConfig& c = s.cfg;
  fs::create_directories(c.out_dir);
  MetricsLog metrics((fs::path(c.out_dir) / "metrics.jsonl").string(), s.resumed_from);
  const std::string svg = (fs::path(c.out_dir) / "loss.svg").string();
  auto plot = [&]() { write_loss_svg(svg, metrics.train(), metrics.val(), "loss: " + c.out_dir); };
  TrainResult r;
  r.step = s.step;
  r.checkpoint = s.last_checkpoint;
  if (s.step >= c.steps) {
    if (verbose) std::printf("already at step %lld of %lld: nothing to do\n", (long long)s.step, (long long)c.steps);
    return r;
  }
  const double tok_per_step = double(c.tokens_per_step());
  const double flops_per_token = s.model.info().train_flops_per_token(c.data.seq_len);
  const float grad_weight = 1.f / float(c.data.micro_batches);
  double window_secs = 0;  // step time since the last progress line (evaluation and saving excluded)
  int64_t window_steps = 0, saved_at = -1;

  while (s.step < c.steps) {
    auto t0 = Clock::now();
    const double lr = s.sched.lr(s.step);
    s.model.zero_grad();
    double loss = 0;
    for (int64_t m = 0; m < c.data.micro_batches; m++) {
      Batch b = s.train->next();
      loss += double(s.model.forward_backward(b.ids, b.targets, grad_weight, s.topt));
    }
    loss /= double(c.data.micro_batches);
    const int64_t at = s.step + 1;
    if (!std::isfinite(loss)) s.diverged(at, loss, NAN);
    const double norm = s.opt.grad_norm();
    if (!std::isfinite(norm)) s.diverged(at, loss, norm);
    const double scale = c.optim.grad_clip > 0 && norm > c.optim.grad_clip ? c.optim.grad_clip / norm : 1.0;
    s.opt.step(c.optim, lr, scale);
    s.step = at;
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    window_secs += secs;
    window_steps++;

    json row = {{"step", at}, {"loss", loss}, {"lr", lr}, {"grad_norm", norm}, {"tokens_per_s", tok_per_step / secs}};
    r.loss = loss;
    bool eval_now = at == c.steps || (c.eval_every > 0 && at % c.eval_every == 0);
    double val = -1;
    if (eval_now && s.val) {
      val = evaluate();
      row["val_loss"] = val;
      r.val_loss = val;
    }
    metrics.append(row);
    if (eval_now) plot();
    if (on_step) on_step(at, loss);

    if (verbose && (at == 1 || at % c.log_every == 0 || at == c.steps || val >= 0)) {
      double tps = tok_per_step * double(window_steps) / window_secs;
      std::string line = str("step ", at, "/", c.steps, " | loss ", g4(loss), " | lr ",
                             short_float(lr), " | ", human_count(tps), " tok/s");
      if (s.peak_flops > 0) line += str(" | MFU ", std::lround(100.0 * tps * flops_per_token / s.peak_flops), "%");
      line += " | ETA " + human_duration(double(c.steps - at) * window_secs / double(window_steps));
      if (val >= 0) line += str(" | val ", g4(val));
      std::printf("%s\n", line.c_str());
      std::fflush(stdout);
      window_secs = 0;
      window_steps = 0;
    }
    if (c.save_every > 0 && at % c.save_every == 0 && at < c.steps) {
      s.save();
      saved_at = at;
    }
    if (g_stop.load()) {
      if (saved_at != at) s.save();
      r.interrupted = true;
      if (verbose) std::printf("stopped at step %lld: saved %s (continue with --resume auto)\n", (long long)at,
                               s.last_checkpoint.c_str());
      break;
    }
  }
  if (!r.interrupted) {
    s.save();
    if (verbose) std::printf("done: %lld steps, loss %.4f%s, saved %s\n", (long long)s.step, r.loss,
                             r.val_loss >= 0 ? str(", val ", r.val_loss).c_str() : "", s.last_checkpoint.c_str());
  }
  plot();
  r.step = s.step;
  r.checkpoint = s.last_checkpoint;
  return r;
}

void Trainer::install_sigint_handler() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;  // the second Ctrl-C gets the default action: the process ends
  sigaction(SIGINT, &sa, nullptr);
}
void Trainer::request_stop() { g_stop.store(true); }
bool Trainer::stop_requested() { return g_stop.load(); }
void Trainer::clear_stop() { g_stop.store(false); }

}  // namespace anvil
