#!/usr/bin/env bash
# CUDA target (backends/cuda): needs only nvcc, which this machine kind has preinstalled
# (CUDA 13.0, /usr/local/bin/nvcc), and binutils' c++filt for readable kernel names.
# Nothing is downloaded: there is no GPU in CI, and the GPU-tier tests skip with their reason.
# Idempotent; reports what it found.
set -euo pipefail

if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  NVCC="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)"
  echo "install-cuda: nvcc found: $NVCC ($("$NVCC" --version | tail -n 2 | head -n 1))"
else
  echo "install-cuda: WARNING: nvcc not found; tests/cuda compile-tier tests will skip (install the CUDA toolkit)" >&2
fi
if ! command -v c++filt >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y binutils
fi
echo "install-cuda: done"
