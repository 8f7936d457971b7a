// GPU attention forward, flash-attention style in plain fp32 FMA (no tensor cores, so it compiles unchanged
// for sm_90 and gfx90a). One block = 64 query rows of one (b, head); it walks the key/value tiles of 32 rows
// that the causal mask leaves, keeping the running max m, running sum l and the output accumulator in
// registers; the T x T scores never exist. Writes out and lse (natural log).
//
// Thread layout (128 threads = 4 warps of 32 or 2 wavefronts of 64): thread (ty, tx), tx = tid % 8 owns
// score columns tx + 8j (j < 4) and ty = tid / 8 owns rows ty + 16i (i < 4); the 8 lanes sharing a row are
// consecutive, so row max/sum are 3 shuffles of width 8 (within any warp width). For P V the same thread
// owns rows ty + 16i and the float4 column groups tx + 8g of the output.
//
// Shared memory (f32): Q (64, HD+4), one K-or-V buffer (32, HD+4) loaded twice per tile, P (64, 40):
// 60.9 KB at HD = 128, under the 64 KB LDS of gfx90a. K and V share a buffer for that reason.
#include "kernels/attention/attention_gpu.cuh"  // first: it brings the vendor runtime that core/ headers need
#include "core/dispatch.h"
#include "kernels/attention/attention.h"

