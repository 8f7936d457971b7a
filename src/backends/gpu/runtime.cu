// GPU runtime: device queries, the caching allocator, streams, events, graphs. Same source for CUDA and HIP.
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/gpu/common.cuh"

namespace anvil::gpu {

void throw_gpu_error(const char* call, gpuError_t e, const char* file, int line) {
  throw Error(call, "success", str(vendor::error_string(e), " (", int(e), ")"), file, line);
}

int device_count() {
  int n = 0;
  if (gpuGetDeviceCount(&n) != gpuSuccess) {
    (void)gpuGetLastError();  // no driver: report zero devices, not an error
    return 0;
  }
  return n;
}
void set_device(int index) { ANVIL_GPU_CHECK(gpuSetDevice(index)); }
int current_device() {
  int d = 0;
  ANVIL_GPU_CHECK(gpuGetDevice(&d));
  return d;
}

static DeviceInfo query_device_info(int index) {
  gpuDeviceProp p;
  ANVIL_GPU_CHECK(gpuGetDeviceProperties(&p, index));
  DeviceInfo info;
  info.name = p.name;
vendor::fill_arch(p, info);
  info.compute_units = p.multiProcessorCount;
  info.warp_size = p.warpSize;
  info.total_memory = p.totalGlobalMem;
  info.l2_bytes = size_t(p.l2CacheSize);
  return info;
}

// Cached: gpuGetDeviceProperties takes milliseconds, and launch code asks for the SM count on every call.
DeviceInfo device_info(int index) {
  static std::mutex mu;
  static std::map<int, DeviceInfo> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(index);
  if (it == cache.end()) it = cache.emplace(index, query_device_info(index)).first;
  return it->second;
}

// ---- caching allocator ---------------------------------------------------------------------------------
// Sizes are rounded up to 512 B below 1 MiB and to 2 MiB above, so a freed block fits the next request of
// the same layer shape. Blocks are never split: simple, and the training/decode loops allocate the same
// sizes every step. On out-of-memory the cache is released and the allocation retried once.
namespace {
struct Allocator {
  std::mutex mu;
  std::multimap<size_t, void*> free_blocks;        // size -> ptr
  std::unordered_map<void*, size_t> live;          // ptr -> rounded size
  size_t in_use = 0, peak = 0, cached = 0;
  // While a stream is being captured, freed blocks go here instead of back to the cache: their addresses are
  // baked into the graph, so they belong to it until graph_destroy (capture_end hands the list over).
  std::vector<void*>* capture_hold = nullptr;
};
Allocator& allocator() {
  static Allocator* a = new Allocator();  // never destroyed: frees may come from static destructors
  return *a;
}
size_t round_size(size_t n) {
  if (n == 0) n = 1;
  if (n < (1u << 20)) return (n + 511) & ~size_t(511);
  const size_t g = size_t(2) << 20;
  return (n + g - 1) / g * g;
}
}  // namespace

void* alloc(size_t nbytes) {
  Allocator& a = allocator();
  const size_t n = round_size(nbytes);
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.free_blocks.lower_bound(n);
  // Reuse a cached block only if it is not much larger than asked (at most 25% waste).
  if (it != a.free_blocks.end() && it->first <= n + n / 4) {
    void* p = it->second;
    size_t sz = it->first;
    a.free_blocks.erase(it);
    a.cached -= sz;
    a.live[p] = sz;
    a.in_use += sz;
    a.peak = std::max(a.peak, a.in_use);
    return p;
  }
  void* p = nullptr;
  gpuError_t e = gpuMalloc(&p, n);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    for (auto& [sz, q] : a.free_blocks) ANVIL_GPU_CHECK(gpuFree(q));
    a.free_blocks.clear();
    a.cached = 0;
    e = gpuMalloc(&p, n);
    if (e != gpuSuccess) {
      (void)gpuGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)gpuMemGetInfo(&free_b, &total_b);
      throw Error("gpu::alloc", str(n, " bytes of device memory"),
                  str("out of memory (", free_b >> 20, " MiB free of ", total_b >> 20, " MiB, ", a.in_use >> 20,
                      " MiB held by anvil)"),
                  __FILE__, __LINE__);
    }
  }
  a.live[p] = n;
  a.in_use += n;
  a.peak = std::max(a.peak, a.in_use);
  return p;
}

