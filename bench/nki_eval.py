"""NKI target benchmark: interpreter throughput and evaluation cost per example.

Prints, for each example in examples/nki: instructions per run, interpreter throughput
(instructions per second, in-process, median of several runs), seconds per candidate
evaluation through NkiBackend (child process, 3 seeds plus the reversed-loop run; oracle
already cached), and the estimated cycles of the starting and best (last authored step)
versions. All cycle figures are `cycles (nki estimate)`, not measurements.

It also prints the estimate's own time on synthetic traces of growing length (it must grow
linearly), and, given a local checkout of ucb-bar/autocomp, the seconds the interpreter and
the estimate take on the first step of each published Trainium trajectory at its published
shape (the original, as the oracle run would take it), and the whole evaluation path at those
shapes as `autocomp eval FILE` takes it: the reference run plus the same code as a candidate
through the sandbox (target 30 s here), in wall seconds and in CPU seconds of every process,
with the seconds the parent's estimates took. That is printed three times: with the original's
own text as the candidate (`autocomp eval FILE`, a search's baseline: beside the reference at
most its reversed-loop run), with the same code as another text (the full path of any other
candidate: seeds, the reorder check and the estimate beside the reference), and that again
with the reorder proof off (every candidate also gets its reversed-loop run), followed by the
ratio of the two, measured in the same run. The ``reorder`` column says how the affine_range
check was met. ``--published-only`` skips the examples; the estimate's scaling is printed in
every mode (both speed figures in one run).

    python bench/nki_eval.py [--repeat 5] [--json] [--autocomp /path/to/ucb-bar/autocomp]
                             [--published-only] [--only NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import sys
import tempfile
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


def estimate_scaling(sizes=(2000, 8000, 32000)) -> list[tuple[int, float]]:
    """Seconds the estimate takes on DMA + compute traces of each length."""
    from autocomp.backends.nki.cost import estimate
    from autocomp.backends.nki.trace import Instr

    out = []
    for n in sizes:
        trace = []
        for i in range(n // 3):
            a = 1 + i % 64
            trace.append(Instr("dma_copy", "dma", 1, 128, 512, 2, ((-1, 0, 1, i * 1024, i * 1024 + 1024),),
                               ((a, 0, 128, 0, 1024),), {"bytes": 131072, "chunk_bytes": 1024}))
            trace.append(Instr("nc_matmul", "tensor", 1, 128, 512, 2, ((a, 0, 128, 0, 1024), (200, 0, 128, 0, 256)),
                               ((300 + i % 8, 0, 128, 0, 2048),), {"stationary_free": 128}))
            trace.append(Instr("tensor_copy", "vector", 1, 128, 512, 4, ((300 + i % 8, 0, 128, 0, 2048),),
                               ((400 + a, 0, 128, 0, 2048),), {}))
        start = time.perf_counter()
        estimate(trace)
        out.append((len(trace), time.perf_counter() - start))
    return out


def published_shapes(autocomp: str) -> list[dict]:
    """First step of each published trajectory at its published shape, in a fresh process."""
    sys.path.insert(0, str(ROOT / "bench"))
    import nki_fidelity

    rows = []
    for f in sorted(Path(autocomp).glob("examples/trn-*/*_trace.py")):
        name = f.name[: -len("_trace.py")]
        if name not in nki_fidelity.SHAPES:
            continue
        code, ms = nki_fidelity.trajectory(f)[0]
        r = nki_fidelity.run_step(name, code, 600)
        rows.append({"trajectory": name, "measured_ms": ms, **r})
    return rows


FULL_EVAL = {  # trajectory -> kernel function the file evaluates (conv1d: a wrapper passing the padding)
    "2_gemm": "test", "3_mamba": "test", "4_attention": "test", "5_sd_attention": "test", "4_conv1d": "conv1d_eval",
}


def full_evaluations(autocomp: str, only: str = "", copy: bool = False, proof: bool = True) -> list[dict]:
    """The whole evaluation path at published shapes, as `autocomp eval FILE` takes it: the
    original's run (the reference, in its sandboxed child) and the same code as a candidate.
    The original's own text needs only the reversed-loop run beside the reference (the
    oracle's run stands for the rest); with ``copy`` the candidate is the same code as
    another text (a comment added), which takes the full path any other candidate takes
    (allowlist, sandboxed child with kernel processes, seeds, reversed-loop run, comparison,
    estimate), which starts on the first input set while the reference still runs. Wall
    seconds depend on the machine's load, so the CPU seconds of every process of both
    children are printed beside them; ``ref s`` and ``cand s`` are each child's own time.
    ``proof=False`` turns the reorder proof off (setting ``reorder_proof``): every candidate
    then gets its reversed-loop run, as before the proof existed."""
    from autocomp.backends import get_backend
    from autocomp.backends.nki import harness as nki_harness
    from autocomp.backends.nki.harness import Harness

    sys.path.insert(0, str(ROOT / "bench"))
    import nki_fidelity

    cpu: list[float] = []
    est_s: list[float] = []
    orig = Harness._run_child
    orig_estimate = nki_harness.estimate

    child_s: dict[str, float] = {}
    proven: list[bool] = []

    async def run_child(self, *a, **k):
        run = await orig(self, *a, **k)
        cpu.append(float(run.data.get("cpu_seconds", 0.0)))
        if "reorder_proven" in run.data:
            proven.append(run.data["reorder_proven"] is True)
        child_s[a[2]] = child_s.get(a[2], 0.0) + run.seconds  # by mode: oracle, candidate
        return run

    def timed_estimate(trace):  # the parent's estimate of each run's trace, timed
        start = time.perf_counter()
        try:
            return orig_estimate(trace)
        finally:
            est_s.append(time.perf_counter() - start)

    rows = []
    Harness._run_child = run_child
    nki_harness.estimate = timed_estimate
    try:
        for f in sorted(Path(autocomp).glob("examples/trn-*/*_trace.py")):
            name = f.name[: -len("_trace.py")]
            if name not in FULL_EVAL or (only and only not in name):
                continue
            code, ms = nki_fidelity.trajectory(f)[0]
            text = nki_fidelity.HEADERS["old"] + "import ml_dtypes\n" + code + "\n\n"
            if name == "4_conv1d":
                text += ("\n@nki.jit\ndef conv1d_eval(x, w):\n    return test(x, w, padding=" +
                         eval(nki_fidelity.KWARGS[name])["padding"].__repr__() + ")\n")
            text += f"\ndef get_inputs(rng):\n    return {nki_fidelity.SHAPES[name]}\n"
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / f"{name}.py"
                path.write_text(text, encoding="utf-8")
                backend = get_backend("nki", {"reorder_proof": proof})
                problem = backend.make_problem(str(path), text, FULL_EVAL[name])
                cpu.clear()
                est_s.clear()
                child_s.clear()
                proven.clear()
                load = os.getloadavg()[0]
                start = time.perf_counter()
                code = problem.code.rstrip("\n") + "  # a copy\n" if copy else problem.code
                try:
                    (ev,) = asyncio.run(backend.evaluate(problem, [code]))
                    oracle = backend.harness._oracles[problem.content_hash()]
                except Exception as exc:  # noqa: BLE001 - reported, not fatal
                    rows.append({"trajectory": name, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
                    continue
                end = time.perf_counter()
                backend.harness.close()
            if ev.verdict.value != "correct":
                print(f"  {name}: {ev.verdict.value}: {ev.feedback[:400]}", file=sys.stderr)
            rows.append({"trajectory": name, "verdict": ev.verdict.value, "instructions": int(ev.metrics["instructions"].value)
                         if "instructions" in ev.metrics else 0, "oracle_s": child_s.get("oracle", 0.0),
                         "candidate_s": child_s.get("candidate", 0.0),
                         "wall_s": end - start, "cpu_s": sum(cpu), "seeds_checked": len(oracle.seeds),
                         "estimate_s": sum(est_s),
                         # how the reorder check was met: the proof (no reversed run), or the run
                         "reorder": "proof" if proven and proven[-1] else "reversed",
                         "load_before": load, "load_after": os.getloadavg()[0]})
    finally:
        Harness._run_child = orig
        nki_harness.estimate = orig_estimate
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--autocomp", default="", help="local checkout of ucb-bar/autocomp (published shapes)")
    parser.add_argument("--only", default="", help="published-shape trajectories whose name contains this")
    parser.add_argument("--published-only", action="store_true", help="skip the examples (the estimate's scaling is still printed)")
    args = parser.parse_args()
    from autocomp.backends.nki.detect import find_kernels
    from autocomp.backends.nki.interp import install

    install()
    rows = {}
    for name in ([] if args.published_only else NAMES):
        path = EXAMPLES / f"{name}.py"
        function = find_kernels(path.read_text())[0].name
        instrs, ips = throughput(path, function, args.repeat)
        row = {"instructions": instrs, "instructions_per_second": ips}
        row.update(asyncio.run(evaluation(name, args.repeat)))
        rows[name] = row
    scaling = estimate_scaling()  # cheap, and half of the speed figures: printed in every mode
    shapes = published_shapes(args.autocomp) if args.autocomp and not args.published_only else []
    full = full_evaluations(args.autocomp, args.only) if args.autocomp else []
    full_copy = full_evaluations(args.autocomp, args.only, copy=True) if args.autocomp else []
    full_unproven = full_evaluations(args.autocomp, args.only, copy=True, proof=False) if args.autocomp else []
    if args.json:
        print(json.dumps({"examples": rows, "estimate_scaling": scaling, "published_shapes": shapes,
                          "full_evaluation": full, "full_evaluation_other_candidate": full_copy,
                          "full_evaluation_other_candidate_without_proof": full_unproven}, indent=2))
        return 0
    if rows:
        print(f"{'example':<10} {'instr':>6} {'instr/s':>9} {'s/eval':>7} {'start cycles':>13} {'best cycles':>12} {'speedup':>8}")
    for name, r in rows.items():
        print(f"{name:<10} {r['instructions']:>6} {r['instructions_per_second']:>9,.0f} {r['seconds_per_evaluation']:>7.2f} "
              f"{r['start_cycles']:>13,.0f} {r['best_cycles']:>12,.0f} {r['start_cycles'] / r['best_cycles']:>7.2f}x")
    if rows:
        print("cycles are `cycles (nki estimate)` from Autocomp's analytic model, not measurements; "
              "s/eval = one candidate through NkiBackend (child process, 3 seeds + reversed-loop run).")
    if scaling:
        print("\nestimate time vs trace length (linear: s per 1k instructions stays flat)")
    for n, secs in scaling:
        print(f"  {n:>7} instructions  {secs:7.3f} s  {1000 * secs / n:6.4f} s per 1k")
    if shapes:
        print("\npublished shapes (first step of each trajectory; interpreter run + estimate, one process)")
        for r in shapes:
            if "error" in r:
                print(f"  {r['trajectory']:<16} error: {r['error']}")
            else:
                print(f"  {r['trajectory']:<16} {r['instructions']:>8} instr  run {r['run_s']:6.1f} s  estimate "
                      f"{r['estimate_s']:5.2f} s  total {r['wall_s']:6.1f} s")
    for full, title in ((full, "reference run + the original's own text as the candidate, as `autocomp eval FILE` "
                               "and a search's baseline: beside the reference only its reversed-loop run"),
                        (full_copy, "reference run + the same code as another text (a comment added): the full "
                                    "candidate path any other candidate takes, started beside the reference"),
                        (full_unproven, "the same with reorder_proof = false: every candidate also gets its "
                                        "reversed-loop run, as before the proof")):
        if not full:
            continue
        print(f"\nfull evaluation at published shapes ({title}; through the sandbox; target 30 s here)")
        print(f"  {'trajectory':<16} {'verdict':<8} {'instr':>8} {'ref s':>7} {'cand s':>7} {'wall s':>7} {'CPU s':>7} "
              f"{'est s':>6} {'sets':>4} {'reorder':>8}  load (1-min avg, before/after)")
        for r in full:
            if "error" in r:
                print(f"  {r['trajectory']:<16} error: {r['error']}")
                continue
            print(f"  {r['trajectory']:<16} {r['verdict']:<8} {r['instructions']:>8} {r['oracle_s']:>7.1f} {r['candidate_s']:>7.1f} "
                  f"{r['wall_s']:>7.1f} {r['cpu_s']:>7.1f} {r['estimate_s']:>6.2f} {r['seeds_checked']:>4} {r['reorder']:>8}  "
                  f"{r['load_before']:.1f}/{r['load_after']:.1f}")
        print("  CPU s: every process of both sandboxed children (runner, kernel processes, reversed-loop worker), not "
              "the parent's parsing, comparison and estimate; est s: the parent's estimates (the reference's trace and "
              "the candidate's), part of wall s; ref s / cand s: each child's own wall time (they overlap); sets: "
              "random input sets checked (seed_budget); reorder: how the affine_range check was met (proof: the "
              "first run's trace showed the iterations independent, no reversed run; reversed: the reversed-loop run).")
        slow = [r["trajectory"] for r in full if "error" not in r and r["wall_s"] > 30]
        print(f"  within the 30 s target: {len(full) - len(slow)}/{len(full)}" + (f" (over: {', '.join(slow)})" if slow else ""))
    pairs = [(a, b) for a in full_copy for b in full_unproven
             if a["trajectory"] == b["trajectory"] and "error" not in a and "error" not in b]
    if pairs:
        print("\nthe reorder proof, measured in this run (another candidate's full path, proof on / off)")
        for a, b in pairs:
            print(f"  {a['trajectory']:<16} wall {a['wall_s']:6.1f} / {b['wall_s']:6.1f} s = {a['wall_s'] / b['wall_s']:.2f}   "
                  f"CPU {a['cpu_s']:6.1f} / {b['cpu_s']:6.1f} s = {a['cpu_s'] / max(b['cpu_s'], 1e-9):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
