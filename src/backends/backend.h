// The backend interface: where memory lives and how bytes move. One Backend per device kind.
// GPU specifics (streams, events, the caching allocator) are behind the same plain-C++ interface, so code
// above this layer never includes a vendor header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace anvil {

enum class DeviceKind : uint8_t { cpu, gpu };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_gpu() const { return kind == DeviceKind::gpu; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string name() const { return kind == DeviceKind::cpu ? "cpu" : "gpu" + std::to_string(index); }
  static Device cpu() { return {DeviceKind::cpu, 0}; }
  static Device gpu(int i = 0) { return {DeviceKind::gpu, i}; }
};
Device parse_device(const std::string& s);  // "cpu", "gpu", "gpu:1", "cuda", "cuda:0"; throws on others

// What a device can do; queried, never assumed.
struct DeviceInfo {
  std::string name;          // "NVIDIA H200", "cpu"
  std::string arch;          // "sm_90", "gfx90a", "x86_64"
  int compute_units = 0;     // SMs / CUs / cores
  int warp_size = 1;         // 32 NVIDIA, 64 AMD CDNA, 1 CPU
  size_t total_memory = 0;   // bytes
  size_t l2_bytes = 0;
  size_t smem_per_block_optin = 0;
  bool fp8_compute = false;  // native FP8 matrix arithmetic (sm_89+, gfx94x)
  bool bf16_compute = false;
  bool early_launch = false;  // a kernel may start before the previous one ends and wait inside (sm_90+)
  bool bulk_copy = false;     // bulk global -> shared copies completing on shared-memory barriers (sm_90+)
};

// Opaque stream/event handles (a vendor stream/event on GPU, unused on CPU).
using StreamHandle = void*;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual void* alloc(size_t nbytes) = 0;  // throws anvil::Error on out-of-memory, naming the size
  virtual void free(void* p) = 0;
  virtual void memset(void* p, int value, size_t nbytes) = 0;
  // Copy within this device or between this device and host memory (host_dst/host_src say which side is host).
  virtual void copy_to_host(void* host_dst, const void* src, size_t nbytes) = 0;
  virtual void copy_from_host(void* dst, const void* host_src, size_t nbytes) = 0;
  virtual void copy_device(void* dst, const void* src, size_t nbytes) = 0;
  virtual void synchronize() = 0;
  virtual DeviceInfo info() const = 0;
  // Pitched copy within this device: `height` runs of `width` bytes, run i from src + i * spitch to dst + i *
  // dpitch (cudaMemcpy2D's contract). One call for a slice along the middle dim of a 3-D tensor, e.g. rows
  // [r0, r1) of every (R, T) matrix of a (B, R, T) batch.
  virtual void copy_device_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                              size_t height) = 0;
};

Backend& backend(Device d);   // throws if the device kind is not compiled in or the index does not exist
bool gpu_available();         // compiled with a GPU backend and at least one device visible
int gpu_count();

}  // namespace anvil
