#!/usr/bin/env bash
# Installs what the VS Code extension's build needs: its npm packages, exactly as pinned in
# editors/vscode/package-lock.json. Node.js 20+ and npm come with this machine; nothing else
# is downloaded (build-vscode.sh then works offline). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../editors/vscode"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-vscode: node and npm are needed (Node.js 20 or newer); install them first" >&2
  exit 1
fi
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "install-vscode: Node.js $(node --version) is too old; @vscode/vsce 3.9.2 needs Node.js 20 or newer" >&2
  exit 1
fi

# npm ci wipes and reinstalls node_modules from the lock file; skip it when the installed
# tree already matches the lock (npm writes its own copy of the lock into node_modules).
if [ -f node_modules/.package-lock.json ] && cmp -s <(node -p 'JSON.stringify(require("./package-lock.json").packages)') \
  <(node -p 'const p = require("./node_modules/.package-lock.json").packages; const l = require("./package-lock.json").packages; JSON.stringify(Object.fromEntries(Object.keys(l).map(k => [k, k === "" ? l[k] : p[k]])))'); then
  echo "install-vscode: node_modules already matches package-lock.json"
else
  npm ci --no-audit --no-fund
fi
