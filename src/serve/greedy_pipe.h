// Greedy decoding without a host round trip per token. pick() enqueues, on the logits' device, the argmax of
// each row into ids() (where the next decode step reads its input) and a 4-byte-per-row copy of it into a
// page-locked host slot; take() waits for the oldest pick and returns it. So a loop can enqueue step k + 1
// before it looks at token k, and the device never waits for the host's detokenising, stop checks or output.
// The host sampler's path instead copies the whole logits row (513 KB for a 128k vocabulary) and scans it on
// the host, ~0.25 ms a token for greedy (sampler.h), with the device idle meanwhile.
#pragma once
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace anvil {

class GreedyPipe {
 public:
  static constexpr int kSlots = 2;  // picks in flight: the one being taken and the one behind it
  GreedyPipe(Device device, int64_t rows);
  ~GreedyPipe();
  GreedyPipe(const GreedyPipe&) = delete;
  GreedyPipe& operator=(const GreedyPipe&) = delete;

  // (rows, 1) i32 on the device: the latest pick, in the shape a decode step takes.
  const Tensor& ids() const { return ids_; }
  // logits (rows, V) f32 on the device. At most kSlots picks may wait untaken.
  void pick(const Tensor& logits);
  // The oldest pick not yet taken (waits for it). Throws, in the host sampler's words, when its logits row
  // held a NaN or +inf or only -inf.
  std::vector<int32_t> take();
  int64_t pending() const { return picks_ - taken_; }

 private:
  Device device_;
  int64_t rows_;
  Tensor buf_;   // (2, rows) i32: the picks, then their bad codes (argmax.h); one copy brings both back
  Tensor ids_, bad_;
  int32_t* host_ = nullptr;  // kSlots x (2 * rows) i32: page-locked on a GPU, cpu_host_ on the CPU
  std::vector<int32_t> cpu_host_;
  std::vector<void*> done_;  // per slot: the event after its copy (GPU)
  std::vector<int64_t> vocab_;  // per slot: V of its logits, to word a bad code
  int64_t picks_ = 0, taken_ = 0;
};

}  // namespace anvil
