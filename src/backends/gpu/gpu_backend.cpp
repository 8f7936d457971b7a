// The GPU backend: adapts the vendor-neutral runtime (runtime.h) to the Backend interface.
#include "backends/backend.h"
#include "backends/gpu/runtime.h"

namespace anvil {

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(int index) : index_(index) {}
  Device device() const override { return Device::gpu(index_); }
  void* alloc(size_t n) override { gpu::set_device(index_); return gpu::alloc(n); }
  void free(void* p) override { gpu::free(p); }
  void memset(void* p, int v, size_t n) override { gpu::memset_async(p, v, n); }
  void copy_to_host(void* dst, const void* src, size_t n) override { gpu::copy_d2h(dst, src, n); }
  void copy_from_host(void* dst, const void* src, size_t n) override { gpu::copy_h2d(dst, src, n); }
  void copy_device(void* dst, const void* src, size_t n) override { gpu::copy_d2d(dst, src, n); }
  void copy_device_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                      size_t height) override {
    gpu::copy_d2d_2d(dst, dpitch, src, spitch, width, height);
  }
  void synchronize() override { gpu::synchronize(); }
  DeviceInfo info() const override { return gpu::device_info(index_); }

 private:
  int index_;
};

Backend& gpu_backend(int index) {
  static GpuBackend* backends[16] = {};
  if (!backends[index]) backends[index] = new GpuBackend(index);
  return *backends[index];
}

}  // namespace anvil
