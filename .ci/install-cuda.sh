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
# CPU PyTorch runs the GPU tier's two-process runner logic on the CPU (tests/cuda/
# test_cuda_runner_cpu.py). Only where a CPU build lies on local disk (pip's find-links): a plain
# `pip install torch` elsewhere would download a multi-GB CUDA build.
PY="${PYTHON:-python}"
if ! "$PY" -c 'import torch' >/dev/null 2>&1; then
  for dir in ${PIP_FIND_LINKS:-} /opt/wheels; do
    if ls "$dir"/torch-2.13.0+cpu-*.whl >/dev/null 2>&1; then
      "$PY" -m pip install -q "torch==2.13.0" && break
    fi
  done
fi
"$PY" -c 'import torch; print(f"install-cuda: torch {torch.__version__} (CPU) for the runner tests")' 2>/dev/null \
  || echo "install-cuda: no CPU torch wheel on local disk; tests/cuda/test_cuda_runner_cpu.py will skip"
echo "install-cuda: done"
