// A kernel timeline of any CUDA process, for finding where a GPU waits: an injection library (the driver loads it
// when CUDA_INJECTION64_PATH names it) that records through CUPTI's activity API
//   - every kernel, memcpy and memset with its device start and end, stream and correlation id;
//   - every runtime and driver API call with its host start and end (the launch that a kernel's correlation id
//     names, the synchronisations the host waited in).
// CUPTI puts both on one nanosecond clock, so a gap on the device can be told apart: host-bound (the next kernel's
// launch call ended after the device went idle) or waiting on something else. No Nsight Systems is needed, which
// the GPU machines lack. tools/kernel_trace.py summarises the CSV.
//
// Environment: ANVIL_TRACE_OUT (the CSV, default kernel_trace.csv). Records come in 8 MB buffers; a step of a
// Mamba-1.4B training run is ~2000 kernels and ~10 k API calls, ~1 MB of records.
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace {

constexpr size_t kBufferBytes = 8u << 20;
constexpr size_t kAlign = 8;

std::FILE* g_out = nullptr;
std::mutex g_mu;
std::atomic<uint64_t> g_dropped{0};

void check(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, msg ? msg : "unknown CUPTI error");
  std::exit(3);
}

// Names with commas or quotes would break the CSV: C++ kernel names carry template argument lists.
std::string csv_field(const char* s) {
  std::string out = "\"";
  for (const char* p = s ? s : ""; *p; p++) out += (*p == '"') ? std::string("\"\"") : std::string(1, *p);
  return out + "\"";
}

const char* api_name(CUpti_CallbackDomain domain, uint32_t cbid) {
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) != CUPTI_SUCCESS || !name) return "?";
  return name;
}

void write_record(const CUpti_Activity* rec) {
  switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      std::fprintf(g_out, "kernel,%llu,%llu,%u,%u,%s\n", (unsigned long long)k->start, (unsigned long long)k->end,
                   k->streamId, k->correlationId, csv_field(k->name).c_str());
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      std::fprintf(g_out, "memcpy,%llu,%llu,%u,%u,\"memcpy kind %u, %llu bytes\"\n", (unsigned long long)m->start,
                   (unsigned long long)m->end, m->streamId, m->correlationId, unsigned(m->copyKind),
                   (unsigned long long)m->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
      std::fprintf(g_out, "memset,%llu,%llu,%u,%u,\"memset %llu bytes\"\n", (unsigned long long)m->start,
                   (unsigned long long)m->end, m->streamId, m->correlationId, (unsigned long long)m->bytes);
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      const bool rt = rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      std::fprintf(g_out, "%s,%llu,%llu,%u,%u,%s\n", rt ? "runtime" : "driver", (unsigned long long)a->start,
                   (unsigned long long)a->end, a->threadId, a->correlationId,
                   api_name(rt ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid));
      break;
    }
    default:
      break;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    CUpti_Activity* rec = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) write_record(rec);
  }
  std::free(buffer);
}

// At exit a failure can only be reported: the records already written stay.
void warn_if(CUptiResult r, const char* what) {
  if (r == CUPTI_SUCCESS) return;
  const char* msg = nullptr;
  cuptiGetResultString(r, &msg);
  std::fprintf(stderr, "kernel_trace: %s failed at exit: %s (the CSV may lack the last records)\n", what,
               msg ? msg : "unknown CUPTI error");
}

void at_exit() {
  warn_if(cuptiActivityFlushAll(1), "cuptiActivityFlushAll");
  std::lock_guard<std::mutex> lock(g_mu);
  size_t dropped = 0;
  warn_if(cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped), "cuptiActivityGetNumDroppedRecords");
  if (dropped) std::fprintf(stderr, "kernel_trace: CUPTI dropped %zu records\n", dropped);
  if (g_out) std::fclose(g_out);
  g_out = nullptr;
}

}  // namespace

// The driver calls this once, when the process first initialises CUDA.
extern "C" int InitializeInjection(void) {
  const char* path = std::getenv("ANVIL_TRACE_OUT");
  if (!path || !*path) path = "kernel_trace.csv";
  g_out = std::fopen(path, "w");
  if (!g_out) {
    std::fprintf(stderr, "kernel_trace: cannot write '%s'\n", path);
    return 0;
  }
  std::fprintf(g_out, "kind,start_ns,end_ns,stream_or_thread,correlation,name\n");
  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                               CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER})
    check(cuptiActivityEnable(k), "cuptiActivityEnable");
  std::atexit(at_exit);
  std::fprintf(stderr, "kernel_trace: recording kernels, copies and API calls to '%s'\n", path);
  return 1;
}
