// Parity of a CausalLM against a fixture made by tools/make_{llama,mamba}_fixture.py (transformers, CPU f32):
// logits of three prompts and a batch, the batch loss, every parameter gradient, 64 greedy tokens through
// step() (prefill + decode), and a save -> load round trip. See tools/fixture_common.py for the names.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "io/safetensors.h"
#include "models/model.h"

namespace anvil::parity {

inline std::string fixture(const std::string& name) {
  return std::string(ANVIL_SOURCE_DIR) + "/tests/fixtures/" + name;
}

// i64 fixture ids -> i32 tensor on the CPU.
inline Tensor ids_i32(const Tensor& t) {
  auto v = t.to_floats();  // ids < 2^24: exact
  return Tensor::from_floats(v, t.shape(), DType::i32, Device::cpu());
}

struct Err {
  double max_abs = 0, ref_max = 0, rel_norm = 0;
};
inline Err compare(const Tensor& got, const Tensor& ref) {
  auto g = got.to_floats(), r = ref.to_floats();
  EXPECT_EQ(g.size(), r.size());
  Err e;
  double dn = 0, rn = 0;
  for (size_t i = 0; i < std::min(g.size(), r.size()); i++) {
    const double d = double(g[i]) - double(r[i]);
    e.max_abs = std::max(e.max_abs, std::fabs(d));
    e.ref_max = std::max(e.ref_max, std::fabs(double(r[i])));
    dn += d * d;
    rn += double(r[i]) * double(r[i]);
  }
  e.rel_norm = rn > 0 ? std::sqrt(dn / rn) : std::sqrt(dn);
  return e;
}

inline int argmax(const std::vector<float>& v, size_t off, size_t n) {
  size_t best = off;
  for (size_t i = off; i < off + n; i++)
    if (v[i] > v[best]) best = i;
  return int(best - off);
}

using Loader = std::function<std::unique_ptr<CausalLM>(const std::string& dir, bool trainable)>;

// How close logits must be. Default: max|err| <= 1e-4 max|logit| (the Llama issue's f32 bound). With rtol > 0,
// element-wise |err| <= atol + rtol |ref| instead (mamba_ssm's own f32 test bounds: rtol 6e-4, atol 2e-3).
// When the fixture also holds `<p>.logits_exact` (the same model run in f64, tools/fixture_common.py), both f32
// runs are measured against it: anvil's error may be at most `noise` times transformers' own f32 error (rel-L2
// and max). Deep models need this: on the 130m Mamba shape (24 layers) transformers' f32 logits themselves break
// the element-wise bound against f64 on 17 of 2.4M batch elements (max|err| 3.0e-3), so no f32 run can meet
// that bound against them; what anvil must show is f32 error of the same size.
struct LogitTol {
  double max_rel = 1e-4;
  double rtol = 0, atol = 0;
  double noise = 0;  // > 0: the f64 comparison above, when the fixture has it
};

inline size_t count_outside(const std::vector<float>& g, const std::vector<float>& r, const LogitTol& tol) {
  size_t bad = 0;
  for (size_t i = 0; i < g.size() && i < r.size(); i++)
    bad += std::fabs(double(g[i]) - r[i]) > tol.atol + tol.rtol * std::fabs(double(r[i]));
  return bad;
}

// anvil and transformers (both f32) against the f64 run.
inline void check_against_exact(const Tensor& logits, const Tensor& want, const Tensor& exact, const char* tag,
                                const std::string& p, const LogitTol& tol) {
  const Err ea = compare(logits, exact), et = compare(want, exact);
  const size_t ba = count_outside(logits.to_floats(), exact.to_floats(), tol);
  const size_t bt = count_outside(want.to_floats(), exact.to_floats(), tol);
  std::printf("[parity %s %s] vs f64: anvil rel-L2 %.3g max %.3g (%zu outside rtol/atol); transformers f32 rel-L2 "
              "%.3g max %.3g (%zu outside)\n",
              tag, p.c_str(), ea.rel_norm, ea.max_abs, ba, et.rel_norm, et.max_abs, bt);
  EXPECT_LE(ea.rel_norm, tol.noise * et.rel_norm) << tag << " " << p << ": anvil's f32 error is over " << tol.noise
                                                  << "x transformers' f32 error (rel-L2 against the f64 run)";
  EXPECT_LE(ea.max_abs, tol.noise * et.max_abs) << tag << " " << p << ": anvil's max|err| is over " << tol.noise
                                                << "x transformers' (against the f64 run)";
}

inline void check_logits(CausalLM& m, const SafetensorsIndex& ref, const char* tag, double* worst,
                         const LogitTol& tol = {}) {
  for (std::string p : {"prompt.0", "prompt.1", "prompt.2", "batch"}) {
    Tensor logits = m.logits(ids_i32(ref.get(p + ".input_ids")));
    Tensor want = ref.get(p + ".logits");
    Err e = compare(logits, want);
    const double rel = e.max_abs / e.ref_max;
    *worst = std::max(*worst, rel);
    if (tol.noise > 0 && ref.contains(p + ".logits_exact")) {
      check_against_exact(logits, want, ref.get(p + ".logits_exact"), tag, p, tol);
    } else if (tol.rtol > 0) {
      const size_t bad = count_outside(logits.to_floats(), want.to_floats(), tol);
      EXPECT_EQ(bad, 0u) << tag << " " << p << " logits: " << bad << " elements outside atol " << tol.atol
                         << " + rtol " << tol.rtol << " |ref| (max|err| " << e.max_abs << ")";
    } else {
      EXPECT_LE(rel, tol.max_rel) << tag << " " << p << " logits: max|err| " << e.max_abs << " of max|logit| "
                                  << e.ref_max;
    }
  }
}

// fixture_name: a folder of tests/fixtures, or an absolute path (a big fixture made on the fly). all_grads: the
// fixture holds every parameter's gradient (the committed ones); big fixtures hold a sample (fixture_common.py).
inline void run_parity(const std::string& fixture_name, const Loader& load, bool all_grads = true,
                       const LogitTol& tol = {}) {
  const std::string dir = fixture_name.rfind('/', 0) == 0 ? fixture_name : fixture(fixture_name);
  SafetensorsIndex ref(dir + "/reference.safetensors");
  auto model = load(dir, /*trainable=*/true);
  const int64_t V = model->info().vocab;

  // Logits.
  double worst_logit = 0;
  check_logits(*model, ref, "loaded", &worst_logit, tol);

  // Loss and gradients. transformers shifts inside: position t predicts labels[t + 1]; -100 is ignored.
  Tensor ids = ids_i32(ref.get("batch.input_ids"));
  auto lab = ref.get("batch.labels").to_floats();
  const int64_t B = ids.size(0), T = ids.size(1);
  std::vector<float> tv(size_t(B * T), -1.f);
  for (int64_t b = 0; b < B; b++)
    for (int64_t t = 0; t + 1 < T; t++) {
      const float l = lab[size_t(b * T + t + 1)];
      tv[size_t(b * T + t)] = l < 0 ? -1.f : l;
    }
  Tensor targets = Tensor::from_floats(tv, {B, T}, DType::i32, Device::cpu());
  model->zero_grad();
  const float loss = model->forward_backward(ids, targets, 1.f, TrainOptions{});
  const float ref_loss = ref.get("batch.loss").item();
  EXPECT_NEAR(loss, ref_loss, 1e-5 * std::fabs(ref_loss)) << "loss";
  const float loss2 = model->forward_loss(ids, targets);
  EXPECT_EQ(loss, loss2) << "forward_loss and forward_backward disagree";
  double worst_grad = 0;
  std::string worst_name;
  int n_grads = 0;
  for (auto& p : model->params()) {
    const std::string key = "grad." + p.name;
    if (!all_grads && !ref.contains(key)) continue;
    ASSERT_TRUE(ref.contains(key)) << key;
    Err e = compare(p.grad, ref.get(key));
    if (e.rel_norm > worst_grad) worst_grad = e.rel_norm, worst_name = p.name;
    EXPECT_LE(e.rel_norm, 1e-3) << p.name << ": |g - ref| / |ref| = " << e.rel_norm;
    n_grads++;
  }
  EXPECT_GT(n_grads, 0) << "no gradient in the fixture";

  // Greedy generation through step(): one prefill, then one token per call.
  int greedy_ok = 0;
  for (int i = 0; i < 3; i++) {
    const std::string p = str("prompt.", i);
    Tensor prompt = ids_i32(ref.get(p + ".input_ids"));
    auto want = ref.get(p + ".greedy").to_floats();
    auto margin = ref.get(p + ".greedy_margin").to_floats();
    auto st = model->new_state(1, int(prompt.size(1) + int64_t(want.size()) + 1));
    Tensor logits = Tensor::empty({1, V}, DType::f32, Device::cpu());
    model->step(*st, prompt, logits);
    int matched = 0;
    for (size_t s = 0; s < want.size(); s++) {
      const int tok = argmax(logits.to_floats(), 0, size_t(V));
      if (tok != int(want[s])) {
        ADD_FAILURE() << p << " greedy step " << s << ": got " << tok << ", transformers " << want[s]
                      << " (reference margin " << margin[s] << ")";
        break;
      }
      matched++;
      Tensor next = Tensor::from_floats({float(tok)}, {1, 1}, DType::i32, Device::cpu());
      model->step(*st, next, logits);
    }
    if (matched == int(want.size())) greedy_ok++;
  }

  // Save -> load round trip: identical logits.
  const std::string leaf = std::filesystem::path(dir).filename().string();
  const std::string tmp = (std::filesystem::temp_directory_path() / str("anvil_parity_", leaf, "_", ::getpid())).string();
  model->save(tmp);
  auto again = load(tmp, /*trainable=*/false);
  double worst_rt = 0;
  for (std::string p : {"prompt.1", "batch"}) {
    Tensor a = model->logits(ids_i32(ref.get(p + ".input_ids")));
    Tensor b = again->logits(ids_i32(ref.get(p + ".input_ids")));
    Err e = compare(b, a);
    worst_rt = std::max(worst_rt, e.max_abs);
    EXPECT_EQ(e.max_abs, 0.0) << "round trip " << p;
  }
  std::filesystem::remove_all(tmp);
  std::printf("[parity %s] logits max|err|/max|logit| %.3g; loss %.8g vs %.8g (rel %.3g); %d grads, worst "
              "|g-ref|/|ref| %.3g (%s); greedy %d/3 prompts x 64 tokens; round-trip max|diff| %g\n",
              fixture_name.c_str(), worst_logit, loss, ref_loss, std::fabs(loss - ref_loss) / std::fabs(ref_loss),
              n_grads, worst_grad, worst_name.c_str(), greedy_ok, worst_rt);
}

}  // namespace anvil::parity
