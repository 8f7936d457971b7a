// GPU attention backward, flash-attention style in plain fp32 FMA (portable to sm_90 and gfx90a).
//
// 1. attention_rowdot_kernel: D (B, NH, T) = rowsum(dout * out), one warp per row.
// 2. attention_bwd_kernel: one block per (key/value tile, b, kv head). It keeps its K and V tiles in shared
//    memory and dK, dV in registers, and walks every query head of its GQA group and every query tile at or
//    after the diagonal. Per query tile it recomputes P = exp2(S - lse) from the saved lse, then
//      dV += P^T dO,  dP = dO V^T,  dS = P (dP - D),  dK += scale dS^T Q,  dQ += scale dS K.
//    dK and dV of a kv head have exactly one owner block, so they are written once, without atomics.
//    dQ rows receive a contribution from every kv tile: they are added with atomicAdd into an f32 buffer
//    (dq itself when dq is f32, else a zeroed scratch that a cast kernel turns into dq afterwards). The
//    atomics cost BQ*HD adds per (kv tile, q tile) pair, about 1/(2*BK) of the 2.5x-forward FMA work.
//
// Configurations (128 threads): HD = 64 uses 64 keys x 32 queries per step (62.7 KB shared memory);
// HD = 80..128 use 32 keys x 16 queries (at most 53.8 KB): both fit the 64 KB LDS of gfx90a.
#include "kernels/attention/attention_gpu.cuh"  // first: it brings the vendor runtime that core/ headers need
#include "core/dispatch.h"
#include "kernels/attention/attention.h"

