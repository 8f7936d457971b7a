#include "serve/greedy_pipe.h"

#include <cstring>

#include "core/error.h"
#include "kernels/argmax/argmax.h"
#ifdef ANVIL_HAS_GPU
#include "backends/gpu/runtime.h"
#endif

namespace anvil {

GreedyPipe::GreedyPipe(Device device, int64_t rows) : device_(device), rows_(rows) {
  ANVIL_CHECK(rows >= 1, "GreedyPipe", "rows >= 1", rows);
  buf_ = Tensor::zeros({2, rows}, DType::i32, device);
  ids_ = buf_.select(0, 0).view({rows, 1});
  bad_ = buf_.select(0, 1);
  const size_t bytes = size_t(kSlots) * 2 * size_t(rows) * sizeof(int32_t);
  vocab_.assign(kSlots, 0);
  if (device.is_cpu()) {
    cpu_host_.resize(bytes / sizeof(int32_t));
    host_ = cpu_host_.data();
    return;
  }
#ifdef ANVIL_HAS_GPU
  host_ = static_cast<int32_t*>(gpu::host_alloc_pinned(bytes));
  try {
    for (int s = 0; s < kSlots; s++) done_.push_back(gpu::event_create());
  } catch (...) {  // the destructor does not run for a constructor that throws
    for (void* e : done_) gpu::event_destroy(e);
    gpu::host_free_pinned(host_);
    throw;
  }
#else
  (void)bytes;
#endif
}

GreedyPipe::~GreedyPipe() {
  if (device_.is_cpu()) return;
#ifdef ANVIL_HAS_GPU
  try {  // a copy may still be writing the slots
    gpu::synchronize();
  } catch (...) {
  }
  for (void* e : done_) gpu::event_destroy(e);
  gpu::host_free_pinned(host_);
#endif
}

void GreedyPipe::pick(const Tensor& logits) {
  ANVIL_CHECK(pending() < kSlots, "GreedyPipe::pick", str("at most ", kSlots, " picks not yet taken"),
              pending());
  ANVIL_CHECK(logits.dim() == 2 && logits.size(0) == rows_, "GreedyPipe::pick", str("logits (", rows_, ", V)"),
              logits.describe());
  argmax_rows(logits, ids_, bad_);
  const int slot = int(picks_ % kSlots);
  int32_t* dst = host_ + size_t(slot) * 2 * size_t(rows_);
  const size_t bytes = 2 * size_t(rows_) * sizeof(int32_t);
  vocab_[size_t(slot)] = logits.size(1);
  if (device_.is_cpu()) {
    std::memcpy(dst, buf_.data_ptr(), bytes);
  } else {
#ifdef ANVIL_HAS_GPU
    gpu::copy_d2h_async(dst, buf_.data_ptr(), bytes);
    gpu::event_record(done_[size_t(slot)], gpu::current_stream());
#endif
  }
  picks_++;
}

std::vector<int32_t> GreedyPipe::take() {
  ANVIL_CHECK(pending() > 0, "GreedyPipe::take", "a pick not yet taken", "none");
  const int slot = int(taken_ % kSlots);
#ifdef ANVIL_HAS_GPU
  if (!device_.is_cpu()) gpu::event_synchronize(done_[size_t(slot)]);
#endif
  taken_++;
  const int32_t* src = host_ + size_t(slot) * 2 * size_t(rows_);
  for (int64_t r = 0; r < rows_; r++) throw_if_bad_logits(src[rows_ + r], vocab_[size_t(slot)]);
  return std::vector<int32_t>(src, src + rows_);
}

}  // namespace anvil
