// The CPU backwards that sum over rows or channels (rms_norm, add_rms_norm: dw; selective_scan: dB, dC) give the
// same bits for any thread count (backends/cpu/chunked_sum.h). Each is run with 1, 2, 3 and 5 threads on seeded
// inputs whose row count is not a multiple of the chunk count, and every output is compared bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <vector>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/add_rms_norm/add_rms_norm.h"
#include "kernels/rms_norm/rms_norm.h"
#include "kernels/selective_scan/selective_scan.h"

namespace anvil {
namespace {

Tensor seeded(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * float(s >> 8) / float(1u << 24);
  }
  return Tensor::from_floats(v, shape, DType::f32, Device::cpu());
}

std::vector<uint32_t> bits(const Tensor& t) {
  auto f = t.to_floats();
  std::vector<uint32_t> b(f.size());
  std::memcpy(b.data(), f.data(), f.size() * sizeof(float));
  return b;
}

// Runs `op` (which returns its outputs) with several thread counts; all must match the 1-thread run.
void expect_same_bits_for_any_thread_count(const std::function<std::vector<Tensor>()>& op) {
#ifndef _OPENMP
  GTEST_SKIP() << "built without OpenMP";
#else
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  std::vector<std::vector<uint32_t>> want;
  for (auto& t : op()) want.push_back(bits(t));
  for (int threads : {2, 3, 5}) {
    omp_set_num_threads(threads);
    for (int rep = 0; rep < 2; rep++) {
      auto got = op();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); i++)
        EXPECT_TRUE(bits(got[i]) == want[i]) << "output " << i << " differs with " << threads << " threads";
    }
  }
  omp_set_num_threads(before);
#endif
}

TEST(CpuDeterminism, RmsNormBackward) {
  const int64_t N = 77, C = 96;  // 77 rows: not a multiple of the 32 chunks
  Tensor x = seeded({N, C}, 1), w = seeded({C}, 2), dy = seeded({N, C}, 3);
  expect_same_bits_for_any_thread_count([&] {
    Tensor y = Tensor::empty({N, C}, DType::f32, Device::cpu()), rstd = Tensor::empty({N}, DType::f32, Device::cpu());
    rms_norm_fwd(x, w, 1e-5f, y, rstd);
    Tensor dx = Tensor::empty({N, C}, DType::f32, Device::cpu()), dw = Tensor::zeros({C}, DType::f32, Device::cpu());
    rms_norm_bwd(dy, x, w, rstd, dx, dw);
    return std::vector<Tensor>{dx, dw};
  });
}

TEST(CpuDeterminism, AddRmsNormBackward) {
  const int64_t N = 45, C = 64;
  Tensor a = seeded({N, C}, 4), b = seeded({N, C}, 5), w = seeded({C}, 6), dy = seeded({N, C}, 7),
         dh_in = seeded({N, C}, 8);
  expect_same_bits_for_any_thread_count([&] {
    Tensor h = Tensor::empty({N, C}, DType::f32, Device::cpu()), y = Tensor::empty({N, C}, DType::f32, Device::cpu());
    Tensor rstd = Tensor::empty({N}, DType::f32, Device::cpu());
    add_rms_norm_fwd(a, b, w, 1e-5f, h, y, rstd);
    Tensor dh = Tensor::empty({N, C}, DType::f32, Device::cpu()), dw = Tensor::zeros({C}, DType::f32, Device::cpu());
    add_rms_norm_bwd(dy, dh_in, h, w, rstd, dh, dw);
    return std::vector<Tensor>{dh, dw};
  });
}

TEST(CpuDeterminism, SelectiveScanBackward) {
  const int64_t B = 2, D = 37, L = 50, N = 8, G = 1;  // 37 channels, one group: dB/dC sum over all of them
  Tensor u = seeded({B, D, L}, 9), delta = seeded({B, D, L}, 10, -2.f, 1.f), A = seeded({D, N}, 11, -2.f, -0.1f);
  Tensor Bm = seeded({B, G, N, L}, 12), Cm = seeded({B, G, N, L}, 13), Dk = seeded({D}, 14), z = seeded({B, D, L}, 15);
  Tensor db = seeded({D}, 16), dout = seeded({B, D, L}, 17);
  const int64_t chunks = selective_scan_states(L, N);
  expect_same_bits_for_any_thread_count([&] {
    auto E = [](const Shape& s) { return Tensor::empty(s, DType::f32, Device::cpu()); };
    auto Z = [](const Shape& s) { return Tensor::zeros(s, DType::f32, Device::cpu()); };
    Tensor out = E({B, D, L}), states = E({B, D, chunks, N});
    selective_scan_fwd(u, delta, A, Bm, Cm, Dk, z, db, true, out, states);
    Tensor du = E({B, D, L}), ddelta = E({B, D, L}), dA = Z({D, N}), dB = E({B, G, N, L}), dC = E({B, G, N, L});
    Tensor dD = Z({D}), dz = E({B, D, L}), ddb = Z({D});
    selective_scan_bwd(dout, u, delta, A, Bm, Cm, Dk, z, db, true, states, du, ddelta, dA, dB, dC, dD, dz, ddb);
    return std::vector<Tensor>{du, ddelta, dA, dB, dC, dD, dz, ddb};
  });
}

// The backward's recomputed output (its `out` argument) equals the forward's to the bit on the CPU
// (selective_scan.h): both take the same step function, whose sum over states has a fixed order. N = 16 (whole
// groups of 4 running sums) and N = 7 (a tail); f32 and bf16 (the output rounded once more).
TEST(CpuDeterminism, SelectiveScanBackwardOutputEqualsTheForwards) {
  for (int64_t N : {16, 7})
    for (DType dt : {DType::f32, DType::bf16}) {
      const int64_t B = 2, D = 5, L = 70, G = 1;
      auto in = [&](const Shape& s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
        return Tensor::from_floats(seeded(s, seed, lo, hi).to_floats(), s, dt, Device::cpu());
      };
      Tensor u = in({B, D, L}, 21), delta = in({B, D, L}, 22, -2.f, 1.f), A = seeded({D, N}, 23, -2.f, -0.1f);
      Tensor Bm = in({B, G, N, L}, 24), Cm = in({B, G, N, L}, 25), Dk = seeded({D}, 26), z = in({B, D, L}, 27);
      Tensor db = seeded({D}, 28), dout = in({B, D, L}, 29);
      auto E = [&](const Shape& s, DType t) { return Tensor::empty(s, t, Device::cpu()); };
      Tensor out = E({B, D, L}, dt), states = E({B, D, selective_scan_states(L, N), N}, DType::f32);
      selective_scan_fwd(u, delta, A, Bm, Cm, Dk, z, db, true, out, states);
      Tensor du = E({B, D, L}, dt), ddelta = E({B, D, L}, dt), dB = E({B, G, N, L}, dt), dC = E({B, G, N, L}, dt);
      Tensor dA = Tensor::zeros({D, N}, DType::f32, Device::cpu()), dD = Tensor::zeros({D}, DType::f32, Device::cpu());
      Tensor ddb = Tensor::zeros({D}, DType::f32, Device::cpu()), dz = E({B, D, L}, dt), out2 = E({B, D, L}, dt);
      selective_scan_bwd(dout, u, delta, A, Bm, Cm, Dk, z, db, true, states, du, ddelta, dA, dB, dC, dD, dz, ddb,
                         &out2);
      EXPECT_EQ(bits(out2), bits(out)) << "N = " << N << ", " << dtype_name(dt);
    }
}

}  // namespace
}  // namespace anvil
