#!/usr/bin/env bash
# Re-record the example sessions from their authored scripts (*.script.json).
#
# A recorded session replays by exact prompt hash, and every plan prompt quotes the
# evaluator's feedback (modelled cycles, queue busy figures). So after any change to the
# Gemmini timing model, the prompts in prompts/gemmini/ or the engine's prompt templates,
# run this once and commit the new *.session.jsonl files. It runs the real engine and the
# real evaluator against the loopback fake LLM serving the scripted replies.
# scripts/record_sessions.sh runs this and re-records every other session too.
set -euo pipefail
cd "$(dirname "$0")/../.."
for example in gemm_64 gemm_512 conv; do
  python -m autocomp.testing.author_session "examples/gemmini/${example}.script.json" \
    --record "examples/gemmini/${example}.session.jsonl" -- "examples/gemmini/${example}.c" \
    --iterations 3 --beam 2 --plans 2 --implementations 1 --seed 0 >/dev/null
done
