#!/usr/bin/env bash
# Installs the Debian packages s2s needs, only those missing. Called by `make deps` (and so
# by `make`, `make test` and `make demo`); safe to run again.
set -euo pipefail
PKGS=(libopenblas-dev libdnnl-dev libcjson-dev libpng-dev zlib1g-dev libfreetype-dev fonts-dejavu-core
      libcriterion-dev pkg-config sentencepiece man-db libopenmpi-dev openmpi-bin libmicrohttpd-dev
      python3 python3-numpy python3-venv python3-pytest mypy python3-nbclient python3-nbformat python3-ipykernel
      python3-onnx) # the ONNX export's checker (scripts/onnx-check.py)
for a in "$@"; do
    case $a in
    --with-clang) PKGS+=(clang libclang-rt-14-dev) ;;
    --with-browser) PKGS+=(chromium) ;; # ./serve's page tested in headless Chromium
    --with-torch) PKGS+=(python3-torch) ;; # the PyTorch loader (s2s.pytorch) and scripts/torch-check.py tested
    --with-bench) PKGS+=(python3-torch libopenblas0-openmp libtcmalloc-minimal4) ;; # make bench: the PyTorch baseline, on OpenBLAS's OpenMP build, with tcmalloc
    esac
done

# ONNX Runtime for the export's checks: npm's onnxruntime-node (its CPU library is in the package;
# --ignore-scripts skips the install script, which would fetch GPU parts from elsewhere). Node
# and npm from Debian where no node is installed. Without a registry the tests say SKIP.
command -v node >/dev/null 2>&1 || PKGS+=(nodejs)
command -v npm >/dev/null 2>&1 || PKGS+=(npm)
onnx_runtime() {
    [ -d scripts/onnx/node_modules/onnxruntime-node ] && return 0
    command -v npm >/dev/null 2>&1 || return 0
    echo "deps: npm install onnxruntime-node (scripts/onnx)"
    (cd scripts/onnx && npm install --ignore-scripts --no-audit --no-fund --loglevel=error) ||
        echo "deps: onnxruntime-node could not be installed; the ONNX Runtime checks will be skipped" >&2
}
cd "$(dirname "$0")/.."

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: not a Debian system; install the equivalents of: ${PKGS[*]}" >&2
    onnx_runtime
    exit 0
fi
missing=()
for p in "${PKGS[@]}"; do
    status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$status" = "installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then onnx_runtime; exit 0; fi

echo "deps: installing ${missing[*]}"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO=sudo
    else echo "deps: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
onnx_runtime
