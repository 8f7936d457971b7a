#!/usr/bin/env bash
# The sm_90 machine code of one CUDA source, on a machine without a GPU: registers and spills per kernel (ptxas),
# then tools/sass_loops.py's loops and MUFU distances. The CUDA toolkit Debian installs has no cuobjdump or
# nvdisasm (which cuobjdump runs), so the first run fetches both from PyPI (their nvidia-cuda-* wheels) into
# ~/.cache/anvil/.
#
#   scripts/sass.sh src/kernels/selective_scan/selective_scan_fwd_seq.cu [KERNEL_REGEX]
#   SAME_AS=old.cubin scripts/sass.sh FILE.cu [KERNEL_REGEX]   whether the code equals an earlier build's
# The cubin stays at ${OUT_CUBIN:-/tmp/anvil_sass.cubin}; keep a copy to compare a later change against it.
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: scripts/sass.sh FILE.cu [KERNEL_REGEX]}
pattern=${2:-}
[ -f "$src" ] || { echo "sass.sh: no such source: $src" >&2; exit 2; }
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
[ -n "$nvcc" ] || { echo "sass.sh: nvcc not found (scripts/setup.sh installs the CUDA toolkit)" >&2; exit 2; }

# cuobjdump -sass runs nvdisasm: both come from their PyPI wheels when the toolkit lacks them.
cache="$HOME/.cache/anvil/cuobjdump"
fetch_tool() {  # fetch_tool TOOL: bin/TOOL of the nvidia-cuda-TOOL wheel into $cache/bin
  local tool=$1 tmp
  command -v "$tool" >/dev/null && return 0
  [ -x "$cache/bin/$tool" ] && return 0
  echo "sass.sh: fetching $tool (pip download nvidia-cuda-$tool) into $cache" >&2
  tmp=$(mktemp -d)
  python3 -m pip download --quiet --no-deps "nvidia-cuda-$tool" -d "$tmp"
  mkdir -p "$cache/bin"
  python3 - "$tmp" "$cache/bin" "$tool" <<'EOF'
import glob, os, sys, zipfile
folder, out, tool = sys.argv[1:4]
wheel = glob.glob(os.path.join(folder, '*.whl'))[0]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith('/bin/' + tool)]
    if not names:
        sys.exit(f'sass.sh: no bin/{tool} in {os.path.basename(wheel)}')
    with open(os.path.join(out, tool), 'wb') as f:
        f.write(z.read(names[0]))
EOF
  chmod +x "$cache/bin/$tool"
  rm -rf "$tmp"
}
fetch_tool cuobjdump
fetch_tool nvdisasm
export PATH="$cache/bin:$PATH"

cubin=${OUT_CUBIN:-/tmp/anvil_sass.cubin}
# The flags of the CUDA build (CMakeLists.txt) for sm_90, as a cubin; -Xptxas -v prints registers and spills.
"$nvcc" -DANVIL_CUDA -DANVIL_HAS_GPU -DNDEBUG -Isrc -Iinclude --expt-relaxed-constexpr -O3 -std=c++17 \
  --generate-code=arch=compute_90,code=sm_90 -Xptxas -v -cubin -o "$cubin" -x cu "$src" 2>&1 |
  awk -v pat="$pattern" '/Compiling entry function/ {keep = (pat == "" || $0 ~ pat); if (keep) {gsub(/\047/, "", $7); print $7}}
                         keep && /stack frame|Used/ {sub(/^ptxas info *: */, "    "); print}'
if [ -n "${SAME_AS:-}" ]; then
  exec python3 tools/sass_loops.py "$cubin" --same-as "$SAME_AS" --kernel "$pattern"
fi
python3 tools/sass_loops.py "$cubin" --kernel "$pattern"
