#include "serve/bench.h"

#include "serve/generate.h"
#include "serve/greedy_pipe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/rng.h"
#ifdef ANVIL_HAS_GPU
#include "backends/gpu/runtime.h"
#endif

namespace anvil {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Input embedding tables by their Hugging Face names: Llama "model.embed_tokens.weight", Mamba
// "backbone.embeddings.weight", GPT-2 style "wte.weight".
bool is_embedding(const std::string& name) {
  return ends_with(name, "embed_tokens.weight") || ends_with(name, "embeddings.weight") ||
         ends_with(name, "wte.weight");
}

// Events recorded on the stream before and after each step: the step's time as the GPU saw it, which leaves
// out the host's work before the first launch and after the last, and keeps any wait inside the step.
struct StepEvents {
#ifdef ANVIL_HAS_GPU
  bool on = false;
  gpu::EventHandle a = nullptr, b = nullptr;
  explicit StepEvents(Device d) : on(d.is_gpu()) {
    if (on) a = gpu::event_create(), b = gpu::event_create();
  }
  ~StepEvents() {
    if (a) gpu::event_destroy(a);
    if (b) gpu::event_destroy(b);
  }
  void begin() {
    if (on) gpu::event_record(a, gpu::current_stream());
  }
  void end() {
    if (on) gpu::event_record(b, gpu::current_stream());
  }
  double ms() const { return on ? double(gpu::event_elapsed_ms(a, b)) : 0.0; }  // after a synchronisation
#else
  explicit StepEvents(Device) {}
  void begin() {}
  void end() {}
  double ms() const { return 0.0; }
#endif
};

// Seeded random ids (B, T) in [0, V) on `device`.
Tensor random_ids(int64_t B, int64_t T, int64_t V, uint64_t seed, uint64_t offset, Device device) {
  Tensor t = Tensor::empty({B, T}, DType::i32, Device::cpu());
  int32_t* p = t.data<int32_t>();
  for (int64_t i = 0; i < B * T; i++)
    p[i] = int32_t(std::min<int64_t>(V - 1, int64_t(rng_uniform(seed, offset + uint64_t(i)) * float(V))));
  return t.to(device);
}

}  // namespace

double quantile(std::vector<double> v, double q) {
  ANVIL_CHECK(!v.empty(), "quantile", "at least one value", "none");
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos)), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

int64_t decode_weight_bytes(CausalLM& model, int batch) {
  auto& params = model.params();
  bool tied = true;
  for (auto& p : params)
    if (ends_with(p.name, "lm_head.weight")) tied = false;
  int64_t bytes = 0;
  for (auto& p : params) {
    if (!p.weight.defined()) continue;
    const int64_t nb = int64_t(p.weight.nbytes());
    if (!tied && is_embedding(p.name) && p.weight.dim() == 2)
      bytes += std::min<int64_t>(batch, p.weight.size(0)) * (nb / p.weight.size(0));
    else
      bytes += nb;
  }
  return bytes;
}

