#!/usr/bin/env bash
# `autocomp tune`: Optuna (the extra autocomp[tune], also part of autocomp[all]), then a check
# that its samplers import. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
if ! "$PY" -c "import optuna" >/dev/null 2>&1; then
  "$PY" -m pip install -q -e ".[tune]"
fi
"$PY" -c "import optuna; optuna.samplers.TPESampler(seed=0); print('install-tune: optuna', optuna.__version__)"
