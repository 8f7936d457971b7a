// anvil bench decode: median one-token step time against the floor of reading every weight once per step.
// anvil bench train: median training-step throughput, MFU and peak memory against the targets of TARGETS.md.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "models/factory.h"
#include "serve/bench.h"
#include "train/progress.h"
#include "train/train_bench.h"

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
              info.weights.empty() ? "" : (" with " + info.weights).c_str(), backend(dev).info().name.c_str());
  std::printf("shape      batch %d, prompt %d, %d steps, context %lld\n", o.bench.batch, o.bench.prompt_len,
              o.bench.tokens, (long long)r.context);
  if (!r.decode_path.empty()) std::printf("path       %s\n", r.decode_path.c_str());
  std::printf("prefill    %.2f ms\n", r.prefill_ms);
  std::printf("decode     %.3f ms/step median (p10 %.3f, p90 %.3f), %.1f tokens/s\n", r.median_ms, r.p10_ms,
              r.p90_ms, r.tokens_per_s);
  if (r.device_ms > 0)
    std::printf("on device  %.3f ms/step median between events before and after the step (the rest is host time)\n",
                r.device_ms);
  if (r.loop_ms > 0)
    std::printf("loop       %.3f ms/step over %d steps of a generation loop (greedy on the device, no wait between "
                "steps), %.1f tokens/s, %.1f%% of the floor\n",
                r.loop_ms, r.loop_tokens, 1e3 * o.bench.batch / r.loop_ms, 100.0 * floor_ms / r.loop_ms);
  if (r.gen_ms > 0) {
    const SamplingParams& s = o.bench.sampling;
    std::printf("generate   %.3f ms/token through generate() (temperature %g, top-k %d, top-p %g; %s), %.3f with "
                "the host sampler\n",
                r.gen_ms, double(s.temperature), s.top_k, double(s.top_p),
                s.is_greedy() ? "greedy picks on the device" : "the device's top-k candidates", r.gen_host_ms);
  }
  std::printf("floor      %.3f GB of weights per step at %.2f TB/s (%s) = %.3f ms\n", 1e-9 * double(r.weight_bytes),
              1e-12 * bw, o.bandwidth_tbs > 0 ? "given" : "measured: 1 GiB device copy", floor_ms);
  std::printf("efficiency %.1f%% of the floor (weights only; KV cache reads not counted)\n",
              r.median_ms > 0 ? 100.0 * floor_ms / r.median_ms : 0.0);
  return 0;
}

struct BenchTrainOptions {
  std::string model;            // a preset name (configs/models/NAME.json) or a config.json path
  std::string device = "auto";
  std::string dtype = "auto";   // bf16 on a GPU, f32 on the CPU
  TrainBenchConfig bench;
  double peak_tflops = 771;     // H200 bf16 dense GEMM, measured (TARGETS.md)
  double target_tok_s = 0;      // 0: no target
  double target_mem_gb = 0;
  uint64_t init_seed = 0;
};

// A name without a slash and without ".json" is a preset; anything else is a config.json (or its directory).
ModelSpec train_model_spec(const std::string& m) {
  ModelSpec spec;
  const bool path = m.find('/') != std::string::npos || (m.size() > 5 && m.substr(m.size() - 5) == ".json") ||
                    std::filesystem::exists(m);
  (path ? spec.config_path : spec.preset) = m;
  return spec;
}

const char* verdict(bool met) { return met ? "MET" : "MISSED"; }

std::string gb_or_mb(double bytes) {
  char b[32];
  if (bytes >= 1e9) std::snprintf(b, sizeof b, "%.2f GB", 1e-9 * bytes);
  else std::snprintf(b, sizeof b, "%.1f MB", 1e-6 * bytes);
  return b;
}

template <class... A>
std::string fmt(const char* f, A... a) {
  char b[160];
  std::snprintf(b, sizeof b, f, a...);
  return b;
}

