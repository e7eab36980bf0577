"""End-to-end check of the CUDA target on a machine with an NVIDIA GPU (run through
bench/gpu_check.sh, which sets up the import path without installing anything).

1. verify + time: every example's starting kernel and our hand-written step-1 and step-2
   kernels, through CudaBackend (the real verified-and-timed tier: correctness against the
   PyTorch reference / original kernel on several seeds, CUDA events, L2 flush, >= 100
   trials), all examples at once so nvcc/load_inline builds overlap while timings queue
   for the GPU one at a time;
2. optimize with the authored session: when the engine's dependencies import (diskcache,
   openai), the real engine runs each example's session script through
   ``autocomp.testing.author_session`` (recording OUT/<name>.session.jsonl); otherwise the
   session's candidates are replayed through the backend in the engine's beam order and the
   table says so;
3. a table of timings and speedups, also written as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "cuda"
KB = ["softmax", "matmul", "layernorm", "row_mean", "bias_gelu"]
SEARCH_FLAGS = ["--iterations", "2", "--beam", "1", "--plans", "2", "--implementations", "1", "--seed", "0"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_sessions_module():
    spec = importlib.util.spec_from_file_location("cuda_sessions", EXAMPLES / "sessions" / "make_scripts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def preflight(compile_only: bool) -> list[str]:
    """What is missing for the GPU tier; empty when everything is there."""
    from autocomp.backends.cuda import gpu
    from autocomp.backends.cuda.compile import find_nvcc

    problems = []
    if find_nvcc() is None:
        problems.append("nvcc not found (set NVCC or put the CUDA toolkit's bin on PATH)")
    if compile_only:
        return problems
    if not gpu.gpu_names():
        problems.append("no NVIDIA GPU visible to nvidia-smi")
    try:
        import torch

        if not torch.cuda.is_available():
            problems.append("PyTorch cannot see a GPU (torch.cuda.is_available() is False)")
    except ImportError:
        problems.append("PyTorch is not installed")
    return problems


def ms(ev) -> float | None:
    m = ev.metrics.get("ms")
    return m.value if m is not None and ev.verdict.value == "correct" else None


def describe(ev) -> str:
    value = ms(ev)
    if value is not None:
        return f"{value:.4f}"
    return ev.verdict.value


async def verify_and_time(backend, names: list[str]) -> dict[str, dict]:
    """Phase 1: start, step 1, step 2 of every example, all examples concurrently."""
    sessions = load_sessions_module()

    async def one(name: str) -> tuple[str, dict]:
        if name == "row_softmax_cu":
            path = EXAMPLES / "row_softmax.cu"
            text = path.read_text()
            problem = backend.make_problem(str(path), text)
            improved = backend.make_problem("step1.cu", (EXAMPLES / "improved" / "row_softmax_step1.cu").read_text())
            codes = {"start": problem.code, "step1": improved.code}
        else:
            path = EXAMPLES / f"{name}.py"
            text = path.read_text()
            problem = backend.make_problem(str(path), text)
            codes = {"start": problem.code, "step1": sessions.section(name, 1), "step2": sessions.section(name, 2)}
        t0 = time.monotonic()
        evs = await backend.evaluate(problem, list(codes.values()))
        log(f"{name}: evaluated {len(codes)} kernels in {time.monotonic() - t0:.0f} s: "
            + ", ".join(f"{k}={describe(e)}" for k, e in zip(codes, evs)))
        return name, {"problem": problem, "evals": dict(zip(codes, evs))}

    return dict(await asyncio.gather(*(one(n) for n in names)))


def engine_available() -> str:
    """'' when the engine can run here, else what is missing."""
    missing = [m for m in ("diskcache", "openai") if importlib.util.find_spec(m) is None]
    return ", ".join(missing)


def optimize_with_engine(names: list[str], out: Path, budget_s: float) -> dict[str, dict]:
    """Phase 2 (engine present): the real engine on each authored session, all at once."""
    procs = {}
    for name in names:
        script = EXAMPLES / "sessions" / f"{name}.script.json"
        record = out / f"{name}.session.jsonl"
        argv = [sys.executable, "-m", "autocomp.testing.author_session", str(script), "--record", str(record), "--",
                str(EXAMPLES / f"{name}.py"), *SEARCH_FLAGS, "--json"]
        procs[name] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    results = {}
    deadline = time.monotonic() + budget_s
    for name, proc in procs.items():
        try:
            stdout, stderr = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
            results[name] = {"mode": "engine", "error": "time budget exhausted"}
            continue
        best, summary = None, {}
        for line in stdout.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("type") == "run_finished":
                metric = event["best"]["evaluation"]["metrics"].get("ms")
                best = metric["value"] if metric else None
                summary = {"speedup": event.get("speedup"), "best_plan": event["best"].get("plan", "")[:80],
                           "evaluated": event.get("evaluated_total")}
            elif event.get("type") == "run_failed":
                summary = {"error": event.get("error", "")[:300]}
        results[name] = {"mode": "engine", "best_ms": best, "best": "engine", "returncode": proc.returncode, **summary,
                         "tail": (stderr or "")[-600:], "session": str(out / f"{name}.session.jsonl")}
        log(f"{name}: engine run finished (exit {proc.returncode}), best {best}")
    return results


async def optimize_by_replay(backend, phase1: dict[str, dict], names: list[str]) -> dict[str, dict]:
    """Phase 2 (engine absent): the authored session's candidates in the engine's beam order:
    iteration 1 tries plan 1 (step 1) and plan 2 (a block-size variant) against the start;
    iteration 2 tries step 2 against the survivor. A child survives only if correct and faster."""
    sessions = load_sessions_module()

    async def one(name: str) -> tuple[str, dict]:
        problem = phase1[name]["problem"]
        evals = phase1[name]["evals"]
        script = sessions.script(name)
        variant = next(r["reply"] for r in script["rules"] if r["role"] == "implement" and "(variant)" in r["reply"])
        variant_code = variant.split("```python\n", 1)[1].rsplit("```", 1)[0]
        (variant_ev,) = await backend.evaluate(problem, [variant_code])
        best_name, best = "start", ms(evals["start"])
        trail = [f"start {describe(evals['start'])}"]
        for label, ev in (("step1", evals["step1"]), ("variant", variant_ev)):
            trail.append(f"{label} {describe(ev)}")
            if ms(ev) is not None and (best is None or ms(ev) < best):
                best_name, best = label, ms(ev)
        if best_name != "start":
            ev2 = evals["step2"]
            trail.append(f"step2 {describe(ev2)}")
            if ms(ev2) is not None and ms(ev2) < best:
                best_name, best = "step2", ms(ev2)
        return name, {"mode": "replay through backend", "best_ms": best, "best": best_name, "trail": trail}

    return dict(await asyncio.gather(*(one(n) for n in names)))


def table(phase1: dict[str, dict], phase2: dict[str, dict]) -> str:
    header = ["problem", "PyTorch/orig ms", "start ms", "step1 ms", "step2 ms", "best vs start", "best vs ref", "optimize"]
    rows = [header]
    speedups = []
    for name, data in phase1.items():
        evals = data["evals"]
        ref = None
        for ev in evals.values():
            if ev.metrics.get("reference_ms") is not None and ev.verdict.value == "correct":
                ref = ev.metrics["reference_ms"].value
                break
        start = ms(evals["start"])
        steps = [ms(e) for k, e in evals.items() if k != "start"]
        best = min([s for s in steps if s is not None] + ([start] if start else []), default=None)
        opt = phase2.get(name, {})
        opt_text = opt.get("error") or (f"{opt['best_ms']:.4f} ms ({opt.get('best', 'engine')})" if opt.get("best_ms") else "-")
        if best and ref:
            speedups.append(ref / best)
        rows.append([
            name,
            f"{ref:.4f}" if ref else "-",
            describe(evals["start"]),
            describe(evals["step1"]) if "step1" in evals else "-",
            describe(evals["step2"]) if "step2" in evals else "-",
            f"{start / best:.2f}x" if start and best else "-",
            f"{ref / best:.2f}x" if ref and best else "-",
            opt_text,
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    if speedups:
        geo = statistics.geometric_mean(speedups)
        lines.append(f"geometric mean speedup of the best kernel over the reference: {geo:.2f}x ({len(speedups)} problems)")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> int:
    from autocomp.backends.cuda import CudaBackend
    from autocomp.backends.cuda import gpu

    started = time.monotonic()
    problems = preflight(args.compile_only)
    if problems:
        print("gpu_check: cannot run the GPU tier here: " + "; ".join(problems), file=sys.stderr)
        print("gpu_check: rerun with --compile-only to check the compile tier alone.", file=sys.stderr)
        return 2
    settings = {"seeds": [0, 1, 2], "trials": 100}
    if args.compile_only:
        settings["gpu"] = "off"
    backend = CudaBackend(settings)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n for n in KB + ["row_softmax_cu"] if not args.only or n in args.only]
    log(f"tier: {backend.tier().name} ({', '.join(gpu.gpu_names()) or 'no GPU'}); examples: {', '.join(names)}")
    phase1 = await verify_and_time(backend, names)
    log(f"verify + time done after {time.monotonic() - started:.0f} s")
    kb_names = [n for n in names if n in KB]
    missing = engine_available()
    remaining = args.budget - (time.monotonic() - started) - 20
    if args.compile_only:
        phase2 = {}
    elif not missing:
        phase2 = await asyncio.to_thread(optimize_with_engine, kb_names, out, remaining)
    else:
        log(f"engine dependencies missing here ({missing}): replaying the authored sessions' candidates through the backend")
        phase2 = await optimize_by_replay(backend, phase1, kb_names)
    text = table(phase1, phase2)
    print()
    print(text)
    print(f"\nmetric: median ms (runner clock, {', '.join(gpu.gpu_names()) or 'n/a'}, transfers subtracted), >= 100 trials, "
          "fresh inputs per trial, candidate in its own process; "
          f"'ref' is PyTorch (Model) for .py problems and the original kernel for .cu; total {time.monotonic() - started:.0f} s")
    (out / "gpu_check.txt").write_text(text + "\n")
    (out / "gpu_check.json").write_text(json.dumps({
        name: {k: ev.to_json() for k, ev in data["evals"].items()} for name, data in phase1.items()
    } | {"optimize": phase2}, indent=1, default=str))
    ok = all(ev.verdict.value in ("correct", "unverified") for d in phase1.values() for ev in d["evals"].values())
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("GPU_CHECK_OUT", "gpu_check_out"))
    parser.add_argument("--only", nargs="*", help="example names (softmax matmul layernorm row_mean bias_gelu row_softmax_cu)")
    parser.add_argument("--budget", type=float, default=460.0, help="seconds for the whole check")
    parser.add_argument("--compile-only", action="store_true", help="no GPU: run the compile tier on everything")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