namespace anvil {
namespace {

using namespace attn;

template <int HD>
struct BwdTraits {
  static constexpr int BK = HD == 64 ? 64 : 32;  // key rows per block
  static constexpr int BQ = HD == 64 ? 32 : 16;  // query rows per step
  static constexpr int NT = 128;
  static constexpr int RX = 8, CY = NT / RX;         // thread (cy, rx): key rows cy + 16i, query cols rx + 8j
  static constexpr int MI = BK / CY, MJ = BQ / RX;   // 4x4 (HD 64) or 2x2 scores per thread
  static constexpr int LD = HD + 4, LDP = BQ + 8;    // see attention_gpu.cuh; LDP keeps P stores conflict-free
  static constexpr int NG = (HD / 4 + RX - 1) / RX;  // float4 column groups of dK/dV per thread
  static constexpr int NU = (BQ / 4 * HD / 4 + NT - 1) / NT;  // 4x4 dQ units per thread (1 in all configs)
  static constexpr size_t smem_bytes = sizeof(float) * (2 * BK * LD + 2 * BQ * LD + BK * LDP + 2 * BQ);
};

// D[(b, h, t)] = sum_d dout * out over the row (b, t, h).
template <class T, int HD>
__global__ void __launch_bounds__(256) attention_rowdot_kernel(const T* __restrict__ dout, const T* __restrict__ out,
                                                               float* __restrict__ D, int64_t rows, int Tn, int NH) {
  const int64_t row = int64_t(blockIdx.x) * (256 / gpu::kWarpSize) + threadIdx.x / gpu::kWarpSize;
  const int lane = threadIdx.x % gpu::kWarpSize;
  if (row >= rows) return;  // whole warps leave together
  float s = 0.f;
  for (int d = lane; d < HD; d += gpu::kWarpSize) s += to_f32(dout[row * HD + d]) * to_f32(out[row * HD + d]);
  s = gpu::warp_sum(s);
  const int64_t bt = row / NH, h = row % NH, b = bt / Tn, t = bt % Tn;
  if (lane == 0) D[(b * NH + h) * Tn + t] = s;
}

template <class T, int HD>
__global__ void __launch_bounds__(128) attention_bwd_kernel(BwdParams<T> p) {
  using Tr = BwdTraits<HD>;
  constexpr int BK = Tr::BK, BQ = Tr::BQ, NT = Tr::NT, RX = Tr::RX, CY = Tr::CY, MI = Tr::MI, MJ = Tr::MJ;
  constexpr int LD = Tr::LD, LDP = Tr::LDP, NG = Tr::NG, NU = Tr::NU, HG = HD / 4;
  extern __shared__ float4 smem4[];
  float* Ks = reinterpret_cast<float*>(smem4);
  float* Vs = Ks + BK * LD;
  float* Qs = Vs + BK * LD;
  float* Gs = Qs + BQ * LD;   // dO tile
  float* Ps = Gs + BQ * LD;   // P^T, then dS^T: (BK, LDP)
  float* Ls = Ps + BK * LDP;  // lse * log2(e) of the query tile
  float* Ds = Ls + BQ;        // D of the query tile

  const int b = blockIdx.x / p.NKV, kvh = blockIdx.x % p.NKV, group = p.NH / p.NKV;
  const int c0 = blockIdx.y * BK;  // block 0 has the longest range of queries: it starts first
  const int rx = threadIdx.x % RX, cy = threadIdx.x / RX;

  load_tile<T, HD, BK, NT>(Ks, p.k, b, c0, kvh, p.T, p.NKV, 1.f);
  load_tile<T, HD, BK, NT>(Vs, p.v, b, c0, kvh, p.T, p.NKV, 1.f);

  float dk[MI][NG * 4], dv[MI][NG * 4];
#pragma unroll
  for (int i = 0; i < MI; i++)
#pragma unroll
    for (int e = 0; e < NG * 4; e++) dk[i][e] = dv[i][e] = 0.f;

  for (int h = kvh * group; h < (kvh + 1) * group; h++)
    for (int r0 = c0 / BQ * BQ; r0 < p.T; r0 += BQ) {  // queries before c0 cannot see these keys
      __syncthreads();  // the previous step is done with Qs, Gs, Ps, Ls, Ds
      // Q pre-scaled by scale * log2(e): S comes out in base 2, and dK = scale dS^T Q = ln2 * dS^T Qs.
      load_tile<T, HD, BQ, NT>(Qs, p.q, b, r0, h, p.T, p.NH, p.scale * kLog2e);
      load_tile<T, HD, BQ, NT>(Gs, p.dout, b, r0, h, p.T, p.NH, 1.f);
      for (int r = threadIdx.x; r < BQ; r += NT) {
        const bool ok = r0 + r < p.T;
        const int64_t row = (int64_t(b) * p.NH + h) * p.T + r0 + r;
        Ls[r] = ok ? p.lse[row] * kLog2e : 0.f;
        Ds[r] = ok ? p.D[row] : 0.f;
      }
      __syncthreads();

      // S^T = K Q^T and dP^T = V dO^T in one pass over d.
      float s[MI][MJ], dp[MI][MJ];
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < MJ; j++) s[i][j] = dp[i][j] = 0.f;
#pragma unroll 2
      for (int d = 0; d < HD; d += 4) {
        float4 ka[MI], va[MI], qa[MJ], ga[MJ];
#pragma unroll
        for (int i = 0; i < MI; i++) {
          ka[i] = lds4(Ks + (cy + CY * i) * LD + d);
          va[i] = lds4(Vs + (cy + CY * i) * LD + d);
        }
#pragma unroll
        for (int j = 0; j < MJ; j++) {
          qa[j] = lds4(Qs + (rx + RX * j) * LD + d);
          ga[j] = lds4(Gs + (rx + RX * j) * LD + d);
        }
#pragma unroll
        for (int i = 0; i < MI; i++)
#pragma unroll
          for (int j = 0; j < MJ; j++) {
            s[i][j] = dot4(s[i][j], ka[i], qa[j]);
            dp[i][j] = dot4(dp[i][j], va[i], ga[j]);
          }
      }
      // P (zero where the query precedes the key or lies past T), dS = P (dP - D) kept in dp.
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < MJ; j++) {
          const int c = c0 + cy + CY * i, rl = rx + RX * j, r = r0 + rl;
          const float pv = (r >= c && r < p.T) ? exp2f(s[i][j] - Ls[rl]) : 0.f;
          dp[i][j] = pv * (dp[i][j] - Ds[rl]);
          Ps[(cy + CY * i) * LDP + rl] = pv;
        }
      __syncthreads();

