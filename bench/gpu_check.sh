#!/usr/bin/env bash
# End-to-end check of Autocomp's CUDA target on a machine with an NVIDIA GPU: verify and
# time every example (starting kernels and our improved ones), optimize each with its
# authored session, print a table of timings and speedups. Installs nothing: the
# repository is put on the import path through a symlinked overlay. See docs/cuda.md.
#
#   bash bench/gpu_check.sh                  # full check (needs a GPU, PyTorch, nvcc)
#   bash bench/gpu_check.sh --compile-only   # compile tier only (no GPU needed)
#   GPU_CHECK_OUT=/tmp/out bash bench/gpu_check.sh --only softmax matmul
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/autocomp-gpu-check.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

# Use an installed autocomp if it is this checkout; otherwise build an import overlay:
# autocomp/ with backends/, prompts/ and server/ linked in, as the package mapping does.
if ! "$PY" - "$ROOT" <<'PYEOF' 2>/dev/null
import sys, pathlib
import autocomp.backends.cuda as m
sys.exit(0 if pathlib.Path(m.__file__).resolve().is_relative_to(pathlib.Path(sys.argv[1]).resolve()) else 1)
PYEOF
then
  mkdir -p "$WORK/site/autocomp"
  for entry in "$ROOT"/autocomp/*; do
    ln -s "$entry" "$WORK/site/autocomp/$(basename "$entry")"
  done
  ln -s "$ROOT/backends" "$WORK/site/autocomp/backends"
  ln -s "$ROOT/prompts" "$WORK/site/autocomp/prompts"
  ln -s "$ROOT/server" "$WORK/site/autocomp/server"
  export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
fi

export AUTOCOMP_HOME="${AUTOCOMP_HOME:-$WORK/home}"
export AUTOCOMP_CUDA_CACHE="${AUTOCOMP_CUDA_CACHE:-$WORK/cuda-cache}"  # shared by both phases: builds are reused
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
OUT="${GPU_CHECK_OUT:-${TMPDIR:-/tmp}/autocomp-gpu-check-out}"
echo "gpu_check: results and recorded sessions go to $OUT"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
# (not exec: the EXIT trap above must still remove $WORK when the check ends)
status=0
timeout 475 "$PY" "$ROOT/bench/gpu_check.py" --out "$OUT" "$@" || status=$?
exit "$status"
