#!/usr/bin/env bash
# Checks and times every variant of the Mamba kernels on the GPU: for each ANVIL_SCAN_VARIANT (selective_scan
# forward) and ANVIL_SCAN_BWD_VARIANT (selective_scan backward, rows "bN", timed with the default forward), and
# causal_conv1d: the op harness in test and grad mode (pass/fail line), then perf mode at the
# target shape; prints one table last.
#   usage: scripts/ssm_bench.sh BUILD_DIR        (BUILD_DIR/tests/anvil_op_tests, a CUDA or HIP build)
#   env:   SCAN_VARIANTS="0 1 2 3 4 5 6 7"  SCAN_BWD_VARIANTS="0 2 3 4"  CHECK=0 (perf only)  OUT=dir (logs, default .)
# Targets (issue 4, H200, bf16, B=4 D=5120 N=16 L=2048, z + delta_bias + softplus + D): selective_scan forward
# <= 270 us, forward + backward <= 1300 us; causal_conv1d forward and backward >= 80% of the copy bandwidth that
# the same run measures. Floors printed beside them: bytes (the case's byte count at copy bandwidth) and, for the
# scan, exponentials (B*D*L*N = 671 M per pass at 16/clk/SM * 132 SMs * 1.98 GHz = 161 us; the backward recomputes
# them, so forward + backward has two passes: 322 us).
set -uo pipefail
build="${1:?usage: scripts/ssm_bench.sh BUILD_DIR}"
bin="$build/tests/anvil_op_tests"
[ -x "$bin" ] || { echo "ssm_bench: no $bin" >&2; exit 2; }
SCAN_VARIANTS="${SCAN_VARIANTS:-0 1 2 3 4 5 6 7}"
SCAN_BWD_VARIANTS="${SCAN_BWD_VARIANTS:-0 2 3 4}"
CHECK="${CHECK:-1}"
logs="${OUT:-.}/ssm_bench_logs"
mkdir -p "$logs"
table=()

# check OP ENVVAR VARIANT: "test x/y grad x/y" from the harness' summary lines.
check() {
  local op=$1 var=$2 v=$3 tag=$4 t g
  [ "$CHECK" = 1 ] || { echo "-"; return; }
  env "$var=$v" "$bin" --op "$op" --backend gpu --mode test > "$logs/${op}_${tag}_test.txt" 2>&1
  t=$(grep -E "passed" "$logs/${op}_${tag}_test.txt" | tail -n1 | awk '{print $1"ok/"$3"fail"}')
  env "$var=$v" "$bin" --op "$op" --backend gpu --mode grad > "$logs/${op}_${tag}_grad.txt" 2>&1
  g=$(grep -E "passed" "$logs/${op}_${tag}_grad.txt" | tail -n1 | awk '{print $1"ok/"$3"fail"}')
  grep -h "^FAIL" "$logs/${op}_${tag}_test.txt" "$logs/${op}_${tag}_grad.txt" | head -n 5 | sed "s/^/  [$op $tag] /" >&2
  echo "test ${t:-crash} grad ${g:-crash}"
}

# perf OP ENVVAR VARIANT [TAG]: one table row per PERF line (TAG names the row and the logs; default vN).
perf() {
  local op=$1 var=$2 v=$3 tag=${4:-v$3} status copy
  status=$(check "$op" "$var" "$v" "$tag")
  env "$var=$v" "$bin" --op "$op" --backend gpu --mode perf > "$logs/${op}_${tag}_perf.txt" 2>&1
  copy=$(awk '/^CEILING copy/ {print $3}' "$logs/${op}_${tag}_perf.txt")
  while read -r line; do
    table+=("$(echo "$line" | awk -v v="$tag" -v st="$status" -v copy="${copy:-0}" '
      { for (i = 1; i <= NF; i++) { if ($i == "us") us = $(i-1); if ($i == "GB/s") gbs = $(i-1) }
        pct = copy > 0 ? 100 * gbs / copy : 0
        name = $2; sub(/\(.*/, "", name)
        bytes_floor = us * pct / 100
        if (name == "selective_scan_fwd") { target = 270; floor = sprintf("%.0f bytes / 161 exp", bytes_floor) }
        else if (name == "selective_scan_fwd_bwd") { target = 1300; floor = sprintf("%.0f bytes / 322 exp", bytes_floor) }
        else { target = bytes_floor / 0.8; floor = sprintf("%.0f bytes", bytes_floor) }
        printf "%-24s %-3s %9.1f %8.0f %5.0f%% %22s %7.0f %7.0f%%  %s", name, v, us, gbs, pct, floor, target,
               100 * target / us, st }')")
  done < <(grep "^PERF" "$logs/${op}_${tag}_perf.txt")
  grep -q "^PERF" "$logs/${op}_${tag}_perf.txt" || table+=("$op $tag: no PERF line ($(tail -n1 "$logs/${op}_${tag}_perf.txt"))")
}

for v in $SCAN_VARIANTS; do perf selective_scan ANVIL_SCAN_VARIANT "$v"; done
# Backward variants: the forward stays at its default; the fwd+bwd row is the one that changes.
for v in $SCAN_BWD_VARIANTS; do perf selective_scan ANVIL_SCAN_BWD_VARIANT "$v" "b$v"; done
# causal_conv1d has one kernel pair (the segment variants and the thread-per-pack backward were removed); the
# backward at its default warp spans.
perf causal_conv1d ANVIL_CONV_BWD_SPAN 0 conv

echo
grep -h "^CEILING" "$logs"/*_perf.txt | head -n 1
printf "%-24s %-3s %9s %8s %6s %22s %7s %8s  %s\n" op var us GB/s copy "floor us" "target" "%target" checks
printf '%s\n' "${table[@]}"
