// Batches for training: the packed token stream of a split is cut into windows of T+1 tokens that start every
// T tokens (window w holds tokens [w*T, w*T + T + 1): inputs are its first T, targets its last T), so every
// token is a target exactly once per epoch. Documents are packed back to back with EOS between them, as
// prepared; no window is padded.
//
// Window order is shuffled per epoch by a Fisher-Yates permutation drawn from Philox(seed, epoch), so the
// order is a pure function of (seed, epoch) and the loader's whole state is (epoch, position): restoring those
// two numbers continues the exact batch sequence. An epoch ends when fewer than B windows are left (the tail
// windows of that epoch's order are skipped, different ones each epoch).
//
// Vocabulary: B batch (windows per batch), T sequence length.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "train/dataset.h"

namespace anvil {

struct LoaderState {
  int64_t epoch = 0;
  int64_t position = 0;  // windows of this epoch's order already handed out
  bool operator==(const LoaderState&) const = default;
};

struct Batch {
  Tensor ids;      // (B, T) i32, CPU
  Tensor targets;  // (B, T) i32, CPU: ids shifted by one token
};

class BatchLoader {
 public:
  // shuffle=false reads windows in stream order (validation). Throws if the stream holds fewer than B windows.
  BatchLoader(std::shared_ptr<const TokenStream> stream, int64_t batch, int64_t seq_len, uint64_t seed, bool shuffle);

  int64_t windows() const { return n_windows_; }
  int64_t batch() const { return B_; }
  int64_t seq_len() const { return T_; }

  Batch next();
  // `count` windows starting at `first` in stream order, whatever the state (validation batches).
  Batch windows_at(int64_t first, int64_t count) const;

  LoaderState state() const { return state_; }
  void set_state(const LoaderState& s);

 private:
  void build_order();
  Batch make_batch(const int64_t* window_ids, int64_t count) const;

  std::shared_ptr<const TokenStream> stream_;
  int64_t B_, T_, n_windows_;
  uint64_t seed_;
  bool shuffle_;
  LoaderState state_;
  std::vector<int64_t> order_;  // this epoch's window order
};

}  // namespace anvil
