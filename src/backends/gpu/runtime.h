// Host-side GPU runtime, callable from plain C++ (no vendor header). Implemented in runtime.cu, which is
// compiled by nvcc (CUDA) or hipcc (HIP) from the same source.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "backends/backend.h"

namespace anvil::gpu {

int device_count();                // 0 when no driver or no device
void set_device(int index);
int current_device();
DeviceInfo device_info(int index);

// Caching allocator: freed blocks are kept per size class and reused, so the steady state of a training or
// decode loop makes no cudaMalloc/cudaFree calls (each costs tens of µs and synchronizes the device).
void* alloc(size_t nbytes);
void free(void* p);
void empty_cache();                // return cached blocks to the driver
size_t bytes_in_use();
size_t peak_bytes_in_use();
void reset_peak();
// What optional copies (pre-tiled weights) may still take on the current device: anvil's device memory stays
// within three quarters of the device's, so the KV cache and the prefill's activations keep the last quarter.
// Negative when already past it.
int64_t room_for_copies();

void memset_async(void* p, int value, size_t nbytes);
void copy_h2d(void* dst, const void* src, size_t nbytes);  // synchronous w.r.t. the host
void copy_d2h(void* dst, const void* src, size_t nbytes);
void copy_d2d(void* dst, const void* src, size_t nbytes);  // async on the current stream
// Pitched device-to-device copy, async on the current stream (Backend::copy_device_2d).
void copy_d2d_2d(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height);
void synchronize();
// Page-locked host memory. A device-to-host copy into it is asynchronous on the stream; into pageable memory
// the driver stages it and the call returns only when it is done.
void* host_alloc_pinned(size_t nbytes);  // throws anvil::Error naming the size when it fails
void host_free_pinned(void* p);
void copy_d2h_async(void* pinned_dst, const void* src, size_t nbytes);  // async on the current stream

// Streams: every kernel launches on current_stream(); default is a per-device non-blocking stream.
StreamHandle current_stream();
void set_current_stream(StreamHandle s);
StreamHandle stream_create();
void stream_destroy(StreamHandle s);
void stream_synchronize(StreamHandle s);

// Events for timing and cross-stream ordering.
using EventHandle = void*;
EventHandle event_create();
void event_destroy(EventHandle e);
void event_record(EventHandle e, StreamHandle s);
void event_synchronize(EventHandle e);
void stream_wait_event(StreamHandle s, EventHandle e);
float event_elapsed_ms(EventHandle start, EventHandle end);

// Graph capture of the current stream (decode steps). Returns an executable graph handle.
using GraphHandle = void*;
void capture_begin();
GraphHandle capture_end();
void graph_launch(GraphHandle g);
void graph_destroy(GraphHandle g);

}  // namespace anvil::gpu
