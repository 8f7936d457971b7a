#!/usr/bin/env bash
# Installs the Debian packages anvil builds against. Idempotent: installs only what is missing.
# Run as root (or with sudo available). Usage: scripts/setup.sh [--with-hip] [--with-python]
set -euo pipefail

pkgs=(cmake ninja-build g++ pkg-config libgtest-dev libopenblas-pthread-dev libopenblas-openmp-dev libpcre2-dev nlohmann-json3-dev
      libcli11-dev libtomlplusplus-dev libcpp-httplib-dev libopenmpi-dev openmpi-bin fortunes)
want_hip=0; want_py=0
for a in "$@"; do
  case "$a" in
    --with-hip) want_hip=1 ;;
    --with-python) want_py=1 ;;
    *) echo "setup.sh: unknown option '$a' (expected --with-hip or --with-python)" >&2; exit 2 ;;
  esac
done
# The AMD build: Debian's hipcc 5.2 compiles gfx90a; there is no AMD GPU on these machines to run it.
if [[ $want_hip == 1 ]]; then pkgs+=(hipcc libamdhip64-dev rocm-device-libs); fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""; [[ $(id -u) != 0 ]] && sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Small Python references used by the parity tests (tokenizers, safetensors, numpy).
if [[ $want_py == 1 ]]; then
  python3 - <<'PY' 2>/dev/null || python3 -m pip install -q tokenizers safetensors numpy
import tokenizers, safetensors, numpy
PY
fi
echo "setup: ok"
