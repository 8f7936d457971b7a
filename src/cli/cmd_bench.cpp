// anvil bench decode: median one-token step time against the floor of reading every weight once per step.
#include <cstdio>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "serve/bench.h"

namespace anvil::cli {

namespace {

struct BenchDecodeOptions {
  ModelOptions model;
  DecodeBenchConfig bench;
  double bandwidth_tbs = 0;  // 0 = measure with a 1 GiB device copy
};

int run_decode(const BenchDecodeOptions& o) {
  check_model_dir("bench decode", o.model.dir);
  auto model = load_model_for(o.model);
  const Device dev = model->device();
  const double bw = o.bandwidth_tbs > 0 ? o.bandwidth_tbs * 1e12 : measure_copy_bandwidth(dev);
  auto r = bench_decode(*model, o.bench);
  const double floor_ms = 1e3 * double(r.weight_bytes) / bw;
  const ModelInfo& info = model->info();
  std::printf("model      %s: %s, %lld layers, width %lld, %s%s on %s\n", o.model.dir.c_str(), info.arch.c_str(),
              (long long)info.layers, (long long)info.width, dtype_name(model->compute_dtype()),
              o.model.dtype == "fp8" ? " with FP8 weights" : "", backend(dev).info().name.c_str());
  std::printf("shape      batch %d, prompt %d, %d steps, context %lld\n", o.bench.batch, o.bench.prompt_len,
              o.bench.tokens, (long long)r.context);
  std::printf("prefill    %.2f ms\n", r.prefill_ms);
  std::printf("decode     %.3f ms/step median (p10 %.3f, p90 %.3f), %.1f tokens/s\n", r.median_ms, r.p10_ms,
              r.p90_ms, r.tokens_per_s);
  std::printf("floor      %.3f GB of weights per step at %.2f TB/s (%s) = %.3f ms\n", 1e-9 * double(r.weight_bytes),
              1e-12 * bw, o.bandwidth_tbs > 0 ? "given" : "measured: 1 GiB device copy", floor_ms);
  std::printf("efficiency %.1f%% of the floor (weights only; KV cache reads not counted)\n",
              r.median_ms > 0 ? 100.0 * floor_ms / r.median_ms : 0.0);
  return 0;
}

int run_bench(int argc, char** argv) {
  CLI::App app{"Benchmarks.", "anvil bench"};
  app.require_subcommand(1);
  BenchDecodeOptions d;
  CLI::App* decode = app.add_subcommand("decode", "time one-token decode steps against the weight-read floor");
  add_model_options(*decode, d.model);
  decode->add_option("--batch", d.bench.batch, "sequences decoded together")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  decode->add_option("--prompt-len", d.bench.prompt_len, "tokens prefilled before the timed steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  decode->add_option("--tokens", d.bench.tokens, "timed decode steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  decode->add_option("--context", d.bench.context, "KV-cache capacity (0 = prompt-len + tokens)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  decode->add_option("--seed", d.bench.seed, "seed of the random token ids fed")->capture_default_str();
  decode->add_option("--bandwidth-tbs", d.bandwidth_tbs,
                     "memory bandwidth for the floor in TB/s (0 = measure a 1 GiB device copy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  if (int rc = parse(app, argc, argv); rc >= 0) return rc;
  if (decode->parsed()) return run_decode(d);
  return 2;
}

Register reg({"bench", "benchmarks: `anvil bench decode --model DIR`", run_bench});

}  // namespace

}  // namespace anvil::cli
