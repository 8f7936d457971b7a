#include "harness.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#ifdef ANVIL_HAS_GPU
#include "backends/gpu/runtime.h"
#include "kernels/elementwise/elementwise.h"
#endif

namespace anvil::test {

std::vector<OpCase>& registry() {
  static std::vector<OpCase> r;
  return r;
}

// Counter-based, so the threads' split does not change a value. Threaded because the perf cases draw up to 525 M
// values (the 8B LM head): ~50 s on one core of the H200 machine, for every case of that shape.
std::vector<float> rand_uniform(size_t n, uint64_t seed, uint64_t salt, float lo, float hi, DType dtype) {
  std::vector<float> v(n);
  const uint64_t s = seed * 0x9E3779B97F4A7C15ull + salt;
#pragma omp parallel for schedule(static) if (n > (1 << 20))
  for (size_t i = 0; i < n; i++) v[i] = round_to(dtype, lo + (hi - lo) * rng_uniform(s, i));
  return v;
}
std::vector<float> rand_normal(size_t n, uint64_t seed, uint64_t salt, float stddev, DType dtype) {
  std::vector<float> v(n);
  const uint64_t s = seed * 0x9E3779B97F4A7C15ull + salt;
#pragma omp parallel for schedule(static) if (n > (1 << 20))
  for (size_t i = 0; i < n; i++) v[i] = round_to(dtype, stddev * rng_normal(s, i));
  return v;
}
std::vector<double> to_double(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }
Tensor make(const std::vector<float>& v, const Shape& shape, DType dtype, Device d) {
  return Tensor::from_floats(v, shape, dtype, d);
}

double derived_tol(DType out_dtype, double k_len, double factor) {
  return factor * (dtype_unit_roundoff(out_dtype) + std::sqrt(std::max(1.0, k_len)) * 0x1p-24);
}

Check compare(const std::string& what, const std::vector<float>& out, const std::vector<double>& ref, double tol) {
  Check c;
  if (out.size() != ref.size()) {
    c.ok = false;
    c.detail = str(what, ": ", out.size(), " elements, reference has ", ref.size());
    return c;
  }
  double ss = 0;
  for (double r : ref) ss += r * r;
  const double rms = ref.empty() ? 0 : std::sqrt(ss / double(ref.size()));
  double worst = 0;
  size_t wi = 0;
  for (size_t i = 0; i < out.size(); i++) {
    double err = std::fabs(double(out[i]) - ref[i]);
    double bound = tol * (std::fabs(ref[i]) + rms) + 1e-300;
    double ratio = std::isnan(out[i]) ? INFINITY : err / bound;
    if (ratio > worst || std::isnan(ratio)) {
      worst = std::isnan(ratio) ? INFINITY : ratio;
      wi = i;
    }
  }
  c.ok = worst <= 1.0;
  c.detail = str(what, ": worst err/bound ", fmt_g(worst), " at [", wi, "] got ", out.empty() ? 0.f : out[wi],
                 " ref ", ref.empty() ? 0.0 : ref[wi], " (tol ", fmt_g(tol), ", rms ", fmt_g(rms), ")");
  return c;
}
Check expect_error(const std::string& what, const std::string& needle, const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    const bool ok = std::string(e.what()).find(needle) != std::string::npos;
    return {ok, str(what, ": ", e.what(), ok ? "" : str(" (expected to mention '", needle, "')"))};
  } catch (const std::exception& e) {
    return {false, str(what, ": not an anvil::Error: ", e.what())};
  }
  return {false, str(what, ": no error (expected one naming '", needle, "')")};
}
Check expect_error(const std::string& what, const std::function<void()>& fn, const std::string& needle) {
  return expect_error(what, needle, fn);
}

Check compare(const std::string& what, const Tensor& out, const std::vector<double>& ref, double tol) {
  return compare(what, out.to_floats(), ref, tol);
}

Check equal_ints(const std::string& what, const Tensor& t, const std::vector<int32_t>& ref) {
  if (size_t(t.numel()) != ref.size()) return {false, str(what, ": ", t.numel(), " elements, expected ", ref.size())};
  Tensor h = t.contiguous().to(Device::cpu());
  const int32_t* p = h.data<int32_t>();
  for (size_t i = 0; i < ref.size(); i++)
    if (p[i] != ref[i]) return {false, str(what, "[", i, "] = ", p[i], ", expected ", ref[i])};
  return {true, str(what, ": ", ref.size(), " equal")};
}

std::vector<double> finite_diff(const std::function<std::vector<double>(const std::vector<double>&)>& f,
                                const std::vector<double>& x, const std::vector<double>& g, double h) {
  std::vector<double> d(x.size());
  std::vector<double> xp = x;
  for (size_t i = 0; i < x.size(); i++) {
    const double step = h * std::max(1.0, std::fabs(x[i]));
    xp[i] = x[i] + step;
    auto fp = f(xp);
    xp[i] = x[i] - step;
    auto fm = f(xp);
    xp[i] = x[i];
    double s = 0;
    for (size_t j = 0; j < fp.size(); j++) s += (fp[j] - fm[j]) * g[j];
    d[i] = s / (2 * step);
  }
  return d;
}

