#!/usr/bin/env bash
# The Ray executor (autocomp optimize --executor ray, setting autocomp.executor): the optional
# extra autocomp[ray] from PyPI, then a check that a local head starts on loopback and runs a
# task (the tests in tests/scale start their own head the same way and stop it). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=python
[ -x .venv/bin/python ] && PY=.venv/bin/python
if ! "$PY" -c "import ray" >/dev/null 2>&1; then
  "$PY" -m pip install -q -e ".[ray]"
fi
"$PY" - <<'PYEOF'
import ray
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
try:
    assert ray.get(ray.remote(lambda: 42).remote()) == 42
    print(f"install-ray: ray {ray.__version__} runs tasks on a local head")
finally:
    ray.shutdown()
PYEOF
