#!/usr/bin/env bash
# Builds the VS Code extension offline: type-check (tsc --noEmit), unit tests (node --test),
# bundle (esbuild) and package (vsce package --no-dependencies) into
# editors/vscode/dist/autocomp-vscode.vsix. Run .ci/install-vscode.sh first (npm ci).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/../editors/vscode"

if [ ! -d node_modules ]; then
  bash "$here/install-vscode.sh"
fi

echo "== vscode: type-check"
npx --no-install tsc --noEmit -p .
echo "== vscode: unit tests"
node esbuild.mjs --tests
node --test out/test/
echo "== vscode: bundle"
node esbuild.mjs
echo "== vscode: package"
rm -f dist/autocomp-vscode.vsix
npx --no-install vsce package --no-dependencies --skip-license --allow-missing-repository \
  --out dist/autocomp-vscode.vsix </dev/null
test -s dist/autocomp-vscode.vsix
# The package must hold the bundle and the manifest with every command it advertises.
node -e '
const m = require("./package.json");
const ids = m.contributes.commands.map(c => c.command);
const src = require("fs").readFileSync("dist/extension.js", "utf8");
const missing = ids.filter(id => !src.includes(JSON.stringify(id)));
if (missing.length) { console.error("commands contributed but not registered in the bundle: " + missing.join(", ")); process.exit(1); }
console.log("vscode: " + ids.length + " commands contributed and registered");
'
ls -l dist/autocomp-vscode.vsix
