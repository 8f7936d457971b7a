#include "serve/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"

namespace anvil {

namespace {

// The order "more likely first": larger logit, then the lower id, so top-k = 1 and a tiny top-p keep exactly
// the token argmax picks.
template <class C>
bool better(const C& a, const C& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// One pass over a row: checks it (NaN would break the orderings, +inf the softmax: both mean the model went
// wrong upstream) and finds the best token and how many tokens are not masked out (-inf).
struct RowScan {
  size_t best = 0;
  float max = -INFINITY;
  size_t finite = 0;
};
RowScan scan_row(std::span<const float> row) {
  ANVIL_CHECK(!row.empty(), "sample", "logits of at least one token", "an empty row");
  RowScan r;
  for (size_t i = 0; i < row.size(); i++) {
    const float l = row[i];
    ANVIL_CHECK(!std::isnan(l) && l != INFINITY, "sample", "finite logits (or -inf for masked tokens)",
                str(l, " at id ", i));
    if (l > r.max) {
      r.max = l;
      r.best = i;
    }
    r.finite += l != -INFINITY;
  }
  ANVIL_CHECK(r.finite > 0, "sample", "at least one token with a finite logit", "every logit -inf");
  return r;
}

}  // namespace

void SamplingParams::validate() const {
  ANVIL_CHECK(std::isfinite(temperature) && temperature >= 0.f, "sampling", "temperature >= 0 (0 = greedy)",
              temperature);
  ANVIL_CHECK(top_k >= 0, "sampling", "top_k >= 0 (0 = off)", top_k);
  ANVIL_CHECK(top_p > 0.f && top_p <= 1.f, "sampling", "top_p in (0, 1]", top_p);
  ANVIL_CHECK(min_p >= 0.f && min_p < 1.f, "sampling", "min_p in [0, 1)", min_p);
  ANVIL_CHECK(repetition_penalty > 0.f && std::isfinite(repetition_penalty), "sampling",
              "repetition_penalty > 0 (1 = off)", repetition_penalty);
}

int32_t argmax_logits(std::span<const float> logits) { return int32_t(scan_row(logits).best); }

Sampler::Sampler(const SamplingParams& params, uint64_t seed) : params_(params), seed_(seed) {
  params_.validate();
}

// Costs for V = 128256 (Llama 3), per token: one checking pass, then either a top-k heap pass with k
// exponentials, or V exponentials; no sort of the vocabulary anywhere.
int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const SamplingParams& p = params_;
  const int64_t V = int64_t(logits.size());
  std::span<const float> row = logits;
  if (p.repetition_penalty != 1.f && !history.empty()) {
    work_.assign(logits.begin(), logits.end());
    std::vector<int32_t> seen(history.begin(), history.end());  // each id is penalised once
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      ANVIL_CHECK(id >= 0 && id < V, "sample", str("history ids in [0, ", V, ")"), id);
      float& l = work_[size_t(id)];
      l = l > 0.f ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
    row = work_;
  }
  const RowScan sc = scan_row(row);
  if (p.is_greedy()) return int32_t(sc.best);

  // Weights relative to the best token: exp((l - max) / T) in (0, 1], so nothing overflows.
  const float lmax = sc.max, inv_t = 1.f / p.temperature;
  auto weight = [&](float l) { return std::exp((l - lmax) * inv_t); };
  cand_.clear();
  double z = 0;  // the mass top-p measures against: of the top-k tokens, or of all
  if (p.top_k > 0 && size_t(p.top_k) < sc.finite) {
    // top-k: a heap of the k best seen so far, worst on top; most tokens cost one comparison.
    const size_t k = size_t(p.top_k);
    for (int64_t i = 0; i < V; i++) {
      const Cand c{row[size_t(i)], int32_t(i), 0.f};
      if (c.logit == -INFINITY) continue;
      if (cand_.size() < k) {
        cand_.push_back(c);
        std::push_heap(cand_.begin(), cand_.end(), better<Cand>);
      } else if (better(c, cand_.front())) {
        std::pop_heap(cand_.begin(), cand_.end(), better<Cand>);
        cand_.back() = c;
        std::push_heap(cand_.begin(), cand_.end(), better<Cand>);
      }
    }
    // More likely first: the draw below walks the candidates in order, so the order must not depend on how
    // they were found (this heap, or topk_rows on a device: sample_top_k).
    std::sort(cand_.begin(), cand_.end(), better<Cand>);
    return finish_top_k(lmax);
  } else {
    wbuf_.resize(size_t(V));
    for (int64_t i = 0; i < V; i++) {
      const float l = row[size_t(i)];
      z += wbuf_[size_t(i)] = l == -INFINITY ? 0.f : weight(l);
    }
    // Only tokens that can be kept become candidates. top-p: the tokens lighter than (1 - top_p) * z / n
    // weigh at most (1 - top_p) * z together, so the heavier ones alone reach top_p * z and hold the whole
    // top-p set (equal logits fall on the same side); half that floor leaves room for rounding. min-p:
    // lighter than min_p means out.
    float floor_w = 0.f;
    if (p.top_p < 1.f) floor_w = float(0.5 * (1.0 - double(p.top_p)) * z / double(sc.finite));
    floor_w = std::max(floor_w, p.min_p);
    if (floor_w == 0.f) return draw(std::span<const float>(wbuf_), z);
    for (int64_t i = 0; i < V; i++)
      if (wbuf_[size_t(i)] > 0.f && wbuf_[size_t(i)] >= floor_w)
        cand_.push_back({row[size_t(i)], int32_t(i), wbuf_[size_t(i)]});
  }

