// The op harness: every op x backend x dtype against its scalar fp64 reference.
// Each case has a stable id such as "rms_norm(bf16,[64,4096],eps=1e-5)" and up to three modes:
//   test  forward (and backward) of the backend against the reference, tolerance derived from the dtype
//   grad  the reference backward against central finite differences of the reference forward (fp64), then the
//         backend backward against the reference backward
//   perf  time on the backend, achieved GB/s or TFLOP/s
// Inputs are seeded (seed printed on failure, --seed sets it) and never zeros.
#pragma once
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"

namespace anvil::test {

struct Ctx {
  Device device;
  uint64_t seed;
  bool verbose = false;
};

// The result of one comparison: error relative to the tolerance (<= 1 passes) and a human-readable line.
struct Check {
  bool ok = true;
  std::string detail;
};

struct PerfResult {
  double us = 0;      // median microseconds per call
  double bytes = 0;   // bytes moved (each input read once, each output written once)
  double flops = 0;
  std::string shape;  // what was timed, when it differs from the case id ("[8192,4096]")
  double graph_us = 0;  // short cases: µs per launch in a graph of launches on distinct inputs (time_us_graph)
};

struct OpCase {
  std::string op;     // folder name under src/kernels
  std::string id;     // stable id, printed in every line
  std::function<std::vector<Check>(const Ctx&)> test;  // may be empty
  std::function<std::vector<Check>(const Ctx&)> grad;  // may be empty
  std::function<PerfResult(const Ctx&)> perf;          // may be empty
};

// Cases register themselves from each tests/ops/<op>_cases.cpp through a static Registrar.
std::vector<OpCase>& registry();
struct Registrar {
  explicit Registrar(std::vector<OpCase> (*make)()) {
    for (auto& c : make()) registry().push_back(std::move(c));
  }
};

// ---- inputs ------------------------------------------------------------------------------------------
// n values ~ U(lo, hi) from stream (seed, salt), rounded to `dtype` so the reference sees exactly what the
// kernel sees.
std::vector<float> rand_uniform(size_t n, uint64_t seed, uint64_t salt, float lo, float hi, DType dtype);
std::vector<float> rand_normal(size_t n, uint64_t seed, uint64_t salt, float stddev, DType dtype);
std::vector<double> to_double(const std::vector<float>& v);
// A device tensor holding `v` in `dtype`.
Tensor make(const std::vector<float>& v, const Shape& shape, DType dtype, Device d);

// ---- tolerances --------------------------------------------------------------------------------------
// An output that is rounded once into `dtype` after an fp32 computation whose longest reduction has `k_len`
// terms errs by about u(dtype) + sqrt(k_len)*u(f32) relative to the value's scale. We allow `factor` times
// that (2 for outputs, 3 for gradients), measured against the fp64 reference:
//   |out - ref| <= tol * (|ref| + rms(ref)),  tol = factor * (u(dtype) + sqrt(k_len) * u(f32))
// The rms term keeps elements near zero (cancellation) from failing on absolute noise.
double derived_tol(DType out_dtype, double k_len, double factor);
Check compare(const std::string& what, const std::vector<float>& out, const std::vector<double>& ref, double tol);
Check compare(const std::string& what, const Tensor& out, const std::vector<double>& ref, double tol);
// Integer outputs (ids, counts, codes): every element equal.
Check equal_ints(const std::string& what, const Tensor& out, const std::vector<int32_t>& ref);

// Bad-input checks: passes when `fn` throws anvil::Error whose message contains `needle`; fails naming what
// happened instead (no error, another message, another exception type). Both argument orders are accepted.
Check expect_error(const std::string& what, const std::string& needle, const std::function<void()>& fn);
Check expect_error(const std::string& what, const std::function<void()>& fn, const std::string& needle);

// Central finite differences of scalar L(x) = sum(f(x) * g) for the i-th input, in fp64.
// `f` maps the full input vector to the output vector; g is the upstream gradient.
std::vector<double> finite_diff(const std::function<std::vector<double>(const std::vector<double>&)>& f,
                                const std::vector<double>& x, const std::vector<double>& g, double h = 1e-6);

// Times `fn` on the backend of ctx (device events on GPU, each rep behind a 256 MiB read that evicts L2 and keeps
// the GPU busy while the rep is enqueued; steady_clock on CPU): median of `reps` after warmup.
double time_us(const Ctx& ctx, const std::function<void()>& fn, int reps = 20);
// For kernels of a few µs, as a decode step runs them: `count` launches fn(0) .. fn(count-1), each on its own
// inputs, captured as one graph and replayed behind the same L2-evicting read; the median per launch. GPU only
// (0 elsewhere). METHOD: many small launches are timed as graph replays, which removes the host's launch gaps.
double time_us_graph(const Ctx& ctx, int count, const std::function<void(int)>& fn, int reps = 20);

std::string fmt_g(double v);  // short %g formatting for ids

}  // namespace anvil::test