      // dV += P^T dO over this tile's queries.
#pragma unroll 2
      for (int r = 0; r < BQ; r += 4) {
        float4 pa[MI];
#pragma unroll
        for (int i = 0; i < MI; i++) pa[i] = lds4(Ps + (cy + CY * i) * LDP + r);
#pragma unroll
        for (int rr = 0; rr < 4; rr++)
#pragma unroll
          for (int g = 0; g < NG; g++) {
            const int col = rx + RX * g;
            if (col < HG) {
              const float4 ga = lds4(Gs + (r + rr) * LD + 4 * col);
#pragma unroll
              for (int i = 0; i < MI; i++) {
                const float pv = comp(pa[i], rr);
                dv[i][4 * g + 0] = fmaf(pv, ga.x, dv[i][4 * g + 0]);
                dv[i][4 * g + 1] = fmaf(pv, ga.y, dv[i][4 * g + 1]);
                dv[i][4 * g + 2] = fmaf(pv, ga.z, dv[i][4 * g + 2]);
                dv[i][4 * g + 3] = fmaf(pv, ga.w, dv[i][4 * g + 3]);
              }
            }
          }
      }
      __syncthreads();  // P^T is read: the buffer takes dS^T
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < MJ; j++) Ps[(cy + CY * i) * LDP + rx + RX * j] = dp[i][j];
      __syncthreads();

      // dK += dS^T Qs (scaled at the end).
#pragma unroll 2
      for (int r = 0; r < BQ; r += 4) {
        float4 pa[MI];
#pragma unroll
        for (int i = 0; i < MI; i++) pa[i] = lds4(Ps + (cy + CY * i) * LDP + r);
#pragma unroll
        for (int rr = 0; rr < 4; rr++)
#pragma unroll
          for (int g = 0; g < NG; g++) {
            const int col = rx + RX * g;
            if (col < HG) {
              const float4 qa = lds4(Qs + (r + rr) * LD + 4 * col);
#pragma unroll
              for (int i = 0; i < MI; i++) {
                const float ds = comp(pa[i], rr);
                dk[i][4 * g + 0] = fmaf(ds, qa.x, dk[i][4 * g + 0]);
                dk[i][4 * g + 1] = fmaf(ds, qa.y, dk[i][4 * g + 1]);
                dk[i][4 * g + 2] = fmaf(ds, qa.z, dk[i][4 * g + 2]);
                dk[i][4 * g + 3] = fmaf(ds, qa.w, dk[i][4 * g + 3]);
              }
            }
          }
      }

      // dQ += scale dS K: unit u = (4 query rows rg, 4 columns dg); consecutive threads take consecutive
      // column groups, so K reads and the atomics are contiguous.
#pragma unroll
      for (int n = 0; n < NU; n++) {
        const int u = threadIdx.x + NT * n, dg = u % HG, rg = u / HG;
        if (rg >= BQ / 4) continue;
        float acc[4][4] = {};
        for (int c = 0; c < BK; c++) {
          const float4 dsa = lds4(Ps + c * LDP + 4 * rg);
          const float4 ka = lds4(Ks + c * LD + 4 * dg);
#pragma unroll
          for (int rr = 0; rr < 4; rr++) {
            const float ds = comp(dsa, rr);
            acc[rr][0] = fmaf(ds, ka.x, acc[rr][0]);
            acc[rr][1] = fmaf(ds, ka.y, acc[rr][1]);
            acc[rr][2] = fmaf(ds, ka.z, acc[rr][2]);
            acc[rr][3] = fmaf(ds, ka.w, acc[rr][3]);
          }
        }
#pragma unroll
        for (int rr = 0; rr < 4; rr++) {
          const int r = r0 + 4 * rg + rr;
          if (r >= p.T) break;
          float* dst = p.dq_acc + ((int64_t(b) * p.T + r) * p.NH + h) * HD + 4 * dg;
#pragma unroll
          for (int e = 0; e < 4; e++) atomicAdd(dst + e, p.scale * acc[rr][e]);
        }
      }
    }

#pragma unroll
  for (int i = 0; i < MI; i++) {
    const int c = c0 + cy + CY * i;
    if (c >= p.T) continue;
    const int64_t base = ((int64_t(b) * p.T + c) * p.NKV + kvh) * HD;
#pragma unroll
    for (int g = 0; g < NG; g++) {
      const int col = rx + RX * g;
      if (col < HG)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          p.dk[base + 4 * col + e] = from_f32<T>(dk[i][4 * g + e] * kLn2);
          p.dv[base + 4 * col + e] = from_f32<T>(dv[i][4 * g + e]);
        }
    }
  }
}

