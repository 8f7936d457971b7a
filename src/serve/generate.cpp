#include "serve/generate.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "kernels/argmax/argmax.h"
#include "kernels/topk/topk.h"
#include "serve/greedy_pipe.h"

namespace anvil {

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ids (1, T) i32 on `device`.
Tensor ids_tensor(const int32_t* ids, int64_t T, Device device) {
  Tensor t = Tensor::empty({1, T}, DType::i32, Device::cpu());
  std::memcpy(t.data_ptr(), ids, size_t(T) * sizeof(int32_t));
  return t.to(device);
}

// The logits row on the host. A device-to-host copy waits for the step, so the step timings that end
// here include the device work.
std::span<const float> host_row(const Tensor& logits, std::vector<float>& buf) {
  const size_t V = size_t(logits.numel());
  if (logits.device().is_cpu()) return {logits.data<float>(), V};
  buf.resize(V);
  backend(logits.device()).copy_to_host(buf.data(), logits.data_ptr(), V * sizeof(float));
  return buf;
}

}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::eos: return "eos";
    case StopReason::stop_id: return "stop token";
    case StopReason::stop_string: return "stop string";
    case StopReason::max_tokens: return "max tokens";
    case StopReason::context: return "context full";
  }
  return "?";
}

StopStringFilter::StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopStringFilter::push(std::string_view text) {
  if (matched_) return {};
  pending_ += text;
  // The earliest match of any stop string ends the text.
  size_t cut = std::string::npos;
  for (auto& s : stops_) cut = std::min(cut, pending_.find(s));
  if (cut != std::string::npos) {
    matched_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string: a later match can only start
  // there (anything earlier would have made a longer such suffix).
  size_t hold = 0;
  for (auto& s : stops_)
    for (size_t n = std::min(s.size() - 1, pending_.size()); n > hold; n--)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringFilter::finish() {
  std::string out;
  out.swap(pending_);
  return matched_ ? std::string() : out;
}

GenerationResult generate(CausalLM& model, const Detokenizer& detok, const std::vector<int32_t>& prompt,
                          const GenerationConfig& cfg, const TextCallback& on_text) {
  cfg.sampling.validate();
  ANVIL_CHECK(cfg.max_new_tokens >= 1, "generate", "max_new_tokens >= 1", cfg.max_new_tokens);
  ANVIL_CHECK(detok.push && detok.flush, "generate", "a detokenizer with push and flush", "empty functions");
  const ModelInfo& info = model.info();
  const int64_t V = info.vocab, P = int64_t(prompt.size());
  ANVIL_CHECK(P >= 1, "generate", "a prompt of at least one token", "an empty prompt");
  for (int32_t id : prompt) ANVIL_CHECK(id >= 0 && id < V, "generate", str("prompt ids in [0, ", V, ")"), id);

  // The context: the model's (0 = no limit, e.g. Mamba's constant-size state), optionally narrowed.
  int64_t ctx = info.max_len > 0 ? info.max_len : std::numeric_limits<int>::max();
  if (cfg.context > 0) {
    ANVIL_CHECK(cfg.context <= ctx, "generate", str("a context of at most ", ctx, " tokens (the model's)"),
                cfg.context);
    ctx = cfg.context;
  }
  if (P > ctx)
    ANVIL_THROW("generate", "the prompt to fit the model's context",
                str("prompt of ", P, " tokens exceeds the context of ", ctx));
  // k sampled tokens need P + k - 1 cache slots (the last one is never fed back).
  const int64_t budget = std::min<int64_t>(cfg.max_new_tokens, ctx - P + 1);
  auto state = model.new_state(1, int(P + budget - 1));

  GenerationResult res;
  res.stats.prompt_tokens = P;
  auto emit = [&](const std::string& text, bool generated) {
    if (text.empty()) return;
    if (generated) res.text += text;
    if (on_text) on_text(text);
  };
  if (cfg.echo) {
    std::string text;
    for (int32_t id : prompt) text += detok.push(id);
    emit(text, false);
  }

  std::vector<int32_t> history;
  if (cfg.repetition_includes_prompt) history = prompt;
  StopStringFilter filter(cfg.stop_strings);
  Tensor logits = Tensor::empty({1, V}, DType::f32, model.device());

  // Takes token id as generated; true when generation ends with it.
  auto accept = [&](int32_t id) {
    auto ts = Clock::now();
    res.ids.push_back(id);
    history.push_back(id);
    const int64_t n = int64_t(res.ids.size());
    bool done = true;
    if (cfg.stop_at_eos && id == info.eos_id) {
      res.stop = StopReason::eos;
    } else if (std::find(cfg.stop_ids.begin(), cfg.stop_ids.end(), id) != cfg.stop_ids.end()) {
      res.stop = StopReason::stop_id;
    } else {
      emit(filter.push(detok.push(id)), true);
      if (filter.matched()) {
        res.stop = StopReason::stop_string;
      } else if (n >= budget) {
        res.stop = n >= cfg.max_new_tokens ? StopReason::max_tokens : StopReason::context;
      } else {
        done = false;
      }
    }
    res.stats.sample_ms += ms_since(ts);
    return done;
  };

  auto t0 = Clock::now();
  if (cfg.sampling.is_greedy() && cfg.sampling.repetition_penalty == 1.f && !cfg.sample_on_host) {
    // Greedy picks on the model's device (greedy_pipe.h). On a GPU the loop runs one step ahead: step k + 1 is
    // enqueued before token k is read back, so the host's work on token k overlaps the device's step. When
    // token k ends generation, step k + 1 has run for nothing; the state is dropped with it. On the CPU a step
    // is synchronous, so nothing runs ahead and no step is wasted.
    const bool ahead = !model.device().is_cpu();
    GreedyPipe pipe(model.device(), 1);
    model.step(*state, ids_tensor(prompt.data(), P, model.device()), logits);
    pipe.pick(logits);
    Clock::time_point first;
    for (int64_t k = 0;; k++) {
      const bool more = k + 1 < budget;  // a token k + 1 can follow token k
      if (ahead && more) {
        model.step(*state, pipe.ids(), logits);
        pipe.pick(logits);
      }
      const int32_t id = pipe.take()[0];
      if (k == 0) {
        res.stats.prefill_ms = ms_since(t0);
        first = Clock::now();
      } else {
        res.stats.decode_ms = ms_since(first);  // token 0 to token k, host work overlapped
      }
      if (accept(id)) break;
      if (!ahead) {
        model.step(*state, pipe.ids(), logits);
        pipe.pick(logits);
      }
    }
  } else {
    // top-k sampling on a GPU: topk_rows brings back the k best tokens (8k bytes) and the sampler draws from
    // them what it would from the whole row (sample_top_k), instead of a 4V-byte copy and a pass over V on the
    // host. Rows where top-k does not decide the candidates (fewer finite logits than k) take the whole row.
    Sampler sampler(cfg.sampling, cfg.seed);
    const int k = cfg.sampling.top_k;
    const bool on_device = !model.device().is_cpu() && k > 0 && k <= kTopKMax && !cfg.sampling.is_greedy() &&
                           cfg.sampling.repetition_penalty == 1.f && !cfg.sample_on_host;
    Tensor top;  // (2k + 2) i32: ids, the values' f32 bits, finite, bad
    if (on_device) top = Tensor::empty({2 * int64_t(k) + 2}, DType::i32, model.device());
    std::vector<float> buf;
    auto sample = [&] {
      if (on_device) {
        Tensor ids = top.slice(0, 0, k).view({1, k}), vals = top.slice(0, k, 2 * k).as_dtype(DType::f32).view({1, k});
        Tensor fin = top.slice(0, 2 * k, 2 * k + 1), bad = top.slice(0, 2 * k + 1, 2 * k + 2);
        topk_rows(logits, k, ids, vals, fin, bad);
        const Tensor h = top.to(Device::cpu());
        const int32_t* p = h.data<int32_t>();
        throw_if_bad_logits(p[2 * k + 1], V);
        if (sampler.top_k_suffices(p[2 * k])) {
          std::span<const float> v(h.slice(0, k, 2 * k).as_dtype(DType::f32).data<float>(), size_t(k));
          auto ts = Clock::now();
          const int32_t id = sampler.sample_top_k({p, size_t(k)}, v, p[2 * k]);
          res.stats.sample_ms += ms_since(ts);
          return id;
        }
      }
      std::span<const float> row = host_row(logits, buf);
      auto ts = Clock::now();
      const int32_t id = sampler.sample(row, history);
      res.stats.sample_ms += ms_since(ts);
      return id;
    };
    // The steps' times leave the host sampling out (sample_ms has it), as before the device path.
    model.step(*state, ids_tensor(prompt.data(), P, model.device()), logits);
    int32_t id = sample();
    res.stats.prefill_ms = ms_since(t0) - res.stats.sample_ms;
    while (!accept(id)) {
      auto td = Clock::now();
      const double s0 = res.stats.sample_ms;
      model.step(*state, ids_tensor(&id, 1, model.device()), logits);
      id = sample();
      res.stats.decode_ms += ms_since(td) - (res.stats.sample_ms - s0);
    }
  }
  if (!filter.matched()) {
    emit(filter.push(detok.flush()), true);
    if (filter.matched()) res.stop = StopReason::stop_string;
    emit(filter.finish(), true);
  }
  res.stats.new_tokens = int64_t(res.ids.size());
  return res;
}

}  // namespace anvil