namespace {
double median_of(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t.empty() ? 0.0 : t[t.size() / 2];
}
}  // namespace

#ifdef ANVIL_HAS_GPU
namespace {
// Each rep starts behind a read of 256 MiB (the amax op over a bf16 buffer), as triton's do_bench starts behind
// a cache-clearing pass: the case's inputs leave L2 (H200: 50 MB; a 33 MB projection would otherwise be read
// from it on every rep after the first), and the GPU is busy while the host enqueues the start event and the
// case's launches (events around a launch on an idle GPU also time the launch's way there, ~5-9 µs: the
// causal_conv1d forward measured 52.9 µs that way, 43.9 µs in Nsight Compute). A read, not a memset: a memset
// leaves L2 full of dirty lines whose write-back shares HBM with the timed kernel. ANVIL_PERF_FLUSH=0: the old
// way (events around the launch on an idle GPU, inputs warm in L2), for comparison.
void flush_l2(const Ctx& ctx) {
  static const bool flush_on = [] {
    const char* e = std::getenv("ANVIL_PERF_FLUSH");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  if (!flush_on) return;
  // Kept to exit (the device may be gone by the time static destructors would run).
  static Tensor* flush = new Tensor(Tensor::zeros({int64_t(128) << 20}, DType::bf16, ctx.device));
  static Tensor* flush_max = new Tensor(Tensor::empty({1}, DType::f32, ctx.device));
  amax(*flush, *flush_max);
}
// Median of `reps` event-timed runs of fn, each behind flush_l2.
double median_gpu_us(const Ctx& ctx, const std::function<void()>& fn, int reps) {
  std::vector<double> t;
  auto a = gpu::event_create(), b = gpu::event_create();
  for (int i = 0; i < reps; i++) {
    flush_l2(ctx);
    gpu::event_record(a, gpu::current_stream());
    fn();
    gpu::event_record(b, gpu::current_stream());
    gpu::event_synchronize(b);
    t.push_back(1e3 * gpu::event_elapsed_ms(a, b));
  }
  gpu::event_destroy(a);
  gpu::event_destroy(b);
  return median_of(std::move(t));
}
}  // namespace
#endif

double time_us_graph(const Ctx& ctx, int count, const std::function<void(int)>& fn, int reps) {
#ifdef ANVIL_HAS_GPU
  if (ctx.device.is_gpu()) {
    for (int i = 0; i < count; i++) fn(i);  // warm-up outside the capture (lazy module loads, first-use setup)
    gpu::capture_begin();
    try {
      for (int i = 0; i < count; i++) fn(i);
    } catch (...) {
      try {  // leave the stream out of capture for the cases after this one; the case's own error is the report
        gpu::graph_destroy(gpu::capture_end());
      } catch (...) {
      }
      throw;
    }
    gpu::GraphHandle g = gpu::capture_end();
    gpu::graph_launch(g);
    const double us = median_gpu_us(ctx, [&] { gpu::graph_launch(g); }, reps) / count;
    gpu::graph_destroy(g);
    return us;
  }
#endif
  (void)ctx, (void)count, (void)fn, (void)reps;
  return 0;
}

double time_us(const Ctx& ctx, const std::function<void()>& fn, int reps) {
  std::vector<double> t;
  for (int i = 0; i < 3; i++) fn();
#ifdef ANVIL_HAS_GPU
  if (ctx.device.is_gpu()) return median_gpu_us(ctx, fn, reps);
#endif
  if (ctx.device.is_cpu()) {
    for (int i = 0; i < reps; i++) {
      auto s = std::chrono::steady_clock::now();
      fn();
      t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - s).count());
    }
  }
  return median_of(std::move(t));
}

std::string fmt_g(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

}  // namespace anvil::test

// ---- driver ------------------------------------------------------------------------------------------
using namespace anvil;
using namespace anvil::test;

static int usage(const char* msg) {
  std::fprintf(stderr,
               "anvil_op_tests: %s\n"
               "usage: anvil_op_tests [--op NAME] [--backend cpu|gpu] [--mode test|grad|perf] [--seed N] "
               "[--filter SUBSTR[|SUBSTR...]] [--list] [-v]\n",
               msg);
  return 2;
}

// --filter 'a|b': a case runs when its id contains any of the '|'-separated substrings (an empty filter: all).
static bool matches_filter(const std::string& id, const std::string& filter) {
  if (filter.empty()) return true;
  for (size_t b = 0;;) {
    const size_t e = filter.find('|', b);
    const std::string part = filter.substr(b, e == std::string::npos ? std::string::npos : e - b);
    if (!part.empty() && id.find(part) != std::string::npos) return true;
    if (e == std::string::npos) return false;
    b = e + 1;
  }
}

