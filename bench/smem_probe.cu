// Shared-memory load throughput by access pattern, to know what a kernel's layout costs before writing it.
// One question decides the scan layouts (docs/mamba_kernels.md): is an LDS.128 whose 32 threads read the same
// 16 bytes one wavefront (broadcast) or four (one per quarter-warp phase, as an LDS.128 of 32 distinct float4)?
// Prints warp-loads per clock per SM for each pattern; 1.0 = one wavefront per load, 0.25 = four.
// Build: the CUDA build makes build-cuda/smem_probe (or: nvcc -O3 -arch=sm_90 -Isrc bench/smem_probe.cu)
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#include "backends/gpu/vendor/cuda.h"  // ANVIL_WARP_SIZE
#include "cuda_check.h"

constexpr int kIters = 4096, kThreads = 512, kSlots = 1024;

// pattern 0: every thread the same float4; 1: 4 distinct float4 per warp (lane % 4), 8 threads on each;
// 2: 32 distinct consecutive float4; 3: float, every thread the same; 4: float, 32 distinct consecutive.
template <int PAT>
__global__ void probe(float* out, int salt) {
  __shared__ float4 s[kSlots];
  for (int i = threadIdx.x; i < kSlots; i += blockDim.x) s[i] = make_float4(i, i + 1, i + 2, i + salt);
  __syncthreads();
  const int lane = threadIdx.x % ANVIL_WARP_SIZE;
  float acc0 = 0, acc1 = 0, acc2 = 0, acc3 = 0;
#pragma unroll 8
  for (int i = 0; i < kIters; i++) {
    const int base = (i * 37 + salt) & (kSlots - 64);
    if (PAT <= 2) {
      const int idx = PAT == 0 ? base : PAT == 1 ? base + (lane & 3) : base + lane;
      const float4 v = s[idx];
      acc0 += v.x, acc1 += v.y, acc2 += v.z, acc3 += v.w;
    } else {
      const float* f = reinterpret_cast<const float*>(s);
      acc0 += f[PAT == 3 ? 4 * base : 4 * base + lane];
    }
  }
  if (acc0 + acc1 + acc2 + acc3 == -1.f) out[threadIdx.x] = acc0;  // never true; keeps the loads
}

template <int PAT>
double run(float* out, int sms, double clock_ghz) {
  const int blocks = sms * 4;
  probe<PAT><<<blocks, kThreads>>>(out, 0);
  CHECK(cudaGetLastError());
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaEventRecord(a));
  for (int r = 0; r < 10; r++) probe<PAT><<<blocks, kThreads>>>(out, r & 1);
  CHECK(cudaEventRecord(b));
  CHECK(cudaEventSynchronize(b));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, a, b));
  const double warp_loads = 10.0 * blocks * (kThreads / ANVIL_WARP_SIZE) * double(kIters);
  return warp_loads / (ms * 1e-3 * clock_ghz * 1e9 * sms);  // per clock per SM
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const double ghz = clock_khz * 1e-6;
  float* out;
  CHECK(cudaMalloc(&out, kThreads * sizeof(float)));
  const int sms = prop.multiProcessorCount;
  std::printf("%s, %d SMs, %.2f GHz (max clock; rates below are per max-clock cycle)\n", prop.name, sms, ghz);
  std::printf("%-44s %s\n", "pattern", "warp loads / clock / SM");
  std::printf("%-44s %.3f\n", "LDS.128, all 32 threads one float4", run<0>(out, sms, ghz));
  std::printf("%-44s %.3f\n", "LDS.128, 4 distinct float4 (lane % 4)", run<1>(out, sms, ghz));
  std::printf("%-44s %.3f\n", "LDS.128, 32 distinct consecutive float4", run<2>(out, sms, ghz));
  std::printf("%-44s %.3f\n", "LDS.32, all 32 threads one float", run<3>(out, sms, ghz));
  std::printf("%-44s %.3f\n", "LDS.32, 32 distinct consecutive floats", run<4>(out, sms, ghz));
  CHECK(cudaFree(out));
  return 0;
}
