#include "train/train_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backends/backend.h"
#include "core/error.h"
#include "core/rng.h"
#include "train/optimizer.h"
#ifdef ANVIL_HAS_GPU
#include "backends/gpu/runtime.h"
#endif

namespace anvil {

namespace {

using Clock = std::chrono::steady_clock;

// q-quantile of v by linear interpolation.
double quantile_of(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(pos), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

// One batch of seeded random windows: B sequences of T + 1 tokens in [0, V), ids the first T, targets the last
// T (next-token prediction, every target valid). Made on the host and uploaded inside the timed step, as the
// trainer's loader does (8·B·T bytes).
void random_batch(int64_t B, int64_t T, int64_t V, uint64_t seed, uint64_t step, Device d, Tensor& ids,
                  Tensor& targets) {
  Tensor x = Tensor::empty({B, T}, DType::i32, Device::cpu()), y = Tensor::empty({B, T}, DType::i32, Device::cpu());
  int32_t *xp = x.data<int32_t>(), *yp = y.data<int32_t>();
  const uint64_t base = step * uint64_t(B) * uint64_t(T + 1);
  for (int64_t b = 0; b < B; b++) {
    auto tok = [&](int64_t t) {
      const float u = rng_uniform(seed, base + uint64_t(b * (T + 1) + t));
      return int32_t(std::min<int64_t>(V - 1, int64_t(u * float(V))));
    };
    int32_t prev = tok(0);
    for (int64_t t = 0; t < T; t++) {
      const int32_t next = tok(t + 1);
      xp[b * T + t] = prev;
      yp[b * T + t] = next;
      prev = next;
    }
  }
  ids = x.to(d);
  targets = y.to(d);
}

}  // namespace

int64_t model_state_bytes(CausalLM& model) {
  int64_t bytes = 0;
  for (const Param& p : model.params()) {
    const int64_t n = p.weight.numel();
    bytes += int64_t(p.weight.nbytes());
    if (p.master.defined() && p.master.data_ptr() != p.weight.data_ptr()) bytes += 4 * n;
    if (p.grad.defined()) bytes += 4 * n;
    bytes += 2 * 4 * n;  // AdamW exp_avg, exp_avg_sq
  }
  return bytes;
}

int64_t peak_rss_bytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  int64_t kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      kb = std::atoll(line + 6);
      break;
    }
  std::fclose(f);
  return kb * 1024;
}

TrainBenchResult bench_train(CausalLM& model, const TrainBenchConfig& cfg) {
  ANVIL_CHECK(cfg.batch >= 1 && cfg.seq >= 1, "bench_train", "batch >= 1 and seq >= 1",
              str("batch ", cfg.batch, ", seq ", cfg.seq));
  ANVIL_CHECK(cfg.steps >= 1 && cfg.warmup >= 0, "bench_train", "steps >= 1 and warmup >= 0",
              str("steps ", cfg.steps, ", warmup ", cfg.warmup));
  const ModelInfo& info = model.info();
  ANVIL_CHECK(info.max_len <= 0 || cfg.seq <= info.max_len, "bench_train",
              str("seq within the model's ", info.max_len, " positions"), cfg.seq);
  const Device dev = model.device();
  Backend& be = backend(dev);
  AdamW opt(model);
  OptimConfig oc;
  oc.lr = cfg.lr;
  TrainOptions topt;
  topt.recompute = cfg.recompute;
  topt.keep_layers = cfg.keep_layers;

  TrainBenchResult r;
  r.flops_per_token = info.train_flops_per_token(cfg.seq);
  r.state_bytes = model_state_bytes(model);
  be.synchronize();
  for (int s = 0; s < cfg.warmup + cfg.steps; s++) {
    auto t0 = Clock::now();
    Tensor ids, targets;
    random_batch(cfg.batch, cfg.seq, info.vocab, cfg.seed, uint64_t(s), dev, ids, targets);
    model.zero_grad();
    const double loss = model.forward_backward(ids, targets, 1.f, topt);
    // The trainer's step: global-norm clipping at 1.0 (one device reduction and host read), then AdamW.
    const double norm = opt.grad_norm();
    ANVIL_CHECK(std::isfinite(loss) && std::isfinite(norm), "bench_train",
                str("a finite loss and gradient norm at step ", s + 1), str("loss ", loss, ", grad norm ", norm));
    opt.step(oc, cfg.lr, norm > 1.0 ? 1.0 / norm : 1.0);
    be.synchronize();
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (s == 0) r.first_loss = loss;
    r.last_loss = loss;
    if (s >= cfg.warmup) r.step_ms.push_back(ms);
  }
  r.median_ms = quantile_of(r.step_ms, 0.5);
  r.p10_ms = quantile_of(r.step_ms, 0.1);
  r.p90_ms = quantile_of(r.step_ms, 0.9);
  r.tokens_per_s = r.median_ms > 0 ? 1e3 * double(cfg.batch * cfg.seq) / r.median_ms : 0;
  r.activation_bytes = model.saved_activation_bytes();
#ifdef ANVIL_HAS_GPU
  if (dev.is_gpu()) r.peak_bytes = int64_t(gpu::peak_bytes_in_use());
#endif
  if (!dev.is_gpu()) {
    r.peak_bytes = peak_rss_bytes();
    r.peak_is_rss = true;
  }
  return r;
}

}  // namespace anvil
