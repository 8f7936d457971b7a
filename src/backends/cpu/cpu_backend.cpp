// The CPU backend: 64-byte aligned host memory (AVX-512 loads, no false sharing between threads).
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backends/backend.h"
#include "core/error.h"

namespace anvil {

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  void* alloc(size_t nbytes) override {
    size_t n = (nbytes + 63) & ~size_t(63);
    void* p = std::aligned_alloc(64, n ? n : 64);
    if (!p) ANVIL_THROW("cpu::alloc", str(nbytes, " bytes of host memory"), "out of memory");
    return p;
  }
  void free(void* p) override { std::free(p); }
  void memset(void* p, int v, size_t n) override { std::memset(p, v, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_from_host(void* dst, const void* src, size_t n) override { std::memcpy(dst, src, n); }
  void copy_device(void* dst, const void* src, size_t n) override { std::memmove(dst, src, n); }
  void copy_device_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                      size_t height) override {
    for (size_t i = 0; i < height; i++)
      std::memmove(static_cast<char*>(dst) + i * dpitch, static_cast<const char*>(src) + i * spitch, width);
  }
  void synchronize() override {}
  DeviceInfo info() const override {
    DeviceInfo i;
    i.name = "cpu";
    i.arch = "x86_64";
    i.compute_units = int(std::thread::hardware_concurrency());
    i.warp_size = 1;
    i.bf16_compute = true;
    return i;
  }
};

Backend& cpu_backend() {
  static CpuBackend b;
  return b;
}

}  // namespace anvil
