"""What isolation costs: wall time of one evaluation with and without the bubblewrap sandbox,
measured in one run on this machine.

    python bench/sandbox_overhead.py [--repeat 7] [--json]

For each case (the 512^3 int8 Gemmini GEMM on Spike with our timing model, and the NKI GEMM
example on our interpreter) the reference is evaluated first so that only candidate
evaluations are timed, as in a search. Runs alternate isolated / unisolated so that machine
drift hits both alike; the figure is the median of each, and the overhead is
isolated ÷ unisolated − 1. Target (issue 10): at most 10%.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

from autocomp import sandbox
from autocomp.backends import get_backend

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    ("gemmini gemm_512 (spike + gemmini timing model)", ROOT / "examples" / "gemmini" / "gemm_512.c", "gemmini"),
    ("nki gemm (nki interpreter + estimate)", ROOT / "examples" / "nki" / "gemm.py", "nki"),
]


async def _time_once(backend, problem) -> float:
    start = time.perf_counter()
    (evaluation,) = await backend.evaluate(problem, [problem.code])
    seconds = time.perf_counter() - start
    if evaluation.verdict.value != "correct":
        raise SystemExit(f"{problem.path}: evaluation was {evaluation.verdict.value}: {evaluation.feedback[:500]}")
    return seconds


async def measure(path: Path, target: str, repeat: int) -> dict[str, float]:
    backend = get_backend(target)
    problem = backend.make_problem(str(path), path.read_text())
    times: dict[str, list[float]] = {"isolated": [], "unisolated": []}
    # Warm-up in both modes: builds, caches and the reference are paid here.
    for mode in ("isolated", "unisolated"):
        sandbox.configure(None if mode == "isolated" else "off")
        await _time_once(backend, problem)
    for i in range(repeat):
        order = ("isolated", "unisolated") if i % 2 == 0 else ("unisolated", "isolated")
        for mode in order:
            sandbox.configure(None if mode == "isolated" else "off")
            times[mode].append(await _time_once(backend, problem))
    sandbox.configure(None)
    iso, off = statistics.median(times["isolated"]), statistics.median(times["unisolated"])
    return {"isolated_s": iso, "unisolated_s": off, "overhead": iso / off - 1.0, "runs": repeat}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if os.environ.get("AUTOCOMP_SANDBOX"):
        print("unset AUTOCOMP_SANDBOX: this bench switches isolation itself", file=sys.stderr)
        return 2
    probe = sandbox.probe()
    if not probe.works:
        print(f"bubblewrap does not work here: {probe.detail}", file=sys.stderr)
        return 2
    results = {}
    for label, path, target in CASES:
        results[label] = asyncio.run(measure(path, target, args.repeat))
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"isolation: {probe.detail}; pids limit by {probe.pids}")
    print(f"{'case':<52} {'isolated s':>11} {'unisolated s':>13} {'overhead':>9}")
    for label, r in results.items():
        print(f"{label:<52} {r['isolated_s']:>11.3f} {r['unisolated_s']:>13.3f} {100 * r['overhead']:>8.1f}%")
    print(f"(wall seconds per candidate evaluation, median of {args.repeat} alternating runs; target: overhead <= 10%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