int main(int argc, char** argv) {
  // One line per case as it finishes, also into a file or pipe: a run stopped by a time limit keeps what it measured
  // (block buffering lost every line of a perf run killed by `timeout` on the H200).
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string op, mode = "test", filter, backend_name = "cpu";
  uint64_t seed = 1234;
  bool list = false, verbose = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto need = [&](const char* name) -> std::string {
      if (i + 1 >= argc) throw Error("anvil_op_tests", str("a value after ", name), "end of arguments", __FILE__, __LINE__);
      return argv[++i];
    };
    try {
      if (a == "--op") op = need("--op");
      else if (a == "--mode") mode = need("--mode");
      else if (a == "--backend") backend_name = need("--backend");
      else if (a == "--seed") seed = std::stoull(need("--seed"));
      else if (a == "--filter") filter = need("--filter");
      else if (a == "--list") list = true;
      else if (a == "-v") verbose = true;
      else return usage(("unknown option '" + a + "'").c_str());
    } catch (const std::exception& e) {
      return usage(e.what());
    }
  }
  if (mode != "test" && mode != "grad" && mode != "perf") return usage(("unknown mode '" + mode + "'").c_str());
  Device dev;
  try {
    dev = parse_device(backend_name);
    backend(dev);
  } catch (const std::exception& e) {
    return usage(e.what());
  }
  Ctx ctx{dev, seed, verbose};
  double copy_gbs = 0;
  if (mode == "perf" && !list) {
    // The ceiling every memory-bound op is judged against, measured in this run: a device-to-device copy
    // of 2 GiB (bytes read + written).
    const size_t n = dev.is_gpu() ? (size_t(1) << 31) : (size_t(1) << 28);
    Tensor a = Tensor::empty({int64_t(n)}, DType::u8, dev), b = Tensor::empty({int64_t(n)}, DType::u8, dev);
    a.zero_();
    double us = time_us(ctx, [&] { backend(dev).copy_device(b.data_ptr(), a.data_ptr(), n); }, 10);
    copy_gbs = 2.0 * double(n) / (us * 1e3);
    std::printf("CEILING copy %.1f GB/s (%s, %zu MiB device-to-device)\n", copy_gbs, dev.name().c_str(), n >> 20);
  }
  int passed = 0, failed = 0, skipped = 0, matched = 0;
  for (auto& c : registry()) {
    if (!op.empty() && c.op != op) continue;
    if (!matches_filter(c.id, filter)) continue;
    matched++;
    if (list) {
      std::printf("%s\n", c.id.c_str());
      continue;
    }
    auto& fn = mode == "test" ? c.test : mode == "grad" ? c.grad : c.test;
    if (mode == "perf") {
      if (!c.perf) { skipped++; continue; }
      try {
        PerfResult r = c.perf(ctx);
        const double gbs = r.bytes / (r.us * 1e3);
        std::printf("PERF %-56s %-16s %10.2f us %8.1f GB/s (%3.0f%% of copy) %8.2f TFLOP/s", c.id.c_str(),
                    r.shape.c_str(), r.us, gbs, copy_gbs > 0 ? 100.0 * gbs / copy_gbs : 0.0, r.flops / (r.us * 1e6));
        if (r.graph_us > 0) std::printf("  in a graph: %.2f us per launch", r.graph_us);
        std::printf("\n");
        passed++;
      } catch (const std::exception& e) {
        std::printf("FAIL %s [%s] seed=%llu: %s\n", c.id.c_str(), dev.name().c_str(), (unsigned long long)seed, e.what());
        failed++;
      }
      continue;
    }
    if (!fn) { skipped++; continue; }
    try {
      auto checks = fn(ctx);
      bool ok = !checks.empty();
      for (auto& ch : checks) ok = ok && ch.ok;
      std::printf("%s %s [%s]\n", ok ? "PASS" : "FAIL", c.id.c_str(), dev.name().c_str());
      for (auto& ch : checks)
        if (!ch.ok || verbose) std::printf("     %s%s\n", ch.ok ? "" : "FAILED ", ch.detail.c_str());
      if (!ok) std::printf("     (seed=%llu; rerun with --seed %llu --filter '%s')\n", (unsigned long long)seed,
                           (unsigned long long)seed, c.id.c_str());
      ok ? passed++ : failed++;
    } catch (const std::exception& e) {
      std::printf("FAIL %s [%s] seed=%llu: %s\n", c.id.c_str(), dev.name().c_str(), (unsigned long long)seed, e.what());
      failed++;
    }
  }
  if (list) return 0;
  if (matched == 0) return usage(("no case matches op '" + op + "' filter '" + filter + "'").c_str());
  std::printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
