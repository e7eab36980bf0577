#!/usr/bin/env bash
# Re-record every authored session in one command, so replays (the README demo, the tests
# and the benches) match this checkout's prompts and evaluators.
#
# A recorded session replays by exact prompt hash, and prompts quote the evaluator's
# figures (modelled cycles, estimates, queue and engine profiles). So after any change to
# prompts/, autocomp/prompting.py, the plan/repair call sites in autocomp/search.py, the
# Gemmini timing model or the NKI cost model, run this once and commit the changed
# *.session.jsonl files. No key is needed: the authored plans and code (*.script.json) are
# served by the loopback fake LLM to the real engine and evaluators.
#
#   bash scripts/record_sessions.sh            # everything: gemmini, nki, bench/reuse, then checks
#   bash scripts/record_sessions.sh gemmini    # only some: gemmini | nki | reuse | check
#
# CUDA has no recorded sessions in the repository: they can only be recorded where the GPU
# tier measures (bench/gpu_check.sh on a GPU host; see docs/cuda.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x .venv/bin/python ]; then export PATH="$PWD/.venv/bin:$PATH"; fi
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(gemmini nki reuse check)
flags=(--iterations 3 --beam 2 --plans 2 --implementations 1 --seed 0)
for part in "${parts[@]}"; do
  case "$part" in
    gemmini)
      echo "record_sessions: gemmini examples" >&2
      bash examples/gemmini/record_sessions.sh ;;
    nki)
      echo "record_sessions: nki examples" >&2
      python examples/nki/sessions/make_scripts.py
      for n in gemm rmsnorm layernorm softmax; do
        python -m autocomp.testing.author_session "examples/nki/sessions/$n.script.json" \
          --record "examples/nki/$n.session.jsonl" -- "examples/nki/$n.py" "${flags[@]}" >/dev/null
      done ;;
    reuse)
      echo "record_sessions: bench/reuse (schedule reuse bench)" >&2
      python bench/schedule_reuse.py --author ;;
    check)
      # Each replay must run to the end with no missing reply and no failed candidate.
      echo "record_sessions: checking every replay" >&2
      status=0
      check='
import json, sys
events = [json.loads(l) for l in sys.stdin if l.startswith("{")]
verdicts = [e["candidate"]["evaluation"]["verdict"] for e in events if e.get("type") == "candidate_evaluated"]
done = [e for e in events if e.get("type") == "run_finished"]
ok = bool(done) and bool(verdicts) and set(verdicts) == {"correct"}
speed = done[0].get("speedup") if done else None
word = "ok" if ok else "STALE (re-record, or a candidate failed)"
print(f"  {sys.argv[1]}: {word} ({len(verdicts)} candidates, speedup {speed})", file=sys.stderr)
sys.exit(0 if ok else 1)'
      for f in examples/gemmini/gemm_64.c examples/gemmini/gemm_512.c examples/gemmini/conv.c \
               examples/nki/gemm.py examples/nki/rmsnorm.py examples/nki/layernorm.py examples/nki/softmax.py; do
        out="$(autocomp optimize "$f" --llm "replay:${f%.*}.session.jsonl" "${flags[@]}" --json 2>&1)" || true
        python -c "$check" "$f" <<<"$out" || status=1
      done
      exit $status ;;
    *) echo "record_sessions: unknown part $part (gemmini | nki | reuse | check)" >&2; exit 2 ;;
  esac
done
