#!/usr/bin/env bash
# The main job: optimize the bundled 512x512x512 int8 Gemmini GEMM on Spike with our timing model.
# With OPENAI_API_KEY or ANTHROPIC_API_KEY set, a live model is used; otherwise the
# bundled recorded session is replayed (and every output says it is a replay).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
example="${1:-examples/gemmini/gemm_512.c}"
session="${example%.*}.session.jsonl"
flags=(--iterations 3 --beam 2 --plans 2 --implementations 1 --seed 0)
if [ -n "${OPENAI_API_KEY:-}" ]; then
  llm=(--llm "openai:${AUTOCOMP_OPENAI_MODEL:-gpt-5}")
elif [ -n "${ANTHROPIC_API_KEY:-}" ]; then
  llm=(--llm "anthropic:${AUTOCOMP_ANTHROPIC_MODEL:-claude-sonnet-4-5}")
else
  echo "demo: no API key set; replaying the recorded session $session"
  llm=(--llm "replay:$session")
fi
autocomp doctor
autocomp optimize "$example" "${llm[@]}" "${flags[@]}"
