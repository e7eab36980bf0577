#!/usr/bin/env bash
# NKI target (backends/nki): the NumPy interpreter needs numpy and ml_dtypes (bfloat16,
# fp8). Nothing else: the AWS Neuron SDK is not installable here (every Neuron package on
# PyPI is a placeholder), so its adapter is tested with a named test double. Idempotent.
set -euo pipefail
PY="${PYTHON:-python}"
if "$PY" -c 'import numpy, ml_dtypes' >/dev/null 2>&1; then
  "$PY" -c 'import numpy, ml_dtypes; print(f"nki: numpy {numpy.__version__}, ml_dtypes {ml_dtypes.__version__}")'
else
  "$PY" -m pip install --quiet "numpy>=1.24" "ml_dtypes>=0.4"
fi