int run_train_bench(const BenchTrainOptions& o) {
  ModelOptions mo;
  mo.device = o.device;
  mo.dtype = o.dtype;
  const Device dev = resolve_device(mo);
  const DType dt = resolve_dtype(mo, dev);
  auto model = create_model(train_model_spec(o.model), dev, dt, /*trainable=*/true, o.init_seed);
  const ModelInfo& info = model->info();
  std::printf("model       %s: %s, %s params, %lld layers, width %lld, %s on %s\n", o.model.c_str(),
              info.arch.c_str(), human_count(double(info.n_params)).c_str(), (long long)info.layers,
              (long long)info.width, dtype_name(dt), backend(dev).info().name.c_str());
  TrainOptions topt;
  topt.recompute = o.bench.recompute;
  topt.keep_layers = o.bench.keep_layers;
  const int64_t kept = info.layers - topt.recomputed_layers(info.layers);
  std::printf("shape       batch %lld x seq %lld = %lld tokens/step, %d warmup + %d timed steps, recompute %s\n",
              (long long)o.bench.batch, (long long)o.bench.seq, (long long)(o.bench.batch * o.bench.seq),
              o.bench.warmup, o.bench.steps,
              o.bench.recompute ? fmt("on (keeps the last %lld of %lld layers)", (long long)kept,
                                      (long long)info.layers).c_str()
                                : "off");
  std::fflush(stdout);
  const TrainBenchResult r = bench_train(*model, o.bench);
  const bool gpu = dev.is_gpu();
  const double mfu = gpu ? r.tokens_per_s * r.flops_per_token / (o.peak_tflops * 1e12) : -1;
  const double peak_gb = 1e-9 * double(r.peak_bytes);
  const char* tok_ok = o.target_tok_s > 0 ? verdict(r.tokens_per_s >= o.target_tok_s) : "-";
  const char* mem_ok = o.target_mem_gb > 0 ? verdict(peak_gb <= o.target_mem_gb) : "-";
  std::printf("loss        %.4f -> %.4f (random tokens: about ln V = %.2f)\n\n", r.first_loss, r.last_loss,
              std::log(double(info.vocab)));
  auto row = [](const char* metric, const std::string& got, const std::string& want, const char* ok) {
    std::printf("| %-18s | %-48s | %-10s | %-6s |\n", metric, got.c_str(), want.c_str(), ok);
  };
  row("metric", "measured", "target", "");
  row("------------------", std::string(48, '-'), "----------", "------");
  row("tokens/s (median)", human_count(r.tokens_per_s), o.target_tok_s > 0 ? human_count(o.target_tok_s) : "-",
      o.target_tok_s > 0 ? tok_ok : "");
  row("ms/step (median)", fmt("%.2f (p10 %.2f, p90 %.2f)", r.median_ms, r.p10_ms, r.p90_ms), "-", "");
  // Model FLOPs (6N + attention per token): a recomputed forward is work done, not counted.
  row("MFU", gpu ? fmt("%.1f%% of %.0f TFLOP/s", 100 * mfu, o.peak_tflops) : "- (GPU only)", "-", "");
  row(r.peak_is_rss ? "peak memory (RSS)" : "peak GPU memory",
      gb_or_mb(double(r.peak_bytes)) + (r.peak_is_rss ? " (whole process)" : " (allocator peak, all tensors)"),
      o.target_mem_gb > 0 ? fmt("%.1f GB", o.target_mem_gb) : "-", o.target_mem_gb > 0 ? mem_ok : "");
  row("  params+opt state", gb_or_mb(double(r.state_bytes)) + " (weights, fp32 masters, grads, AdamW)", "-", "");
  row("  activations kept", gb_or_mb(double(r.activation_bytes)) + " (saved for the backward)", "-", "");
  // One line for scripts (bench/train_throughput.sh collects them). keep_layers: the layers that keep their
  // activations, as run (all of them without recompute, at most all with it).
  std::printf("RESULT model=%s batch=%lld seq=%lld dtype=%s recompute=%d keep_layers=%lld tok_s=%.0f ms_step=%.2f "
              "mfu=%s peak_gb=%.2f tok_target=%s mem_target=%s\n",
              o.model.c_str(), (long long)o.bench.batch, (long long)o.bench.seq, dtype_name(dt),
              int(o.bench.recompute), (long long)kept, r.tokens_per_s, r.median_ms,
              gpu ? fmt("%.1f%%", 100 * mfu).c_str() : "-", peak_gb, tok_ok, mem_ok);
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
  d.bench.sampling = generate_default_sampling();
  decode->add_option("--temperature", d.bench.sampling.temperature, "sampling of the generate line (batch 1)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  decode->add_option("--top-k", d.bench.sampling.top_k, "top-k of the generate line (0 = all)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  decode->add_option("--top-p", d.bench.sampling.top_p, "top-p of the generate line (1 = all)")
      ->check(CLI::Range(1e-6f, 1.f))
      ->capture_default_str();
  decode->add_flag("--host-ids", d.bench.host_ids,
                   "upload each step's ids from the host inside the timed region (a loop that samples on the CPU); "
                   "by default they are on the device before timing, as when sampling on the device");
  decode->add_option("--bandwidth-tbs", d.bandwidth_tbs,
                     "memory bandwidth for the floor in TB/s (0 = measure a 1 GiB device copy)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  BenchTrainOptions t;
  CLI::App* train = app.add_subcommand("train", "time full training steps (fwd + bwd + AdamW): tokens/s, MFU, "
                                                "peak memory");
  train->add_option("--model,-m", t.model, "a preset (mamba-130m, mamba-370m, mamba-1.4b, llama-3.2-1b, "
                                           "llama-tiny: configs/models/NAME.json) or a config.json path")
      ->required();
  train->add_option("--device", t.device, "cpu, gpu, gpu:N or auto (the GPU when there is one)")
      ->capture_default_str();
  train->add_option("--dtype", t.dtype, "compute dtype: f32, bf16, f16 or auto (bf16 on a GPU, f32 on the CPU)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "f16"}))
      ->capture_default_str();
  train->add_option("--batch", t.bench.batch, "sequences per step")->check(CLI::PositiveNumber)->capture_default_str();
  train->add_option("--seq", t.bench.seq, "tokens per sequence")->check(CLI::PositiveNumber)->capture_default_str();
  train->add_option("--steps", t.bench.steps, "timed steps")->check(CLI::PositiveNumber)->capture_default_str();
  train->add_option("--warmup", t.bench.warmup, "untimed steps first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  train->add_flag("--recompute", t.bench.recompute, "per-layer activation recomputation (less memory, +30% FLOPs)");
  train->add_option("--keep-layers", t.bench.keep_layers,
                    "with --recompute: the last N layers keep their activations, the others are recomputed "
                    "(more memory, fewer FLOPs; 0 means 1; >= the layer count: none recomputed)")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.rfind('-', 0) == 0 ? "expected a layer count >= 0 (0 means 1), got " + v : std::string();
          },
          "NONNEGATIVE"))
      ->capture_default_str();
  train->add_option("--peak-tflops", t.peak_tflops, "the device's peak for MFU, TFLOP/s (GPU only; 771: H200 bf16)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  train->add_option("--target-tok-s", t.target_tok_s, "tokens/s to meet (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  train->add_option("--target-mem-gb", t.target_mem_gb, "peak memory to stay within, GB (0 = none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  train->add_option("--seed", t.bench.seed, "seed of the random tokens")->capture_default_str();
  train->add_option("--init-seed", t.init_seed, "seed of the random weights")->capture_default_str();
  if (int rc = parse(app, argc, argv); rc >= 0) return rc;
  if (decode->parsed()) return run_decode(d);
  if (train->parsed()) return run_train_bench(t);
  return 2;
}

Register reg({"bench", "benchmarks: `anvil bench decode --model DIR`, `anvil bench train --model PRESET`",
              run_bench});

}  // namespace

}  // namespace anvil::cli