  return finish(z);
}

bool Sampler::top_k_suffices(int64_t finite) const {
  const SamplingParams& p = params_;
  return !p.is_greedy() && p.repetition_penalty == 1.f && p.top_k > 0 && p.top_k < finite;
}

int32_t Sampler::sample_top_k(std::span<const int32_t> ids, std::span<const float> vals, int64_t finite) {
  ANVIL_CHECK(top_k_suffices(finite), "sample_top_k",
              "sampling with 0 < top_k < the finite logits and no repetition penalty",
              str("top_k ", params_.top_k, ", ", finite, " finite logits, penalty ", params_.repetition_penalty));
  const size_t k = size_t(params_.top_k);
  ANVIL_CHECK(ids.size() >= k && vals.size() >= k, "sample_top_k", str("the ", k, " best tokens"),
              str(ids.size(), " ids and ", vals.size(), " values"));
  cand_.clear();
  for (size_t j = 0; j < k; j++) {
    ANVIL_CHECK(ids[j] >= 0 && std::isfinite(vals[j]) && (j == 0 || !better(Cand{vals[j], ids[j], 0.f},
                                                                              Cand{vals[j - 1], ids[j - 1], 0.f})),
                "sample_top_k", "finite candidates, more likely first", str("id ", ids[j], " = ", vals[j], " at ", j));
    cand_.push_back({vals[j], ids[j], 0.f});
  }
  return finish_top_k(vals[0]);
}

// cand_ holds the top-k tokens, more likely first; lmax is the best logit.
int32_t Sampler::finish_top_k(float lmax) {
  const float inv_t = 1.f / params_.temperature;
  double z = 0;
  for (auto& c : cand_) z += c.w = std::exp((c.logit - lmax) * inv_t);
  return finish(z);
}

// cand_: the tokens still in the running with their weights; z: the mass top-p measures against.
int32_t Sampler::finish(double z) {
  const SamplingParams& p = params_;
  // top-p: the shortest more-likely-first prefix with mass >= top_p * z. A quickselect on the prefix mass:
  // each round partitions the undecided range [lo, hi) around its middle and keeps the half that holds the
  // answer, so the cost is linear in the candidates.
  if (p.top_p < 1.f) {
    const double target = double(p.top_p) * z;
    size_t lo = 0, hi = cand_.size(), keep = cand_.size();
    double before = 0;  // mass of [0, lo), all of it better than the rest
    while (lo < hi) {
      const size_t mid = lo + (hi - lo) / 2;
      std::nth_element(cand_.begin() + long(lo), cand_.begin() + long(mid), cand_.begin() + long(hi),
                       better<Cand>);
      double s = before;  // mass of [0, mid)
      for (size_t i = lo; i < mid; i++) s += cand_[i].w;
      if (s >= target && mid > lo) {
        hi = keep = mid;  // [0, mid) is enough
      } else if (s + cand_[mid].w >= target) {
        keep = mid + 1;
        break;
      } else {
        before = s + cand_[mid].w;
        lo = mid + 1;
      }
    }
    cand_.resize(std::max<size_t>(keep, 1));
  }

  // min-p: p(token) >= min_p * p(best), i.e. w >= min_p. The best token (w = 1) always stays.
  if (p.min_p > 0.f) std::erase_if(cand_, [&](const Cand& c) { return c.w < p.min_p; });

  wbuf_.resize(cand_.size());
  z = 0;
  for (size_t i = 0; i < cand_.size(); i++) z += wbuf_[i] = cand_[i].w;
  const int32_t j = draw(std::span<const float>(wbuf_), z);
  return cand_[size_t(j)].id;
}

// One draw: the first index whose cumulative weight passes u * z (any fixed order gives the same
// distribution).
int32_t Sampler::draw(std::span<const float> w, double z) {
  const double target = double(rng_uniform(seed_, counter_++)) * z;
  double cum = 0;
  size_t last = 0;
  for (size_t i = 0; i < w.size(); i++) {
    if (w[i] <= 0.f) continue;
    cum += w[i];
    last = i;
    if (cum > target) return int32_t(i);
  }
  return int32_t(last);  // target == z within rounding
}

std::vector<int32_t> Sampler::sample_batch(std::span<const float> logits, int64_t B,
                                           const std::vector<std::vector<int32_t>>& histories) {
  ANVIL_CHECK(B >= 1 && logits.size() % size_t(B) == 0, "sample_batch", "logits of B rows of V",
              str(logits.size(), " floats for B = ", B));
  ANVIL_CHECK(histories.empty() || int64_t(histories.size()) == B, "sample_batch",
              str("no histories or ", B), histories.size());
  const size_t V = logits.size() / size_t(B);
  std::vector<int32_t> out(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; b++)
    out[size_t(b)] = sample(logits.subspan(size_t(b) * V, V),
                            histories.empty() ? std::span<const int32_t>() : histories[size_t(b)]);
  return out;
}

}  // namespace anvil
