// What one hand-off between every SM of the GPU costs when there is nothing else to do: the floor under the bubbles
// of a batch-1 decode step that streams each layer's weights over all SMs (decode_stack; docs/decode_kernels.md,
// eighteenth round). A round is one hand-off as decode_stack makes them:
//   every block writes its share of S tagged 32-bit words (value in the low half, the round's tag in the high half:
//   the word is its own flag), counts itself with a relaxed add, one thread polls the count until all G blocks are
//   in, then the block reads all S words with 16-byte relaxed loads and re-reads any word whose tag is not there.
// R rounds run in one cooperative launch; a round's time is the launch's time over R.
// Traffic: a producer warp per block streams 16 KB bulk copies of a 2 GB buffer through a 12-slot shared-memory ring
// (decode_stack's ring, 25 MB in flight over 132 SMs), either all the time ("stream") or 8 chunks as each round
// begins ("burst of 8", decode_stack's hold), to see what HBM traffic does to a hand-off. Alone, the same stream
// gives the copy rate that the bound below uses.
// Prints µs per round for S = 0 (the count alone), 4096 (decode_stack's o, attention and down outputs at the 8B
// shape), 14336 (down's input), and the bounds those put on an FP8 Llama-3.1-8B step, quiet and after bursts of 8:
// its weight bytes at the stream's rate plus 32 layers of 3 hand-offs of 4096 words and one of 14336 (q|k|v's, read
// by the attention blocks only, left out: a lower bound).
// Build: the CUDA build makes build-cuda/handoff_probe (or: nvcc -O3 -std=c++17 -arch=sm_90 -Isrc bench/handoff_probe.cu)
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/gpu/vendor/cuda.h"
#include "cuda_check.h"

constexpr int kWorkers = 256;                 // threads that write, poll and read (8 warps)
constexpr int kThreads = kWorkers + ANVIL_WARP_SIZE;  // + the producer warp
constexpr int kSlots = 12;                    // ring slots of kChunk bytes: decode_stack's 192 KB
constexpr unsigned kChunk = 16384;
constexpr size_t kSrcBytes = size_t(2) << 30; // streamed source: 2 GB, far past the 50 MB L2
constexpr int kBurst = 8;                     // chunks per round in burst mode (decode_stack's hold)
constexpr int kMaxWords = 16384;              // S at most: 16 16-byte loads per worker thread
constexpr int kMaxLoads = kMaxWords / 4 / kWorkers;
enum Traffic { kNone = 0, kStream = 1, kBurstMode = 2, kCopyOnly = 3 };

struct Args {
  uint32_t* words;     // 2 x S words (rounds alternate)
  unsigned* count;     // arrivals, zeroed before the launch
  unsigned long long* sink;
  const uint8_t* src;  // traffic source
  int S, rounds, traffic;
  long long copy_chunks;  // kCopyOnly: chunks per block
  int depth;              // copies in flight per streaming block, at most kSlots
  int streamers;          // which blocks stream: kAll, kOddSm (smid odd), kOddTpc ((smid >> 1) odd)
  unsigned long long* stats;  // per block: kStats counters (record_stats), or null
  unsigned long long* copied;  // chunks the producers copied, all blocks together
};
constexpr int kCountWords = 64;  // the count, and at [32] the word whose round trip is timed
enum Streamers { kAll = 0, kOddSm = 1, kOddTpc = 2 };
// Per-block counters of one launch: the SM clock cycles of thread 0's probe loads (one L2 round trip of a word
// no block writes, after each round's count) and of the round's reads, the rounds counted, whether the block
// streamed; block 0 adds the launch's clock64 and globaltimer spans, to turn cycles into µs.
enum Stat { kRttCycles = 0, kReadCycles, kRoundsSeen, kIsStreamer, kClockSpan, kNsSpan, kStats };