DecodeBenchResult bench_decode(CausalLM& model, const DecodeBenchConfig& cfg) {
  ANVIL_CHECK(cfg.batch >= 1, "bench_decode", "batch >= 1", cfg.batch);
  ANVIL_CHECK(cfg.prompt_len >= 1, "bench_decode", "prompt_len >= 1", cfg.prompt_len);
  ANVIL_CHECK(cfg.tokens >= 1, "bench_decode", "tokens >= 1", cfg.tokens);
  const ModelInfo& info = model.info();
  const int64_t need = int64_t(cfg.prompt_len) + cfg.tokens;
  DecodeBenchResult r;
  r.context = cfg.context > 0 ? cfg.context : need;
  ANVIL_CHECK(r.context >= need, "bench_decode",
              str("a context of at least prompt_len + tokens = ", need), r.context);
  ANVIL_CHECK(info.max_len <= 0 || r.context <= info.max_len, "bench_decode",
              str("a context within the model's ", info.max_len, " tokens"), r.context);
  r.weight_bytes = decode_weight_bytes(model, cfg.batch);

  const Device dev = model.device();
  Backend& be = backend(dev);
  auto state = model.new_state(cfg.batch, int(r.context));
  Tensor logits = Tensor::empty({cfg.batch, info.vocab}, DType::f32, dev);
  Tensor prompt = random_ids(cfg.batch, cfg.prompt_len, info.vocab, cfg.seed, 0, dev);
  be.synchronize();
  auto t0 = Clock::now();
  model.step(*state, prompt, logits);
  be.synchronize();
  r.prefill_ms = ms_since(t0);

  // By default every step's ids are on the device before timing: a serving loop that samples on the device
  // feeds the step the id it just picked, and sends nothing from the host between steps. --host-ids makes and
  // uploads them inside the timed region instead (B * 4 bytes and a synchronisation per step). The ids are the
  // same either way: step s takes ids [offset + s * B, offset + (s + 1) * B) of the seeded stream.
  const uint64_t offset = uint64_t(cfg.batch) * uint64_t(cfg.prompt_len);
  Tensor all_ids;
  if (!cfg.host_ids) all_ids = random_ids(cfg.tokens, cfg.batch, info.vocab, cfg.seed, offset, dev);
  be.synchronize();
  StepEvents ev(dev);
  std::vector<double> dev_ms;
  for (int s = 0; s < cfg.tokens; s++) {
    auto ts = Clock::now();
    const uint64_t at = offset + uint64_t(s) * uint64_t(cfg.batch);
    Tensor ids = cfg.host_ids ? random_ids(cfg.batch, 1, info.vocab, cfg.seed, at, dev)
                              : all_ids.select(0, s).view({cfg.batch, 1});
    ev.begin();
    model.step(*state, ids, logits);
    ev.end();
    be.synchronize();
    r.step_ms.push_back(ms_since(ts));
    dev_ms.push_back(ev.ms());
  }
  r.device_ms = quantile(dev_ms, 0.5);
  r.median_ms = quantile(r.step_ms, 0.5);
  r.p10_ms = quantile(r.step_ms, 0.1);
  r.p90_ms = quantile(r.step_ms, 0.9);
  r.tokens_per_s = r.median_ms > 0 ? 1e3 * cfg.batch / r.median_ms : 0;
  r.decode_path = state->decode_path;

  // The same number of steps as a generation loop runs them: nothing waits for the host between steps. A fresh
  // state (the same context), so the steps see the same cache lengths as above.
  if (cfg.tokens >= DecodeBenchResult::kLoopWarmup + 2) {
    state.reset();
    auto loop_state = model.new_state(cfg.batch, int(r.context));
    GreedyPipe pipe(dev, cfg.batch);
    model.step(*loop_state, prompt, logits);
    pipe.pick(logits);
    Clock::time_point t_loop;
    for (int s = 0; s < cfg.tokens; s++) {
      if (s == DecodeBenchResult::kLoopWarmup) {
        while (pipe.pending() > 0) pipe.take();
        t_loop = Clock::now();
      }
      model.step(*loop_state, pipe.ids(), logits);
      if (pipe.pending() == GreedyPipe::kSlots) pipe.take();
      pipe.pick(logits);
    }
    while (pipe.pending() > 0) pipe.take();
    r.loop_tokens = cfg.tokens - DecodeBenchResult::kLoopWarmup;
    r.loop_ms = ms_since(t_loop) / r.loop_tokens;
  }

  if (cfg.batch == 1 && cfg.tokens >= 2) {
    const Tensor host_prompt = prompt.to(Device::cpu());
    const std::vector<int32_t> ids(host_prompt.data<int32_t>(), host_prompt.data<int32_t>() + cfg.prompt_len);
    const Detokenizer none{[](int32_t) { return std::string(); }, [] { return std::string(); }};
    for (bool on_host : {false, true}) {
      GenerationConfig g;
      g.max_new_tokens = cfg.tokens;
      g.stop_at_eos = false;
      g.sampling = cfg.sampling;
      g.seed = cfg.seed;
      g.context = r.context;
      g.sample_on_host = on_host;
      const auto t0 = Clock::now();
      const GenerationResult res = generate(model, none, ids, g);
      const double ms = (ms_since(t0) - res.stats.prefill_ms) / double(res.stats.new_tokens - 1);
      (on_host ? r.gen_host_ms : r.gen_ms) = ms;
    }
  }
  return r;
}

double measure_copy_bandwidth(Device device, size_t bytes, int reps) {
  ANVIL_CHECK(bytes > 0 && reps >= 1, "measure_copy_bandwidth", "bytes > 0 and reps >= 1",
              str(bytes, " bytes, ", reps, " reps"));
  Backend& be = backend(device);
  struct Buf {  // frees on every path, errors included
    Backend& be;
    void* p;
    ~Buf() { be.free(p); }
  };
  Buf src{be, be.alloc(bytes)}, dst{be, be.alloc(bytes)};
  be.memset(src.p, 1, bytes);  // touches the pages (CPU) so the first copy does not time page faults
  be.memset(dst.p, 0, bytes);
  be.copy_device(dst.p, src.p, bytes);
  be.synchronize();
  std::vector<double> ms;
  for (int i = 0; i < reps; i++) {
    auto t0 = Clock::now();
    be.copy_device(dst.p, src.p, bytes);
    be.synchronize();
    ms.push_back(ms_since(t0));
  }
  const double med = quantile(ms, 0.5);
  return med > 0 ? 2.0 * double(bytes) / (med * 1e-3) : 0;
}

}  // namespace anvil
