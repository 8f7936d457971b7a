#include "backends/backend.h"

#include "core/error.h"
#ifdef ANVIL_HAS_GPU
#include "backends/gpu/runtime.h"
#endif

namespace anvil {

Backend& cpu_backend();
#ifdef ANVIL_HAS_GPU
Backend& gpu_backend(int index);
#endif

int gpu_count() {
#ifdef ANVIL_HAS_GPU
  static int n = gpu::device_count();
  return n;
#else
  return 0;
#endif
}
bool gpu_available() { return gpu_count() > 0; }

Backend& backend(Device d) {
  if (d.is_cpu()) return cpu_backend();
#ifdef ANVIL_HAS_GPU
  ANVIL_CHECK(d.index >= 0 && d.index < gpu_count() && d.index < 16, "backend", str("a GPU index below ", gpu_count()),
              d.name());
  return gpu_backend(d.index);
#else
  ANVIL_THROW("backend", "a device this build supports (cpu)", d.name() + " (anvil was built without a GPU backend)");
#endif
}

Device parse_device(const std::string& s) {
  auto colon = s.find(':');
  std::string kind = s.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    try {
      index = std::stoi(s.substr(colon + 1));
    } catch (...) {
      ANVIL_THROW("parse_device", "cpu, gpu or gpu:N", "'" + s + "'");
    }
  }
  if (kind == "cpu") return Device::cpu();
  if (kind == "gpu" || kind == "cuda" || kind == "hip") return Device::gpu(index);
  ANVIL_THROW("parse_device", "cpu, gpu or gpu:N", "'" + s + "'");
}

}  // namespace anvil