__device__ __forceinline__ unsigned sm_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__device__ __forceinline__ void wait_slot(uint64_t* full, long long c) {  // chunk c's copy has landed
  const unsigned parity = unsigned(c / kSlots) & 1u;
  while (!anvil_mbar_try_wait(&full[c % kSlots], parity)) {
  }
}

__global__ void __launch_bounds__(kThreads, 1) handoff_probe(Args a) {
  extern __shared__ __align__(1024) uint8_t ring[];
  __shared__ uint64_t full[kSlots];
  __shared__ volatile int round_started, workers_done;
  const int tid = int(threadIdx.x), G = int(gridDim.x), b = int(blockIdx.x);
  const unsigned smid = sm_id();
  const bool streamer = a.streamers == kAll || (a.streamers == kOddSm && (smid & 1u)) ||
                        (a.streamers == kOddTpc && ((smid >> 1) & 1u));
  const long long clk0 = clock64();
  const unsigned long long ns0 = anvil_globaltimer_ns();
  if (tid == 0) {
    for (int s = 0; s < kSlots; s++) anvil_mbar_init(&full[s], 1);
    anvil_mbar_init_fence();
    round_started = -1, workers_done = 0;
  }
  __syncthreads();

  if (tid >= kWorkers) {  // the producer warp: lane 0 issues every copy
    if (tid != kWorkers || a.traffic == kNone || !streamer) return;
    const uint64_t policy = anvil_l2_evict_first();
    const size_t per = kSrcBytes / kChunk;
    long long c = 0;
    auto issue = [&] {
      if (c >= a.depth) wait_slot(full, c - a.depth);  // at most depth in flight; the slot's last copy landed
      anvil_mbar_arrive_expect(&full[c % kSlots], kChunk);
      anvil_bulk_copy_g2s(ring + size_t(c % kSlots) * kChunk, a.src + ((size_t(c) * G + b) % per) * kChunk, kChunk,
                          &full[c % kSlots], policy);
      c++;
    };
    if (a.traffic == kCopyOnly) {
      while (c < a.copy_chunks) issue();
    } else if (a.traffic == kStream) {
      while (!workers_done) issue();
    } else {  // kBurstMode: kBurst chunks as each round begins
      for (int r = 0; r < a.rounds; r++) {
        while (round_started < r && !workers_done) {
        }
        if (workers_done) break;
        for (int i = 0; i < kBurst; i++) issue();
      }
    }
    for (long long d = c > a.depth ? c - a.depth : 0; d < c; d++) wait_slot(full, d);  // nothing in flight at exit
    atomicAdd(a.copied, (unsigned long long)c);
    return;
  }

  const int S = a.S, lo = int(int64_t(S) * b / G), hi = int(int64_t(S) * (b + 1) / G);
  unsigned long long sum = 0, rtt = 0, read = 0;
  for (int r = 0; r < a.rounds; r++) {
    if (tid == 0) round_started = r;
    uint32_t* buf = a.words + size_t(r & 1) * S;
    const uint32_t tag = uint32_t(r % 65535 + 1) << 16;
    for (int i = lo + tid; i < hi; i += kWorkers) anvil_store_relaxed_gpu(buf + i, tag | uint32_t(i & 0xffff));
    anvil_bar_sync(1, kWorkers);  // the block's stores are issued
    if (tid == 0) {
      anvil_red_add_relaxed_gpu(a.count, 1u);
      const unsigned target = unsigned(r + 1) * unsigned(G);
      while (anvil_load_relaxed_gpu(a.count) < target) __nanosleep(32);
    }
    if (tid == 0 && a.stats) {  // one round trip to L2, timed: the word is never written, so it stays in L2
      const long long t0 = clock64();
      const uint32_t w = anvil_load_relaxed_gpu(a.count + 32);
      if (w == 0x9e3779b9u) __trap();  // the branch waits for the load, so the clock below is read after it
      rtt += (unsigned long long)(clock64() - t0);
    }
    anvil_bar_sync(1, kWorkers);  // every block has counted itself
    const long long read0 = clock64();
    // All of the thread's loads first, then the tag checks: one round trip to L2 for the whole vector (a load
    // checked before the next is issued makes one per 4 KB of the block: 1.71 / 3.96 µs at 4096 / 14336 words).
    uint4 v[kMaxLoads];
#pragma unroll
    for (int i = 0; i < kMaxLoads; i++)
      if (4 * (tid + i * kWorkers) < S) v[i] = anvil_load16_relaxed_gpu(buf + 4 * (tid + i * kWorkers));
#pragma unroll
    for (int i = 0; i < kMaxLoads; i++) {
      const int j = 4 * (tid + i * kWorkers);
      if (j >= S) break;
      while ((v[i].x & 0xffff0000u) != tag || (v[i].y & 0xffff0000u) != tag || (v[i].z & 0xffff0000u) != tag ||
             (v[i].w & 0xffff0000u) != tag)
        v[i] = anvil_load16_relaxed_gpu(buf + j);  // a store the count overtook
      sum += (v[i].x & 0xffffu) + (v[i].y & 0xffffu) + (v[i].z & 0xffffu) + (v[i].w & 0xffffu);
    }
    anvil_bar_sync(1, kWorkers);  // read before the next round's writes (the same buffer two rounds on)
    read += (unsigned long long)(clock64() - read0);
  }
  if (tid == 0) workers_done = 1;
  if (tid == 0 && a.stats) {
    unsigned long long* st = a.stats + size_t(b) * kStats;
    st[kRttCycles] = rtt, st[kReadCycles] = read, st[kRoundsSeen] = unsigned(a.rounds), st[kIsStreamer] = streamer;
    st[kClockSpan] = (unsigned long long)(clock64() - clk0), st[kNsSpan] = anvil_globaltimer_ns() - ns0;
  }
  atomicAdd(a.sink, sum);
}

