#!/usr/bin/env bash
# Runs on the GPU machine over a copy of the tree: the CUDA binaries built here travel in .carry/bin, the
# libraries Debian has and that machine lacks in .carry/lib. Usage: scripts/gpu_run.sh STEP...
#   info     nvidia-smi and device properties
#   ops      the op harness on the GPU backend (test mode), then with ANVIL_GEMM=tiled for matmul
#   grad     the op harness, grad mode
#   perf     the op harness, perf mode, next to PyTorch's anchors measured in the same run
#   unit     the gtest suite against the GPU build
#   decode   Llama-3.1-8B shape (random bf16 weights): transformers' static-cache anchor, anvil bench decode with
#            and without graph capture, batch 1/8/32, 2048 tokens of context, bf16 logits parity
#   decodeprof  one decode step split by kernel (ncu, one kernel at a time) -> decode_profile.md
#   skprof   ncu sections of the skinny GEMM at one row
#   ringprof ncu counters and stall reasons of the ring skinny GEMM on gate|up (FP8 and bf16, 1 and 16 rows)
#   scanprof ncu sections of the selective_scan backward kernels
#   trainprof  one Mamba-130m training step split by kernel (ncu) -> train_profile.md
#   decodesweep  batch-1 decode under several environments (SWEEP, see the step)
#   trace    a kernel timeline of one anvil command (TRACE_CMD, default: Mamba-1.4B training at keep 48) through
#            libkernel_trace.so -> trace.csv, summarised over its last TRACE_LAST_MS ms (tools/kernel_trace.py)
# Logs go to $OUT (or ./gpu-logs); a short table is printed last.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="$here/.carry/bin"
export LD_LIBRARY_PATH="$here/.carry/lib:${LD_LIBRARY_PATH:-}"
out="${OUT:-$here/gpu-logs}"
mkdir -p "$out" "$bin"
# Binaries travel compressed (the GPU build's fat binaries are over the transfer limit uncompressed): .xz, or .gz.
for z in "$here"/.carry/*.xz "$here"/.carry/*.gz; do
  [ -e "$z" ] || continue
  b="$bin/$(basename "${z%.*}")"
  case "$z" in
    *.xz) python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$z" "$b" ;;
    *.gz) gunzip -c "$z" > "$b" ;;
  esac
  chmod +x "$b"
done
summary=()
for step in "$@"; do
  case "$step" in
    info) nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv | tee "$out/info.txt" ;;
    ops)
      "$bin/anvil_op_tests" --backend gpu --mode test 2>&1 | tee "$out/ops_gpu.txt" | grep -E "FAIL|passed"
      summary+=("ops(gpu):   $(tail -n1 "$out/ops_gpu.txt")")
      ANVIL_GEMM=tiled "$bin/anvil_op_tests" --backend gpu --mode test --op matmul 2>&1 | tee "$out/ops_gpu_tiled.txt" | grep -E "FAIL|passed"
      summary+=("matmul(tiled): $(tail -n1 "$out/ops_gpu_tiled.txt")") ;;
    grad)
      "$bin/anvil_op_tests" --backend gpu --mode grad 2>&1 | tee "$out/grad_gpu.txt" | grep -E "FAIL|passed"
      summary+=("grad(gpu):  $(tail -n1 "$out/grad_gpu.txt")") ;;
    perf)
      python3 "$here/bench/torch_anchors.py" 2>&1 | tee "$out/anchors.txt"
      "$bin/anvil_op_tests" --backend gpu --mode perf 2>&1 | tee "$out/perf_gpu.txt"
      summary+=("$(grep -h -E "ANCHOR|CEILING" "$out/anchors.txt" "$out/perf_gpu.txt")") ;;
    unit)
      "$bin/anvil_tests" 2>&1 | tee "$out/unit_gpu.txt" | tail -n 3
      summary+=("unit(gpu):  $(grep -E "PASSED|FAILED" "$out/unit_gpu.txt" | head -n 3 | tr '\n' ' ')") ;;
    decode)
      m=/tmp/llama8b
      [ -f "$m/config.json" ] && [ -z "${DECODE_ANCHOR:-}" ] || python3 "$here/bench/llama8b_decode.py" --out "$m" 2>&1 | tee "$out/decode_anchor.txt"
      summary+=("$(grep -h ANCHOR "$out/decode_anchor.txt")")
      bd() {  # label, then anvil bench decode options
        local label="$1"; shift
        "$bin/anvil" bench decode --model "$m" --device gpu "$@" > "$out/decode_$label.txt" 2>&1
        summary+=("decode $label: $(grep -h -E '^decode' "$out/decode_$label.txt") | $(grep -h -E '^efficiency' "$out/decode_$label.txt" | cut -c1-40)")
      }
      bd b1_graph --batch 1 --tokens 128
      ANVIL_GRAPHS=0 bd b1_eager --batch 1 --tokens 128
      bd b8 --batch 8 --tokens 64
      bd b32 --batch 32 --tokens 64
      bd b1_ctx2048 --batch 1 --prompt-len 1920 --tokens 128
      bd b1_fp8 --batch 1 --tokens 128 --dtype fp8
      bd b8_fp8 --batch 8 --tokens 64 --dtype fp8
      python3 "$here/tools/llama_bf16_parity.py" --model "$m" --anvil "$bin/anvil" --out "$out" 2>&1 | tee "$out/parity_bf16.txt"
      summary+=("$(grep -h PARITY "$out/parity_bf16.txt")") ;;
    decodesweep)  # anvil bench decode at batch 1 under several environments: SWEEP="label:VAR=V,VAR=V;label:..."
      m=/tmp/llama8b
      [ -f "$m/config.json" ] || python3 "$here/bench/llama8b_decode.py" --out "$m" --skip-transformers > "$out/decode_model.txt" 2>&1
      IFS=';' read -ra entries <<< "${SWEEP:-default:}"
      for e in "${entries[@]}"; do
        label=${e%%:*}; vars=${e#*:}
        env_args=(); IFS=',' read -ra kv <<< "$vars"; for a in "${kv[@]}"; do [ -n "$a" ] && env_args+=("$a"); done
        # The label picks the case: b8 (batch 8, 64 tokens), fp8 (--dtype fp8), ctx (1920-token prompt).
        opts=(--batch 1 --tokens 128)
        case "$label" in *b8*) opts=(--batch 8 --tokens 64) ;; esac
        case "$label" in *fp8*) opts+=(--dtype fp8) ;; esac
        case "$label" in *ctx*) opts+=(--prompt-len 1920) ;; esac
        env "${env_args[@]}" "$bin/anvil" bench decode --model "$m" --device gpu "${opts[@]}" > "$out/sweep_$label.txt" 2>&1
        summary+=("sweep $label [$vars]: $(grep -h -E '^decode' "$out/sweep_$label.txt" | head -n 1)")
      done ;;
    ssm)  # every Mamba kernel variant: checked (test + grad) and timed at the issue's shape
      mkdir -p "$out/ssm_build/tests" && ln -sf "$bin/anvil_op_tests" "$out/ssm_build/tests/anvil_op_tests"
      OUT="$out" bash "$here/scripts/ssm_bench.sh" "$out/ssm_build" 2>&1 | tee "$out/ssm_bench.txt"
      rm -rf "$out/ssm_build"
      summary+=("ssm: see ssm_bench.txt (table above)") ;;
    train)  # training throughput, the four rows of the training issue
      OUT="$out/train" TIMEOUT="${TRAIN_TIMEOUT:-150}" bash "$here/bench/train_throughput.sh" "$bin/anvil" 2>&1 | tee "$out/train_throughput.txt"
      summary+=("train: see train_throughput.txt") ;;
    trainparity)  # bf16 (and GPU f32) training loss curves against PyTorch's on the same batches
      OUT="$out/parity" bash "$here/scripts/parity_gpu.sh" "$bin/anvil" 2>&1 | tee "$out/train_parity.txt" | tail -n 20
      summary+=("train parity: $(tr '\n' ' ' < "$out/parity/parity_summary.txt" 2>/dev/null)") ;;
    graph)  # the graph-vs-eager decode test only
      "$bin/anvil_tests" --gtest_filter='LlamaGraph.*' 2>&1 | tee "$out/graph_test.txt" | tail -n 3
      summary+=("graph test: $(grep -E 'PASSED|FAILED' "$out/graph_test.txt" | head -n 2 | tr '\n' ' ')") ;;
    prof)  # Nsight Compute speed-of-light of the Mamba kernels at the issue's shape (when ncu is installed)
      ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
      if [ -z "$ncu" ]; then summary+=("prof: no ncu on this machine"); continue; fi
      for pair in causal_conv1d:causal_conv1d_fwd causal_conv1d:causal_conv1d_bwd "selective_scan:selective_scan_fwd("; do
        op=${pair%%:*}; f=${pair#*:}; tag=${f%%(}
        "$ncu" --launch-skip 3 --launch-count 1 --section SpeedOfLight --section Occupancy --section LaunchStats \
          --section WarpStateStats "$bin/anvil_op_tests" --backend gpu --mode perf --op "$op" --filter "$f" \
          > "$out/prof_$tag.txt" 2>&1
        summary+=("prof $tag: $(grep -E 'Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per' "$out/prof_$tag.txt" | tr -s ' ' | tr '\n' ';')")
      done ;;
    scanprof)  # Nsight Compute, full sections, on the selective_scan backward kernels (SCAN_BWD_VARIANTS, default "3 4")
      ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
      if [ -z "$ncu" ]; then summary+=("scanprof: no ncu on this machine"); continue; fi
      for v in ${SCAN_BWD_VARIANTS:-3 4}; do
        ANVIL_SCAN_BWD_VARIANT=$v "$ncu" --clock-control none --launch-skip 1 --launch-count 1 --kernel-name regex:scan_bwd \
          --section SpeedOfLight --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
          --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
          --section InstructionStats --section ComputeWorkloadAnalysis \
          "$bin/anvil_op_tests" --backend gpu --mode perf --op selective_scan --filter selective_scan_fwd_bwd \
          > "$out/scanprof_b$v.txt" 2>&1
        summary+=("scanprof b$v: $(grep -E 'Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Local' "$out/scanprof_b$v.txt" | tr -s ' ' | tr '\n' ';')")
      done ;;
    decodeprof)  # one decode step's kernels timed one by one (ncu), split by kernel (tools/decode_profile.py)
      ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
      if [ -z "$ncu" ]; then summary+=("decodeprof: no ncu on this machine"); continue; fi
      m=/tmp/llama8b
      [ -f "$m/config.json" ] || python3 "$here/bench/llama8b_decode.py" --out "$m" --skip-transformers > "$out/decode_model.txt" 2>&1
      step_ms=$("$bin/anvil" bench decode --model "$m" --device gpu --batch 1 --tokens 64 | tee "$out/decodeprof_bench.txt" \
                | awk '/^decode/ {print $2}')
      ANVIL_EARLY_LAUNCH=0 "$bin/anvil" bench decode --model "$m" --device gpu --batch 1 --tokens 64 > "$out/decodeprof_noearly.txt"
      "$bin/anvil" bench decode --model "$m" --device gpu --batch 1 --tokens 64 --dtype fp8 > "$out/decodeprof_fp8.txt"
      summary+=("decode b1 without early launch: $(grep -h '^decode' "$out/decodeprof_noearly.txt"); fp8: $(grep -h '^decode' "$out/decodeprof_fp8.txt")")
      # L2 left warm between kernels (--cache-control none), as in a real step; clocks untouched.
      ANVIL_GRAPHS=0 "$ncu" --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
        "$bin/anvil" bench decode --model "$m" --device gpu --batch 1 --tokens 3 > "$out/decodeprof.csv" 2> "$out/decodeprof_err.txt"
      gb=$(awk '/^floor/ {print $2}' "$out/decodeprof_bench.txt"); tbs=$(awk '/^floor/ {for (i = 1; i < NF; i++) if ($(i + 1) == "TB/s") print $i}' "$out/decodeprof_bench.txt")
      python3 "$here/tools/decode_profile.py" "$out/decodeprof.csv" --step-ms "$step_ms" --weights-gb "$gb" --copy-tbs "$tbs" \
        > "$out/decode_profile.md" 2>&1
      cat "$out/decode_profile.md"
      summary+=("decodeprof: $(grep -h PROFILE "$out/decode_profile.md") graph step ${step_ms} ms") ;;
    trainprof)  # one Mamba-130m training step (batch 16, seq 2048) split by kernel (ncu) -> train_profile.md
      ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
      if [ -z "$ncu" ]; then summary+=("trainprof: no ncu on this machine"); continue; fi
      model=${TRAINPROF_MODEL:-mamba-130m}; batch=${TRAINPROF_BATCH:-16}
      step_ms=$("$bin/anvil" bench train --model "$model" --batch "$batch" --seq 2048 --steps 5 --warmup 2 \
                | tee "$out/trainprof_bench.txt" | sed -n 's/^RESULT.* ms_step=\([0-9.]*\).*/\1/p')
      "$ncu" --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        "$bin/anvil" bench train --model "$model" --batch "$batch" --seq 2048 --steps 1 --warmup 0 \
        > "$out/trainprof.csv" 2> "$out/trainprof_err.txt"
      python3 "$here/tools/train_profile.py" "$out/trainprof.csv" --steps 1 --step-ms "${step_ms:-0}" > "$out/train_profile.md" 2>&1
      head -n 25 "$out/train_profile.md"
      summary+=("trainprof $model b$batch: $(head -n 1 "$out/train_profile.md")") ;;
    skprof)  # Nsight Compute on the skinny GEMM at one row (o and down shapes, bf16 and e4m3)
      ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
      if [ -z "$ncu" ]; then summary+=("skprof: no ncu on this machine"); continue; fi
      for f in "skinny_gemm_perf(bf16,llama8b_o,M=1," "skinny_gemm_perf(e4m3fn,llama8b_o,M=1," "skinny_gemm_perf(bf16,llama8b_down,M=1,"; do
        tag=$(echo "$f" | tr -c 'a-zA-Z0-9=' '_')
        "$ncu" --clock-control none --launch-skip 2 --launch-count 1 --kernel-name regex:skinny --section SpeedOfLight \
          --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
          "$bin/anvil_op_tests" --backend gpu --mode perf --op skinny_gemm --filter "$f" > "$out/skprof_$tag.txt" 2>&1
        summary+=("skprof $f: $(grep -E 'Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Registers Per' "$out/skprof_$tag.txt" | tr -s ' ' | tr '\n' ';')")
      done ;;
    ringprof)  # ncu counters of the ring skinny GEMM on gate|up (docs/decode_kernels.md, tenth round): time, DRAM
      # read rate, instructions, IPC, tensor pipe, and the warp stall reasons per issued instruction
      ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
      if [ -z "$ncu" ]; then summary+=("ringprof: no ncu on this machine"); continue; fi
      m="gpu__time_duration.sum,dram__bytes_read.sum.per_second,smsp__inst_executed.sum"
      m="$m,sm__inst_executed.avg.per_cycle_active,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
      m="$m,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"
      for f in "(e4m3fn,llama8b_gate_up,M=1," "(bf16,llama8b_gate_up,M=1," "(e4m3fn,llama8b_gate_up,M=16,"; do
        tag=$(echo "$f" | tr -c 'a-zA-Z0-9' '_')
        "$ncu" --clock-control none --launch-skip 2 --launch-count 1 --kernel-name regex:skinny_ring --metrics "$m" \
          "$bin/anvil_op_tests" --backend gpu --mode perf --op skinny_gemm --filter "$f" > "$out/ringprof$tag.txt" 2>&1
        summary+=("ringprof $f: $(grep -E 'gpu__time|dram__bytes|inst_executed|tensor_cycles' "$out/ringprof$tag.txt" |
          awk '{print $1, $NF}' | tr '\n' ';')")
      done ;;
    trace)  # device busy and idle time, idle gaps by cause, kernels by time: the in-stream view ncu cannot give
      lib="$here/.carry/lib/libkernel_trace.so"
      if [ ! -f "$lib" ]; then summary+=("trace: no $lib (scripts/stage_gpu.sh stages it where CUPTI was found)"); continue; fi
      cmd=${TRACE_CMD:-"bench train --model mamba-1.4b --batch 4 --seq 2048 --steps 4 --warmup 2 --recompute --keep-layers 48"}
      tag=$(echo "$cmd" | tr -c 'a-zA-Z0-9' '_' | cut -c1-60)
      # shellcheck disable=SC2086
      CUDA_INJECTION64_PATH="$lib" ANVIL_TRACE_OUT="$out/trace_$tag.csv" "$bin/anvil" $cmd > "$out/trace_$tag.txt" 2>&1
      grep -E "^RESULT|ms/token|error" "$out/trace_$tag.txt" | tail -3
      python3 "$here/tools/kernel_trace.py" "$out/trace_$tag.csv" --last-ms "${TRACE_LAST_MS:-600}" > "$out/trace_$tag.md" 2>&1
      cat "$out/trace_$tag.md"
      summary+=("trace $cmd: $(head -n 1 "$out/trace_$tag.md")") ;;
    *) echo "gpu_run.sh: unknown step '$step' (expected info, ops, grad, perf, unit, decode, decodesweep, scanprof, ssm, train, trainparity, graph, prof, decodeprof, skprof, ringprof, trainprof, trace)" >&2; exit 2 ;;
  esac
done
echo "==== summary ===="
printf '%s\n' "${summary[@]}"
