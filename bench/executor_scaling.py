"""Executor scaling: throughput of N Gemmini evaluations with the local executor and with Ray
on this machine (2 workers), in one run, and Ray's overhead per task.

Every evaluation is real: a distinct variant of ``examples/gemmini/gemm_64.c`` (the kernel
plus a comment naming the variant, so no cache or de-duplication applies) built with the
RISC-V cross compiler and run on Spike with Autocomp's Gemmini model, inside the bubblewrap
sandbox, through the same :class:`~autocomp.evaluator.Evaluator` the search uses (store
off). Measured, in this order:

* local, 1 slot: the baseline throughput of one worker;
* local, 2 slots: the process pool on both cores;
* Ray, 2 workers: a local Ray head started here (``num_cpus=2``), one task per evaluation;

in interleaved rounds (medians reported), so load from elsewhere on the machine hits each
executor alike; the load average is printed with the figures.

Ray's per-task overhead: the same round trip for an evaluation that does no work (the
scripted backend test double, latency 0), one task at a time, minus the same call made
locally; mean of M calls.

Targets (issue 14): Ray with 2 workers at least 1.8x the 1-slot throughput; overhead under
50 ms per task.

    python bench/executor_scaling.py [--n 24] [--rounds 5] [--overhead-calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from autocomp import sandbox  # noqa: E402
from autocomp.backends import get_backend  # noqa: E402
from autocomp.evaluator import Evaluator  # noqa: E402
from autocomp.executor import LocalExecutor, RayExecutor  # noqa: E402
from autocomp.testing.scripted_backend import ScriptedBackend  # noqa: E402

KERNEL = os.path.join(ROOT, "examples", "gemmini", "gemm_64.c")


def variants(code: str, n: int, tag: str) -> list[str]:
    return [code.rstrip("\n") + f"\n// variant {tag}-{i}\n" for i in range(n)]


async def throughput(executor, codes: list[str], warm: list[str]) -> tuple[float, list]:
    backend = get_backend("gemmini")
    problem = backend.make_problem(KERNEL, open(KERNEL, encoding="utf-8").read())
    evaluator = Evaluator(backend, None, concurrency=executor.concurrency, executor=executor)
    # Warm-up: the original kernel's reference run, the toolchain probe, worker start-up.
    await evaluator.evaluate(problem, warm)
    start = time.monotonic()
    results = await evaluator.evaluate(problem, codes)
    return time.monotonic() - start, results


async def overhead(ray_exec: RayExecutor, calls: int) -> tuple[float, float]:
    backend = ScriptedBackend({})
    problem = backend.make_problem("k.kern", "kernel scale {\n  result = 42\n  cost = 1000\n}\n")
    local = LocalExecutor(1)
    for executor in (local, ray_exec):  # warm both paths
        for _ in range(5):
            await executor.evaluate(backend, problem, problem.code)
    timings = {}
    for name, executor in (("local", local), ("ray", ray_exec)):
        samples = []
        for _ in range(calls):
            t = time.perf_counter()
            await executor.evaluate(backend, problem, problem.code)
            samples.append(time.perf_counter() - t)
        timings[name] = samples
    return statistics.mean(timings["ray"]) - statistics.mean(timings["local"]), statistics.median(timings["ray"]) - statistics.median(timings["local"])


async def main_async(n: int, overhead_calls: int, rounds: int) -> None:
    import ray

    code = get_backend("gemmini").make_problem(KERNEL, open(KERNEL, encoding="utf-8").read()).code
    sandbox.require()
    print(f"executor scaling: {n} Gemmini evaluations per measurement (gemm_64 variants; spike + gemmini timing model, sandbox {sandbox.label()})")
    print(f"  machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; ray {ray.__version__}")
    t = time.monotonic()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    print(f"  ray head on this machine with 2 worker CPUs, started in {time.monotonic() - t:.1f} s (not counted)")
    executors = {"local, 1 slot": LocalExecutor(1), "local, 2 slots": LocalExecutor(2), "ray, 2 workers": RayExecutor(concurrency=2)}
    times: dict[str, list[float]] = {label: [] for label in executors}
    # Interleaved rounds, so a burst of load elsewhere on the machine hits every executor alike.
    for r in range(rounds):
        for label, executor in executors.items():
            seconds, results = await throughput(executor, variants(code, n, f"{label}-{r}"), variants(code, 2, f"warm-{label}-{r}"))
            bad = [(res.verdict.value, res.feedback[:200]) for res in results if res.verdict.value != "correct"]
            assert not bad, f"{label}: unexpected verdicts {bad[:2]}"
            times[label].append(seconds)
        print(f"  round {r + 1}: " + ", ".join(f"{label} {times[label][-1]:.2f} s" for label in executors))
    med = {label: statistics.median(v) for label, v in times.items()}
    for label in executors:
        print(f"  {label:15} median {med[label]:6.2f} s for {n}  = {n / med[label]:5.2f} evaluations/s")
    base = med["local, 1 slot"]
    print(
        f"  throughput vs 1 slot: local 2 slots {base / med['local, 2 slots']:.2f}x, "
        f"ray 2 workers {base / med['ray, 2 workers']:.2f}x (target >= 1.8x)"
    )
    print(f"  ray vs the local pool with the same 2 slots: {med['local, 2 slots'] / med['ray, 2 workers']:.2f}x")
    ray_exec = executors["ray, 2 workers"]
    print(f"  ray tasks by worker process: {dict(sorted(ray_exec.stats.where.items()))}")
    mean, median = await overhead(ray_exec, overhead_calls)
    print(
        f"  ray overhead per task (no-op evaluation, {overhead_calls} sequential calls, ray minus local): "
        f"mean {mean * 1000:.1f} ms, median {median * 1000:.1f} ms (target < 50 ms)"
    )
    print(f"  load average at end: {os.getloadavg()[0]:.2f}")
    ray.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=24, help="evaluations per executor")
    parser.add_argument("--overhead-calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians are reported")
    args = parser.parse_args()
    os.environ.setdefault("AUTOCOMP_BUILD_CACHE", os.path.join(tempfile.gettempdir(), "autocomp-bench-build"))
    asyncio.run(main_async(args.n, args.overhead_calls, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