// x[i] = a 32-bit hash of i (splitmix's finaliser): incompressible stand-in weights.
__global__ void fill_random(uint32_t* x, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = i + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    x[i] = uint32_t(z ^ (z >> 31));
  }
}

struct Probe {
  int G;
  size_t smem;
  uint32_t* words;
  unsigned* count;
  unsigned long long* sink;
  uint8_t* src;
  cudaEvent_t e0, e1;
  int depth = kSlots, streamers = kAll;   // the traffic's shape (the second table varies them)
  unsigned long long* stats = nullptr;    // G x kStats counters, recorded when set
  unsigned long long* copied = nullptr;   // chunks copied by the last launch

  float run(int S, int rounds, int traffic, long long copy_chunks = 0) {
    CHECK(cudaMemset(count, 0, sizeof(unsigned) * kCountWords));
    CHECK(cudaMemset(words, 0, sizeof(uint32_t) * 2 * kMaxWords));
    CHECK(cudaMemset(copied, 0, sizeof(unsigned long long)));
    Args a{words, count, sink, src, S, rounds, traffic, copy_chunks, depth, streamers, stats, copied};
    CHECK(cudaEventRecord(e0));
    CHECK(anvil::gpu::vendor::launch_cooperative(handoff_probe, dim3(G), dim3(kThreads), smem, nullptr, a));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms;
  }
  // µs per round, the median of 5 launches; the launch's fixed cost is taken out by timing R and 2R rounds.
  float per_round(int S, int traffic, int R = 2000) {
    float best[2];
    for (int k = 0; k < 2; k++) {
      float t[5];
      for (int i = 0; i < 5; i++) t[i] = run(S, R * (k + 1), traffic);
      for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
          if (t[j] < t[i]) std::swap(t[i], t[j]);
      best[k] = t[2];
    }
    return (best[1] - best[0]) * 1e3f / R;
  }
  // The ring stream's rate alone, TB/s: 8192 and 16384 chunks (128 and 256 MB) per streaming block, the fixed cost
  // taken out; the bytes are those the producers counted, so the rate holds whichever blocks streamed.
  double stream_tbs() {
    float tc[2];
    double bytes[2];
    for (int k = 0; k < 2; k++) {
      tc[k] = 1e30f;
      for (int i = 0; i < 3; i++) {
        const float t = run(0, 0, kCopyOnly, 8192LL * (k + 1));
        unsigned long long n = 0;
        CHECK(cudaMemcpy(&n, copied, sizeof(n), cudaMemcpyDeviceToHost));
        if (t < tc[k]) tc[k] = t, bytes[k] = double(n) * kChunk;
      }
    }
    return (bytes[1] - bytes[0]) / ((tc[1] - tc[0]) * 1e-3) / 1e12;
  }
  // One launch of R rounds of S words with per-block counters: mean µs of one L2 round trip and of a round's reads,
  // over the streaming blocks ([0]) and the others ([1]); n[0], n[1] count them.
  struct Split { double rtt_us[2], read_us[2]; int n[2]; };
  Split split(int S, int traffic, int R = 2000) {
    std::vector<unsigned long long> h(size_t(G) * kStats);
    CHECK(cudaMalloc(&stats, sizeof(unsigned long long) * h.size()));
    run(S, R, traffic);
    CHECK(cudaMemcpy(h.data(), stats, sizeof(unsigned long long) * h.size(), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(stats));
    stats = nullptr;
    const double ns_per_cycle = double(h[kNsSpan]) / double(h[kClockSpan]);  // block 0's SM clock
    Split o{};
    for (int b = 0; b < G; b++) {
      const unsigned long long* st = h.data() + size_t(b) * kStats;
      const int k = traffic != kNone && st[kIsStreamer] ? 0 : 1;
      o.rtt_us[k] += double(st[kRttCycles]) * ns_per_cycle * 1e-3 / double(st[kRoundsSeen]);
      o.read_us[k] += double(st[kReadCycles]) * ns_per_cycle * 1e-3 / double(st[kRoundsSeen]);
      o.n[k]++;
    }
    for (int k = 0; k < 2; k++)
      if (o.n[k]) o.rtt_us[k] /= o.n[k], o.read_us[k] /= o.n[k];
    return o;
  }
};

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major < 9) {
    std::fprintf(stderr, "handoff_probe: needs sm_90 or later (bulk copies), found sm_%d%d\n", prop.major, prop.minor);
    return 1;
  }
  Probe p{};
  p.G = prop.multiProcessorCount;
  p.smem = size_t(kSlots) * kChunk;
  CHECK(cudaFuncSetAttribute(handoff_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, int(p.smem)));
  CHECK(cudaMalloc(&p.words, sizeof(uint32_t) * 2 * kMaxWords));
  CHECK(cudaMalloc(&p.count, sizeof(unsigned) * kCountWords));
  CHECK(cudaMalloc(&p.sink, sizeof(unsigned long long)));
  CHECK(cudaMalloc(&p.copied, sizeof(unsigned long long)));
  CHECK(cudaMalloc(&p.src, kSrcBytes));
  // Random bytes, as weights are: a constant fill could stream faster than real data would if the memory system
  // compressed it.
  fill_random<<<4 * p.G, 256>>>(reinterpret_cast<uint32_t*>(p.src), kSrcBytes / 4);
  CHECK(cudaGetLastError());
  CHECK(cudaEventCreate(&p.e0));
  CHECK(cudaEventCreate(&p.e1));
  p.run(4096, 100, kStream);  // warm-up

  const double copy_tbs = p.stream_tbs();

  std::printf("%s, %d SMs, one block per SM, %d worker threads, cooperative launch\n", prop.name, p.G, kWorkers);
  std::printf("ring stream alone (12 x 16 KB bulk copies per SM): %.2f TB/s\n\n", copy_tbs);
  // Columns in the order of the Traffic values they run (kNone, kStream, kBurstMode).
  std::printf("%-8s %12s %12s %12s   (us per hand-off)\n", "words", "quiet", "stream", "burst of 8");
  const int sizes[3] = {0, 4096, 14336};
  float t[3][3];
  for (int i = 0; i < 3; i++) {
    for (int m = 0; m < 3; m++) t[i][m] = p.per_round(sizes[i], m);
    std::printf("%-8d %12.3f %12.3f %12.3f\n", sizes[i], t[i][0], t[i][1], t[i][2]);
  }
  // Llama-3.1-8B, FP8 layers and a bf16 LM head: 32 x 218.1 MB + 1050.6 MB of streamed weights.
  constexpr int kLayers = 32;
  const double layer_bytes = 4096.0 * (6144 + 4096 + 3 * 14336), head_bytes = 128256.0 * 4096 * 2;
  const double weights_ms = (kLayers * layer_bytes + head_bytes) / (copy_tbs * 1e12) * 1e3;
  for (int m : {int(kNone), int(kBurstMode)}) {  // quiet; after decode_stack's hold of 8 chunks
    const double per_layer_us = 3 * t[1][m] + t[2][m];
    std::printf("%sFP8 8B step: weights %.3f ms at the stream's rate + %d x %.2f us of hand-offs %s = %.3f ms "
                "(target 2.1; every other cost of a layer left out)\n",
                m == 0 ? "\n" : "", weights_ms, kLayers, per_layer_us, m == 0 ? "(quiet)" : "(after bursts of 8)",
                weights_ms + kLayers * per_layer_us * 1e-3);
  }

  // Where the round trips wait. If a hand-off's loads queue behind the copies of their own SM (its return path),
  // fewer copies in flight, or SMs that stream nothing, should see quiet round trips; if they queue in L2 or the
  // crossbar, every SM sees the same. Half the SMs stream, split by SM (a TPC's two SMs take different roles) or
  // by TPC; the stream's rate alone is measured for each shape.
  std::printf("\nWhere the round trips wait (S = 4096 words, under the stream; us, means over the blocks of each kind)\n");
  std::printf("%-26s %9s %9s %9s %12s %9s %12s\n", "streaming SMs x in flight", "TB/s", "round", "L2 trip", "(quiet SMs)",
              "reads", "(quiet SMs)");
  struct Shape { const char* name; int streamers, depth; };
  const Shape shapes[] = {{"none", kAll, kSlots},      {"all x 12", kAll, 12},      {"all x 8", kAll, 8},
                          {"all x 4", kAll, 4},        {"all x 2", kAll, 2},        {"odd SMs x 12", kOddSm, 12},
                          {"odd SMs x 6", kOddSm, 6},  {"odd TPCs x 12", kOddTpc, 12}};
  for (const Shape& sh : shapes) {
    p.streamers = sh.streamers, p.depth = sh.depth;
    const bool none = std::string(sh.name) == "none";
    const Probe::Split sp = p.split(4096, none ? kNone : kStream);
    const double tbs = none ? 0.0 : p.stream_tbs();
    const float round = p.per_round(4096, none ? kNone : kStream);
    std::printf("%-26s %9.2f %9.3f %9.3f %12.3f %9.3f %12.3f\n", sh.name, tbs, round, sp.n[0] ? sp.rtt_us[0] : 0.0,
                sp.n[1] ? sp.rtt_us[1] : 0.0, sp.n[0] ? sp.read_us[0] : 0.0, sp.n[1] ? sp.read_us[1] : 0.0);
  }
  p.streamers = kAll, p.depth = kSlots;

  unsigned long long s = 0;
  CHECK(cudaMemcpy(&s, p.sink, sizeof(s), cudaMemcpyDeviceToHost));
  std::printf("(checksum %llu)\n", s);
  return 0;
}