void free(void* p) {
  if (!p) return;
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.live.find(p);
  if (it == a.live.end())
    throw Error("gpu::free", "a pointer returned by gpu::alloc", str("unknown pointer ", p), __FILE__, __LINE__);
  if (a.capture_hold) {
    a.capture_hold->push_back(p);  // stays live (and counted in use) while the graph exists
    return;
  }
  a.in_use -= it->second;
  a.cached += it->second;
  a.free_blocks.emplace(it->second, p);
  a.live.erase(it);
}

void empty_cache() {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mu);
  ANVIL_GPU_CHECK(gpuDeviceSynchronize());
  for (auto& [sz, q] : a.free_blocks) ANVIL_GPU_CHECK(gpuFree(q));
  a.free_blocks.clear();
  a.cached = 0;
}
size_t bytes_in_use() { return allocator().in_use; }
int64_t room_for_copies() {
  return int64_t(0.75 * double(device_info(current_device()).total_memory)) - int64_t(bytes_in_use());
}
size_t peak_bytes_in_use() { return allocator().peak; }
void reset_peak() { allocator().peak = allocator().in_use; }

// ---- streams -------------------------------------------------------------------------------------------
namespace {
thread_local StreamHandle g_stream = nullptr;
StreamHandle default_stream() {
  static std::vector<StreamHandle> per_device(64, nullptr);
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  int d = current_device();
  if (!per_device[d]) {
    gpuStream_t s;
    ANVIL_GPU_CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
    per_device[d] = s;
  }
  return per_device[d];
}
}  // namespace

StreamHandle current_stream() { return g_stream ? g_stream : default_stream(); }
void set_current_stream(StreamHandle s) { g_stream = s; }
StreamHandle stream_create() {
  gpuStream_t s;
  ANVIL_GPU_CHECK(gpuStreamCreateWithFlags(&s, gpuStreamNonBlocking));
  return s;
}
void stream_destroy(StreamHandle s) { ANVIL_GPU_CHECK(gpuStreamDestroy(static_cast<gpuStream_t>(s))); }
void stream_synchronize(StreamHandle s) { ANVIL_GPU_CHECK(gpuStreamSynchronize(static_cast<gpuStream_t>(s))); }

void memset_async(void* p, int value, size_t nbytes) { ANVIL_GPU_CHECK(gpuMemsetAsync(p, value, nbytes, stream())); }
void copy_h2d(void* dst, const void* src, size_t n) {
  ANVIL_GPU_CHECK(gpuMemcpyAsync(dst, src, n, gpuMemcpyHostToDevice, stream()));
  ANVIL_GPU_CHECK(gpuStreamSynchronize(stream()));
}
void copy_d2h(void* dst, const void* src, size_t n) {
  ANVIL_GPU_CHECK(gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToHost, stream()));
  ANVIL_GPU_CHECK(gpuStreamSynchronize(stream()));
}
void copy_d2d(void* dst, const void* src, size_t n) {
  ANVIL_GPU_CHECK(gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToDevice, stream()));
}
void copy_d2d_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) {
  ANVIL_GPU_CHECK(gpuMemcpy2DAsync(dst, dpitch, src, spitch, width, height, gpuMemcpyDeviceToDevice, stream()));
}
void synchronize() { ANVIL_GPU_CHECK(gpuStreamSynchronize(stream())); }
void* host_alloc_pinned(size_t nbytes) {
  void* p = nullptr;
  const gpuError_t e = gpuMallocHost(&p, nbytes);
  if (e != gpuSuccess) {
    (void)gpuGetLastError();
    ANVIL_THROW("gpu::host_alloc_pinned", str(nbytes, " bytes of page-locked host memory"), gpuGetErrorString(e));
  }
  return p;
}
void host_free_pinned(void* p) {
  if (p) ANVIL_GPU_CHECK(gpuFreeHost(p));
}
void copy_d2h_async(void* dst, const void* src, size_t n) {
  ANVIL_GPU_CHECK(gpuMemcpyAsync(dst, src, n, gpuMemcpyDeviceToHost, stream()));
}