namespace anvil {
namespace {

using namespace attn;

template <int HD>
struct FwdTraits {
  static constexpr int BQ = 64, BK = 32, NT = 128;
  static constexpr int RX = 8, RY = NT / RX;         // lanes along a row, row groups
  static constexpr int MI = BQ / RY, MJ = BK / RX;   // 4 x 4 scores per thread
  static constexpr int LD = HD + 4, LDP = BK + 8;    // P rows padded by 8: the 4 row groups of a warp's
                                                     // scalar stores land in distinct banks
  static constexpr int NG = (HD / 4 + RX - 1) / RX;  // float4 output column groups per thread (2..4)
  static constexpr size_t smem_bytes = sizeof(float) * (BQ * LD + BK * LD + BQ * LDP);
  static_assert(HD % 4 == 0, "HD must be a multiple of 4");
};

template <class T, int HD>
__global__ void __launch_bounds__(128) attention_fwd_kernel(FwdParams<T> p) {
  using Tr = FwdTraits<HD>;
  constexpr int BQ = Tr::BQ, BK = Tr::BK, NT = Tr::NT, RX = Tr::RX, RY = Tr::RY, MI = Tr::MI, MJ = Tr::MJ;
  constexpr int LD = Tr::LD, LDP = Tr::LDP, NG = Tr::NG;
  extern __shared__ float4 smem4[];
  float* Qs = reinterpret_cast<float*>(smem4);
  float* KVs = Qs + BQ * LD;
  float* Ps = KVs + BK * LD;

  const int bh = blockIdx.x, b = bh / p.NH, h = bh % p.NH, kvh = h / (p.NH / p.NKV);
  const int q0 = (gridDim.y - 1 - blockIdx.y) * BQ;  // the longest causal ranges start first
  const int tx = threadIdx.x % RX, ty = threadIdx.x / RX;

  // Q pre-scaled by scale * log2(e): scores come out in base 2.
  load_tile<T, HD, BQ, NT>(Qs, p.q, b, q0, h, p.T, p.NH, p.scale * kLog2e);

  float o[MI][NG * 4], m[MI], l[MI];
#pragma unroll
  for (int i = 0; i < MI; i++) {
    m[i] = -INFINITY;
    l[i] = 0.f;  // this thread's part of the row sum; the 8 lanes are added at the end
#pragma unroll
    for (int e = 0; e < NG * 4; e++) o[i][e] = 0.f;
  }

  const int kend = min(q0 + BQ, p.T);  // keys [kend, T) are in the future of every row here: skipped
  for (int k0 = 0; k0 < kend; k0 += BK) {
    __syncthreads();  // the previous tile's P V is done with KVs and Ps
    load_tile<T, HD, BK, NT>(KVs, p.k, b, k0, kvh, p.T, p.NKV, 1.f);
    __syncthreads();

    float s[MI][MJ];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
      for (int j = 0; j < MJ; j++) s[i][j] = 0.f;
#pragma unroll 4
    for (int d = 0; d < HD; d += 4) {
      float4 qa[MI], ka[MJ];
#pragma unroll
      for (int i = 0; i < MI; i++) qa[i] = lds4(Qs + (ty + RY * i) * LD + d);
#pragma unroll
      for (int j = 0; j < MJ; j++) ka[j] = lds4(KVs + (tx + RX * j) * LD + d);
#pragma unroll
      for (int i = 0; i < MI; i++)
#pragma unroll
        for (int j = 0; j < MJ; j++) s[i][j] = dot4(s[i][j], qa[i], ka[j]);
    }

    // Causal mask (column after row) and the tail past T; then the online softmax update per row.
    const bool need_mask = k0 + BK > q0 || k0 + BK > p.T;
#pragma unroll
    for (int i = 0; i < MI; i++) {
      const int r = q0 + ty + RY * i;
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < MJ; j++) {
        const int c = k0 + tx + RX * j;
        if (need_mask && (c > r || c >= p.T)) s[i][j] = -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      mx = gpu::warp_max<RX>(mx);
      const float m_new = fmaxf(m[i], mx);
      // Every row sees key 0 in the first tile, so m_new is finite from there on; the guard keeps a
      // fully masked row from computing -inf - -inf.
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      const float alpha = exp2f(m[i] - m_use);
      m[i] = m_new;
      l[i] *= alpha;
#pragma unroll
      for (int e = 0; e < NG * 4; e++) o[i][e] *= alpha;
#pragma unroll
      for (int j = 0; j < MJ; j++) {
        s[i][j] = exp2f(s[i][j] - m_use);
        l[i] += s[i][j];
        Ps[(ty + RY * i) * LDP + tx + RX * j] = s[i][j];
      }
    }
    __syncthreads();  // all scores read K: the buffer can take V
    load_tile<T, HD, BK, NT>(KVs, p.v, b, k0, kvh, p.T, p.NKV, 1.f);
    __syncthreads();

#pragma unroll 2
    for (int c = 0; c < BK; c += 4) {
      float4 pa[MI];
#pragma unroll
      for (int i = 0; i < MI; i++) pa[i] = lds4(Ps + (ty + RY * i) * LDP + c);
#pragma unroll
      for (int cc = 0; cc < 4; cc++)
#pragma unroll
        for (int g = 0; g < NG; g++) {
          const int col = tx + RX * g;  // float4 column group
          if (col < HD / 4) {
            const float4 va = lds4(KVs + (c + cc) * LD + 4 * col);
#pragma unroll
            for (int i = 0; i < MI; i++) {
              const float pv = comp(pa[i], cc);
              o[i][4 * g + 0] = fmaf(pv, va.x, o[i][4 * g + 0]);
              o[i][4 * g + 1] = fmaf(pv, va.y, o[i][4 * g + 1]);
              o[i][4 * g + 2] = fmaf(pv, va.z, o[i][4 * g + 2]);
              o[i][4 * g + 3] = fmaf(pv, va.w, o[i][4 * g + 3]);
            }
          }
        }
    }
  }

#pragma unroll
  for (int i = 0; i < MI; i++) {
    const float lsum = gpu::warp_sum<RX>(l[i]);
    const int r = q0 + ty + RY * i;
    if (r >= p.T) continue;
    const float inv = 1.f / lsum;
    T* orow = p.out + ((int64_t(b) * p.T + r) * p.NH + h) * HD;
#pragma unroll
    for (int g = 0; g < NG; g++) {
      const int col = tx + RX * g;
      if (col < HD / 4)
#pragma unroll
        for (int e = 0; e < 4; e++) orow[4 * col + e] = from_f32<T>(o[i][4 * g + e] * inv);
    }
    if (tx == 0) p.lse[(int64_t(b) * p.NH + h) * p.T + r] = (m[i] + log2f(lsum)) * kLn2;
  }
}

template <class T, int HD>
void launch(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse) {
  using Tr = FwdTraits<HD>;
  FwdParams<T> p{q.data<T>(), k.data<T>(), v.data<T>(), out.data<T>(), lse.data<float>(),
                 int(q.size(0)), int(q.size(1)), int(q.size(2)), int(k.size(2)), scale};
  const dim3 grid(unsigned(p.B * p.NH), unsigned(gpu::ceil_div(p.T, Tr::BQ)));
  auto kernel = attention_fwd_kernel<T, HD>;
  allow_smem(kernel, Tr::smem_bytes);
  kernel<<<grid, Tr::NT, Tr::smem_bytes, gpu::stream()>>>(p);
  ANVIL_LAUNCH_CHECK();
}

}  // namespace

void attention_fwd_gpu(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, Tensor& lse) {
  const int64_t B = q.size(0), T = q.size(1), NH = q.size(2), HD = q.size(3);
  // Grid: x = B * NH (up to 2^31 - 1), y = query blocks of 64 (up to 65535).
  ANVIL_CHECK(B * NH < (int64_t(1) << 31) && T <= 65535 * int64_t(FwdTraits<64>::BQ), "attention_fwd",
              "B*NH < 2^31 and T <= 4194240", q.describe());
  ANVIL_DISPATCH_FLOAT(q.dtype(), T_, {
    switch (HD) {
      case 16: launch<T_, 16>(q, k, v, scale, out, lse); break;  // small models (tests, tiny parity runs)
      case 32: launch<T_, 32>(q, k, v, scale, out, lse); break;
      case 64: launch<T_, 64>(q, k, v, scale, out, lse); break;
      case 80: launch<T_, 80>(q, k, v, scale, out, lse); break;
      case 96: launch<T_, 96>(q, k, v, scale, out, lse); break;
      case 128: launch<T_, 128>(q, k, v, scale, out, lse); break;
      default: ANVIL_THROW("attention_fwd", "HD in {16, 32, 64, 80, 96, 128}", HD);
    }
  });
}

}  // namespace anvil
