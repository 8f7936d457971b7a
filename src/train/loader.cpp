#include "train/loader.h"

#include <numeric>

#include "core/rng.h"

namespace anvil {

BatchLoader::BatchLoader(std::shared_ptr<const TokenStream> stream, int64_t batch, int64_t seq_len, uint64_t seed,
                         bool shuffle)
    : stream_(std::move(stream)), B_(batch), T_(seq_len), seed_(seed), shuffle_(shuffle) {
  ANVIL_CHECK(B_ > 0 && T_ > 0, "BatchLoader", "batch > 0 and seq_len > 0", str("batch ", B_, ", seq_len ", T_));
  n_windows_ = stream_->size() > T_ ? (stream_->size() - 1) / T_ : 0;
  ANVIL_CHECK(n_windows_ >= B_, "BatchLoader",
              str("at least batch = ", B_, " windows of seq_len + 1 = ", T_ + 1, " tokens"),
              str(n_windows_, " windows (", stream_->size(), " tokens in '", stream_->dir(),
                  "'): prepare more text or lower data.batch / data.seq_len"));
  build_order();
}

void BatchLoader::build_order() {
  order_.resize(size_t(n_windows_));
  std::iota(order_.begin(), order_.end(), int64_t(0));
  if (!shuffle_) return;
  // Fisher-Yates; the key mixes seed and epoch so every epoch has its own order. 64 random bits per draw make
  // the modulo bias < 2^-30 for any realistic window count.
  uint64_t key = seed_ ^ (uint64_t(state_.epoch) * 0x9E3779B97F4A7C15ull);
  for (int64_t i = n_windows_ - 1; i > 0; i--) {
    Philox4 r = philox(key, uint64_t(i));
    uint64_t u = (uint64_t(r.v[0]) << 32) | r.v[1];
    int64_t j = int64_t(u % uint64_t(i + 1));
    std::swap(order_[size_t(i)], order_[size_t(j)]);
  }
}

void BatchLoader::set_state(const LoaderState& s) {
  ANVIL_CHECK(s.epoch >= 0 && s.position >= 0 && s.position + B_ <= n_windows_, "BatchLoader::set_state",
              str("epoch >= 0 and position in [0, ", n_windows_ - B_, "]"),
              str("epoch ", s.epoch, ", position ", s.position, " (was the checkpoint made on other data?)"));
  bool new_epoch = s.epoch != state_.epoch;
  state_ = s;
  if (new_epoch) build_order();
}

Batch BatchLoader::next() {
  Batch b = make_batch(order_.data() + state_.position, B_);
  state_.position += B_;
  if (state_.position + B_ > n_windows_) {
    state_.epoch++;
    state_.position = 0;
    build_order();
  }
  return b;
}

Batch BatchLoader::windows_at(int64_t first, int64_t count) const {
  ANVIL_CHECK(first >= 0 && count > 0 && first + count <= n_windows_, "BatchLoader::windows_at",
              str("windows within [0, ", n_windows_, ")"), str("[", first, ", ", first + count, ")"));
  std::vector<int64_t> ids(static_cast<size_t>(count));
  std::iota(ids.begin(), ids.end(), first);
  return make_batch(ids.data(), count);
}

Batch BatchLoader::make_batch(const int64_t* window_ids, int64_t count) const {
  Batch b{Tensor::empty({count, T_}, DType::i32), Tensor::empty({count, T_}, DType::i32)};
  int32_t* ids = b.ids.data<int32_t>();
  int32_t* tg = b.targets.data<int32_t>();
  std::vector<int32_t> w(size_t(T_ + 1));
  for (int64_t r = 0; r < count; r++) {
    stream_->read(window_ids[r] * T_, T_ + 1, w.data());
    std::copy(w.begin(), w.end() - 1, ids + r * T_);
    std::copy(w.begin() + 1, w.end(), tg + r * T_);
  }
  return b;
}

}  // namespace anvil
