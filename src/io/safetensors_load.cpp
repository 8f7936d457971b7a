// Moving checkpoint tensors to their device, converting dtype per chunk through one bounded staging buffer.
#include <algorithm>
#include <cstring>
#include <vector>

#include "io/safetensors.h"

namespace anvil {

// 16 MiB: large enough that the per-copy overhead (~10 us per synchronous host-to-device copy) is under 1% at
// ~25 GB/s, small enough to be negligible next to any model.
static constexpr size_t kStagingBytes = size_t(16) << 20;

// n elements of `sdt` at src -> `ddt` at dst. The common pairs get a direct loop so the compiler vectorises them;
// the rest go through f32 (exact for every widening; RNE and FP8 saturation for narrowing, as in core/dtype.h).
static void convert_span(const void* src, DType sdt, void* dst, DType ddt, int64_t n) {
  const uint16_t* s16 = static_cast<const uint16_t*>(src);
  const float* s32 = static_cast<const float*>(src);
  if (sdt == DType::bf16 && ddt == DType::f32) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) static_cast<float*>(dst)[i] = bf16_to_f32(s16[i]);
  } else if (sdt == DType::f32 && ddt == DType::bf16) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(s32[i]);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) store_from_f32(dst, ddt, size_t(i), load_as_f32(src, sdt, size_t(i)));
  }
}

void load_into(Tensor& dst, const Tensor& src0) {
  const char* op = "load_into";
  check_defined(op, "src", src0);
  check_contiguous(op, "dst", dst);
  ANVIL_CHECK(src0.device().is_cpu(), op, "src on the host (a checkpoint tensor)", src0.describe());
  ANVIL_CHECK(src0.shape() == dst.shape(), op, str("dst and src of one shape ", shape_str(src0.shape())),
              dst.describe());
  const Tensor src = src0.contiguous();  // a no-op for checkpoint tensors
  if (src.dtype() == dst.dtype()) return dst.copy_(src);
  ANVIL_CHECK(dtype_is_float(src.dtype()) && dtype_is_float(dst.dtype()), op,
              "float dtypes on both sides when converting (integers must match exactly)",
              str(dtype_name(src.dtype()), " -> ", dtype_name(dst.dtype())));
  const int64_t n = src.numel();
  const size_t ss = dtype_size(src.dtype()), ds = dtype_size(dst.dtype());
  if (dst.device().is_cpu()) return convert_span(src.data_ptr(), src.dtype(), dst.data_ptr(), dst.dtype(), n);

  const int64_t chunk = int64_t(kStagingBytes / ds);
  std::vector<char> staging(size_t(std::min(n, chunk)) * ds);
  Backend& b = backend(dst.device());
  for (int64_t i = 0; i < n; i += chunk) {
    const int64_t m = std::min(chunk, n - i);
    convert_span(static_cast<const char*>(src.data_ptr()) + size_t(i) * ss, src.dtype(), staging.data(), dst.dtype(),
                 m);
    // copy_from_host returns once the bytes have left `staging` (the GPU backend synchronises), so the next
    // chunk may overwrite it.
    b.copy_from_host(static_cast<char*>(dst.data_ptr()) + size_t(i) * ds, staging.data(), size_t(m) * ds);
  }
}

Tensor load_tensor(const Tensor& src, Device device, DType dtype) {
  check_defined("load_tensor", "src", src);
  if (device.is_cpu() && dtype == src.dtype()) return src;
  Tensor dst = Tensor::empty(src.shape(), dtype, device);
  load_into(dst, src);
  return dst;
}

}  // namespace anvil