// ---- events --------------------------------------------------------------------------------------------
EventHandle event_create() {
  gpuEvent_t e;
  ANVIL_GPU_CHECK(gpuEventCreate(&e));
  return e;
}
void event_destroy(EventHandle e) { ANVIL_GPU_CHECK(gpuEventDestroy(static_cast<gpuEvent_t>(e))); }
void event_record(EventHandle e, StreamHandle s) {
  ANVIL_GPU_CHECK(gpuEventRecord(static_cast<gpuEvent_t>(e), static_cast<gpuStream_t>(s)));
}
void event_synchronize(EventHandle e) { ANVIL_GPU_CHECK(gpuEventSynchronize(static_cast<gpuEvent_t>(e))); }
void stream_wait_event(StreamHandle s, EventHandle e) {
  ANVIL_GPU_CHECK(gpuStreamWaitEvent(static_cast<gpuStream_t>(s), static_cast<gpuEvent_t>(e), 0));
}
float event_elapsed_ms(EventHandle a, EventHandle b) {
  float ms = 0;
  ANVIL_GPU_CHECK(gpuEventElapsedTime(&ms, static_cast<gpuEvent_t>(a), static_cast<gpuEvent_t>(b)));
  return ms;
}

// ---- graphs --------------------------------------------------------------------------------------------
namespace {
struct Graph {
  gpuGraphExec_t exec;
  std::vector<void*> held;  // temporaries the captured kernels read and write, owned by the graph
};
}  // namespace

// Relaxed mode: the caching allocator may call gpuMalloc on a miss while capturing (a global-mode capture
// forbids it). Temporaries freed during the capture are held for the graph (see Allocator::capture_hold).
void capture_begin() {
  Allocator& a = allocator();
  {
    std::lock_guard<std::mutex> lock(a.mu);
    ANVIL_CHECK(!a.capture_hold, "gpu::capture_begin", "no capture in progress", "a capture already running");
    a.capture_hold = new std::vector<void*>();
  }
  ANVIL_GPU_CHECK(gpuStreamBeginCapture(stream(), gpuStreamCaptureModeRelaxed));
}
GraphHandle capture_end() {
  Allocator& a = allocator();
  std::unique_ptr<std::vector<void*>> held;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    held.reset(a.capture_hold);
    a.capture_hold = nullptr;
  }
  gpuGraph_t g;
  ANVIL_GPU_CHECK(gpuStreamEndCapture(stream(), &g));
  gpuGraphExec_t exec;
  const gpuError_t e = gpuGraphInstantiate(&exec, g);
  ANVIL_GPU_CHECK(gpuGraphDestroy(g));
  if (e != gpuSuccess) {
    for (void* p : *held) free(p);
    ANVIL_GPU_CHECK(e);
  }
  return new Graph{exec, std::move(*held)};
}
void graph_launch(GraphHandle g) { ANVIL_GPU_CHECK(gpuGraphLaunch(static_cast<Graph*>(g)->exec, stream())); }
void graph_destroy(GraphHandle g) {
  std::unique_ptr<Graph> graph(static_cast<Graph*>(g));
  ANVIL_GPU_CHECK(gpuStreamSynchronize(stream()));  // a launch may still be reading the held blocks
  ANVIL_GPU_CHECK(gpuGraphExecDestroy(graph->exec));
  for (void* p : graph->held) free(p);
}

}  // namespace anvil::gpu
