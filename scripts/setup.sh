#!/usr/bin/env bash
# Set up everything Autocomp needs on a fresh Debian 12 machine: system packages (cross
# compiler, device-tree compiler, editors for the end-to-end tests, Node for the VS Code
# extension), a virtual environment in .venv with Autocomp and all its extras, and each
# target's own install step (.ci/install-*.sh). Idempotent; safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

export DEBIAN_FRONTEND=noninteractive
as_root apt-get update -qq
as_root apt-get install -y -qq python3 python3-venv python3-pip python3-dev git g++ make >/dev/null
# Node.js 20+ builds the VS Code extension; the machine image usually has it already.
if ! command -v node >/dev/null 2>&1; then
  as_root apt-get install -y -qq nodejs npm >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
export PATH="$PWD/.venv/bin:$PATH"
python -m pip install -q --upgrade pip
python -m pip install -q -e ".[all]"

for step in .ci/install-*.sh; do
  [ -e "$step" ] || continue
  echo "setup: $step"
  bash "$step"
done
echo "setup: done. Activate with: source .venv/bin/activate"
