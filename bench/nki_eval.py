"""NKI target benchmark: interpreter throughput and evaluation cost per example.

Prints, for each example in examples/nki: instructions per run, interpreter throughput
(instructions per second, in-process, median of several runs), seconds per candidate
evaluation through NkiBackend (child process, 3 seeds plus the reversed-loop run; oracle
already cached), and the estimated cycles of the starting and best (last authored step)
versions. All cycle figures are `cycles (nki estimate)`, not measurements.

    python bench/nki_eval.py [--repeat 5] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import time
from pathlib import Path

# One BLAS thread, as in the evaluation children: the interpreter's matmuls are small and
# BLAS thread pools only contend on a shared machine.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "nki"
NAMES = ["gemm", "rmsnorm", "layernorm", "softmax"]


def _module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def throughput(path: Path, function: str, repeat: int) -> tuple[int, float]:
    from autocomp.backends.nki.interp.install import execute

    mod = _module(path, f"bench_{path.stem}")
    args = mod.get_inputs(np.random.default_rng(0))
    times, count = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        res = execute(getattr(mod, function), args, kernel_file=str(path))
        times.append(time.perf_counter() - start)
        count = len(res.trace)
    return count, count / statistics.median(times)


async def evaluation(name: str, repeat: int) -> dict:
    from autocomp.backends import get_backend

    backend = get_backend("nki")
    path = EXAMPLES / f"{name}.py"
    problem = backend.make_problem(str(path), path.read_text())
    best_path = sorted((EXAMPLES / "steps").glob(f"{name}_*.py"))[-1]
    best = backend.make_problem(str(best_path), best_path.read_text()).code
    start = time.perf_counter()
    await backend.harness.oracle(problem)
    oracle_s = time.perf_counter() - start
    secs = []
    for _ in range(repeat):
        start = time.perf_counter()
        (ev,) = await backend.evaluate(problem, [problem.code])
        secs.append(time.perf_counter() - start)
    (best_ev,) = await backend.evaluate(problem, [best])
    return {
        "oracle_seconds": oracle_s,
        "seconds_per_evaluation": statistics.median(secs),
        "start_cycles": ev.metrics["cycles"].value,
        "best_cycles": best_ev.metrics["cycles"].value,
        "best_step": best_path.name,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from autocomp.backends.nki.detect import find_kernels
    from autocomp.backends.nki.interp import install

    install()
    rows = {}
    for name in NAMES:
        path = EXAMPLES / f"{name}.py"
        function = find_kernels(path.read_text())[0].name
        instrs, ips = throughput(path, function, args.repeat)
        row = {"instructions": instrs, "instructions_per_second": ips}
        row.update(asyncio.run(evaluation(name, args.repeat)))
        rows[name] = row
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'example':<10} {'instr':>6} {'instr/s':>9} {'s/eval':>7} {'start cycles':>13} {'best cycles':>12} {'speedup':>8}")
    for name, r in rows.items():
        print(f"{name:<10} {r['instructions']:>6} {r['instructions_per_second']:>9,.0f} {r['seconds_per_evaluation']:>7.2f} "
              f"{r['start_cycles']:>13,.0f} {r['best_cycles']:>12,.0f} {r['start_cycles'] / r['best_cycles']:>7.2f}x")
    print("cycles are `cycles (nki estimate)` from Autocomp's analytic model, not measurements; "
          "s/eval = one candidate through NkiBackend (child process, 3 seeds + reversed-loop run).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
