#!/usr/bin/env bash
# Isolation for everything that touches candidate code (autocomp/isolation): Debian's
# bubblewrap gives each evaluation its own user, mount, PID, network and IPC namespaces, an
# empty environment and a read-only view of the toolchain. Idempotent.
set -euo pipefail
if ! command -v bwrap >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap >/dev/null
fi
# Prove it works here (some container runtimes forbid new namespaces).
if bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --unshare-all --die-with-parent \
     --clearenv /bin/true; then
  echo "install-sandbox: bubblewrap $(bwrap --version | awk '{print $2}') works"
else
  echo "install-sandbox: WARNING: bubblewrap is installed but cannot create namespaces here;" \
       "evaluations will refuse to run unless AUTOCOMP_SANDBOX=off" >&2
fi
