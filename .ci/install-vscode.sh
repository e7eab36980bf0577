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

# npm ci installs exactly the lock file (and replaces any node_modules), so it is idempotent.
npm ci --no-audit --no-fund
