#!/usr/bin/env bash
# Install Autocomp the way a package-index user would -- from the built wheel into a fresh
# virtual environment, never the editable checkout -- then run `autocomp doctor` and one
# evaluation per target from it (issue 13, item 7). Run from .ci/run after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python -m pip wheel --no-deps -q -w "$work/dist" .
python -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$(ls "$work"/dist/autocomp-*.whl)[gemmini,nki]"
cd "$work"  # away from the checkout: only the installed wheel can be imported
export AUTOCOMP_HOME="$work/home"
"$work/venv/bin/autocomp" doctor
for kernel in examples/gemmini/gemm_64.c examples/nki/gemm.py examples/cuda/row_softmax.cu; do
  cp "$OLDPWD/$kernel" "$work/"
  name="$(basename "$kernel")"
  echo "== autocomp eval $name (from the wheel)"
  "$work/venv/bin/autocomp" eval "$work/$name" --json --no-cache > "$work/eval.json" || true
  "$work/venv/bin/python" - "$work/eval.json" "$name" <<'PY'
import json, sys
result = json.load(open(sys.argv[1]))
ok = result["verdict"] in ("correct", "unverified")
print(f"{sys.argv[2]}: {result['verdict']} [{result['tier']}]")
sys.exit(0 if ok else 1)
PY
done
echo "wheel check: ok"
