// Test doubles for the serving layer: a CPU CausalLM whose next token is a function of the sequence so far,
// and a detokenizer over a fixed id -> bytes table that holds back incomplete UTF-8 like the real one.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "serve/generate.h"

namespace anvil::testing {

struct FakeState final : InferState {
  std::vector<std::vector<int32_t>> seqs;  // per sequence: every id fed so far
};

// logits[v] = base[v] + (v == next(seq) ? boost : 0); base defaults to zeros.
class FakeLM final : public CausalLM {
 public:
  using NextFn = std::function<int32_t(const std::vector<int32_t>& seq)>;
  FakeLM(int64_t vocab, int64_t max_len, int32_t eos, NextFn next, float boost = 20.f) : next_(std::move(next)),
                                                                                       boost_(boost) {
    info_.arch = "fake";
    info_.vocab = vocab;
    info_.max_len = max_len;
    info_.eos_id = eos;
    base_.assign(size_t(vocab), 0.f);
  }
  std::vector<float> base_;         // per-token offsets added to every row
  std::vector<int> step_T;          // T of every step call, in order
  std::vector<int32_t> fed;         // every id of every step call, in order (row-major per call)
  std::vector<Param> params_;       // for the weight-bytes count

  const ModelInfo& info() const override { return info_; }
  Device device() const override { return Device::cpu(); }
  DType compute_dtype() const override { return DType::f32; }
  float forward_backward(const Tensor&, const Tensor&, float, const TrainOptions&) override { return 0; }
  float forward_loss(const Tensor&, const Tensor&) override { return 0; }
  std::vector<Param>& params() override { return params_; }
  Tensor logits(const Tensor&) override { return {}; }
  void save(const std::string&) const override {}

  std::unique_ptr<InferState> new_state(int batch, int max_len) override {
    ANVIL_CHECK(max_len >= 1 && (info_.max_len <= 0 || max_len <= info_.max_len), "fake::new_state",
                "a capacity within the context", max_len);
    auto st = std::make_unique<FakeState>();
    st->batch = batch;
    st->max_len = max_len;
    st->lens.assign(size_t(batch), 0);
    st->seqs.resize(size_t(batch));
    return st;
  }
  // The same checks as the real models: prefill into an empty cache, then one token per step, within capacity.
  void step(InferState& base, const Tensor& ids, Tensor& logits) override {
    auto& st = static_cast<FakeState&>(base);
    check_dtype("fake::step", "ids", ids, DType::i32);
    const int64_t B = ids.size(0), T = ids.size(1), V = info_.vocab;
    check_shape("fake::step", "logits", logits, {B, V});
    ANVIL_CHECK(T == 1 || st.lens[0] == 0, "fake::step", "prefill into an empty cache", st.lens[0]);
    ANVIL_CHECK(st.lens[0] + T <= st.max_len, "fake::step", str("<= ", st.max_len, " tokens"), st.lens[0] + T);
    step_T.push_back(int(T));
    const int32_t* p = ids.data<int32_t>();
    float* out = logits.data<float>();
    for (int64_t b = 0; b < B; b++) {
      for (int64_t t = 0; t < T; t++) st.seqs[size_t(b)].push_back(p[b * T + t]), fed.push_back(p[b * T + t]);
      st.lens[size_t(b)] += int(T);
      const int32_t nx = next_(st.seqs[size_t(b)]);
      for (int64_t v = 0; v < V; v++) out[b * V + v] = base_[size_t(v)] + (v == nx ? boost_ : 0.f);
    }
  }

 private:
  ModelInfo info_;
  NextFn next_;
  float boost_;
};

// Detokenizer over a table of byte strings; releases only whole UTF-8 characters, flush() releases the rest.
struct FakeDetok {
  std::vector<std::string> table;
  std::string pending;
  Detokenizer fns() {
    return {[this](int32_t id) {
              pending += table.at(size_t(id));
              size_t cut = complete_prefix(pending);
              std::string out = pending.substr(0, cut);
              pending.erase(0, cut);
              return out;
            },
            [this] {
              std::string out;
              out.swap(pending);
              return out;
            }};
  }
  // Length of the longest prefix of s that ends on a character boundary.
  static size_t complete_prefix(const std::string& s) {
    size_t i = 0, ok = 0;
    while (i < s.size()) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
      if (i + n > s.size()) break;
      i += n;
      ok = i;
    }
    return ok;
  }
};

}  // namespace anvil::testing