template <class T>
__global__ void cast_f32_kernel(const float* __restrict__ x, T* __restrict__ y, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = from_f32<T>(x[i]);
}

template <class T, int HD>
void launch(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
            const Tensor& lse, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  using Tr = BwdTraits<HD>;
  const int B = int(q.size(0)), Tn = int(q.size(1)), NH = int(q.size(2)), NKV = int(k.size(2));
  const int64_t rows = int64_t(B) * Tn * NH;
  Tensor D = Tensor::empty({B, NH, Tn}, DType::f32, q.device());
  attention_rowdot_kernel<T, HD><<<gpu::ceil_div(rows, 256 / gpu::kWarpSize), 256, 0, gpu::stream()>>>(
      dout.data<T>(), out.data<T>(), D.data<float>(), rows, Tn, NH);
  ANVIL_LAUNCH_CHECK();

  constexpr bool f32 = std::is_same_v<T, float>;
  Tensor dq_acc = f32 ? dq : Tensor::empty(q.shape(), DType::f32, q.device());
  gpu::memset_async(dq_acc.data_ptr(), 0, dq_acc.nbytes());

  BwdParams<T> p;
  static_cast<FwdParams<T>&>(p) = FwdParams<T>{q.data<T>(), k.data<T>(), v.data<T>(), nullptr, nullptr, B, Tn, NH,
                                               NKV, scale};
  p.lse = const_cast<float*>(lse.data<float>());
  p.dout = dout.data<T>();
  p.D = D.data<float>();
  p.dq_acc = dq_acc.data<float>();
  p.dk = dk.data<T>();
  p.dv = dv.data<T>();
  const dim3 grid(unsigned(B * NKV), unsigned(gpu::ceil_div(Tn, Tr::BK)));
  auto kernel = attention_bwd_kernel<T, HD>;
  allow_smem(kernel, Tr::smem_bytes);
  kernel<<<grid, Tr::NT, Tr::smem_bytes, gpu::stream()>>>(p);
  ANVIL_LAUNCH_CHECK();

  if constexpr (!f32) {
    const int64_t n = dq.numel();
    const int blocks = int(std::min<int64_t>(gpu::ceil_div(n, 256), 8 * 1024));
    cast_f32_kernel<T><<<blocks, 256, 0, gpu::stream()>>>(dq_acc.data<float>(), dq.data<T>(), n);
    ANVIL_LAUNCH_CHECK();
  }
}

}  // namespace

void attention_bwd_gpu(const Tensor& dout, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                       const Tensor& lse, float scale, Tensor& dq, Tensor& dk, Tensor& dv) {
  const int64_t B = q.size(0), T = q.size(1), NKV = k.size(2), HD = q.size(3);
  // Grid: x = B * NKV, y = key blocks of at least 32 rows (up to 65535).
  ANVIL_CHECK(B * NKV < (int64_t(1) << 31) && T <= 65535 * int64_t(32), "attention_bwd",
              "B*NKV < 2^31 and T <= 2097120", q.describe());
  ANVIL_DISPATCH_FLOAT(q.dtype(), T_, {
    switch (HD) {
      case 16: launch<T_, 16>(dout, q, k, v, out, lse, scale, dq, dk, dv); break;  // small models (tests, tiny parity runs)
      case 32: launch<T_, 32>(dout, q, k, v, out, lse, scale, dq, dk, dv); break;
      case 64: launch<T_, 64>(dout, q, k, v, out, lse, scale, dq, dk, dv); break;
      case 80: launch<T_, 80>(dout, q, k, v, out, lse, scale, dq, dk, dv); break;
      case 96: launch<T_, 96>(dout, q, k, v, out, lse, scale, dq, dk, dv); break;
      case 128: launch<T_, 128>(dout, q, k, v, out, lse, scale, dq, dk, dv); break;
      default: ANVIL_THROW("attention_bwd", "HD in {16, 32, 64, 80, 96, 128}", HD);
    }
  });
}

}  // namespace anvil
