#!/usr/bin/env bash
# The GPU-tier checks of the CUDA target in one run, for a bare GPU machine that has CUDA,
# PyTorch and pytest but not Autocomp's dependencies or bubblewrap (such as a lent device).
#
# Prepare here (a machine with pip and apt), in the repository root:
#   mkdir -p .gpu && apt-get download bubblewrap && mv bubblewrap_*.deb .gpu/
#   python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform any -d .gpu/wheels \
#     "pygls>=2.1,<3" "lsprotocol>=2025.0.0" openai anthropic "diskcache>=5.6" pytest-asyncio
#   (then delete from .gpu/wheels what the GPU machine already has: numpy, pytest, attrs, ...)
# Run there, in the repository root:  bash bench/gpu_device_check.sh [OUTDIR]
#
# Autocomp is put on PYTHONPATH as a copied overlay (the package mapping of setup.py), so
# nothing is installed into the machine's Python; every test has its own time limit, so a
# slow or hanging one reports instead of swallowing the rest.
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
OUT="${1:-${OUT:-/tmp/gpu-device-check}}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
if ! command -v bwrap >/dev/null && ls "$ROOT"/.gpu/bubblewrap_*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/gpu-bwrap && dpkg -x "$ROOT"/.gpu/bubblewrap_*.deb /tmp/gpu-bwrap && export PATH=/tmp/gpu-bwrap/usr/bin:$PATH
fi
bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc true && echo "sandbox: bwrap works" \
  || echo "sandbox: bwrap does NOT work here (evaluations will refuse; AUTOCOMP_SANDBOX=off to look anyway)"
SITE=/tmp/gpu-site
rm -rf "$SITE" && mkdir -p "$SITE"
if ls "$ROOT"/.gpu/wheels/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$ROOT"/.gpu/wheels/*.whl
fi
cp -r "$ROOT/autocomp" "$SITE/autocomp"
for pkg in backends prompts server; do cp -r "$ROOT/$pkg" "$SITE/autocomp/$pkg"; done
export PYTHONPATH="$SITE"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
"$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
command -v nvcc && nvcc --version | tail -1
cd /tmp  # not the checkout: `python -m` would import its unmapped autocomp/
T="$ROOT/tests/cuda"
"$PY" -m pytest -q -p no:cacheprovider -rs -o addopts="" --timeout "${TEST_TIMEOUT:-240}" \
  "$T/test_cuda_gpu.py" "$T/test_cuda_cu_runner.py" "$T/test_cuda_harness.py" "$T/test_cuda_runner_cpu.py" \
  "$ROOT/tests/security/test_cuda_attacks.py" 2>&1 | tee "$OUT/pytest.log" | tail -80
