"""The verified-and-timed tier: runs the reference and a candidate on a local NVIDIA GPU
and turns what the harness measured into an :class:`Evaluation`.

Two forms: annotated ``.cu`` files go through the generated C++ harness
(:mod:`harness_cu`), KernelBench-style Python through :mod:`gpu_runner`. Both run as
their own processes through :func:`run_limited` (no address-space limit: a CUDA context
reserves far more virtual memory than it uses), one timing at a time per host.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import secrets
import statistics
import sys
import tempfile
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import AsyncIterator

from autocomp.backends.cuda import harness_cu
from autocomp.backends.cuda.annotations import Annotation
from autocomp.backends.cuda.compile import Compiler
from autocomp.model import Metric, Verdict
from autocomp.sandbox import run_limited

TIER = "verified and timed"


@dataclass
class GpuSettings:
    trials: int = 100
    warmup: int = 3
    seeds: tuple[int, ...] = (0, 1, 2)
    reverify_above: float = 10.0
    timeout: float = 600.0
    lock_path: str = ""


@dataclass
class GpuOutcome:
    verdict: Verdict
    feedback: str
    metrics: dict[str, Metric] = field(default_factory=dict)


def timing_metrics(ref_ms: list[float], cand_ms: list[float], device: str) -> dict[str, Metric]:
    source = f"cuda events, {device}"
    return {
        "ms": Metric(statistics.median(cand_ms), "ms", source),
        "ms_mean": Metric(statistics.fmean(cand_ms), "ms", f"{source}, mean"),
        "reference_ms": Metric(statistics.median(ref_ms), "ms", f"{source}, reference"),
        "trials": Metric(float(len(cand_ms)), "trials", source),
    }


@asynccontextmanager
async def gpu_lock(path: str) -> AsyncIterator[None]:
    """Exclusive use of the GPU for timing, across processes on this host."""
    if not path:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")
    try:
        await asyncio.to_thread(fcntl.flock, fh, fcntl.LOCK_EX)
        yield
    finally:
        try:
            fcntl.flock(fh, fcntl.LOCK_UN)
        finally:
            fh.close()


# -- .cu -----------------------------------------------------------------------------------
async def run_cu(compiler: Compiler, reference_file: str, candidate_file: str, ann: Annotation,
                 settings: GpuSettings, device: str) -> GpuOutcome:
    wrapper = harness_cu.entry_wrapper(reference_file, ann)
    with tempfile.TemporaryDirectory(prefix="autocomp-cuda-gpu-") as tmp:
        builds = await asyncio.gather(
            compiler.build_shared(reference_file + wrapper, tmp, "reference"),
            compiler.build_shared(candidate_file + wrapper, tmp, "candidate"),
            _build_harness(compiler, ann, tmp),
        )
        for (ok, log), what in zip(builds, ("the original kernel", "the candidate", "the harness")):
            if not ok:
                verdict = Verdict.COMPILE_ERROR if what == "the candidate" else Verdict.RUNTIME_ERROR
                return GpuOutcome(verdict, f"building {what} for the GPU failed:\n{log}")
        outcome = await _run_harness(tmp, ann, settings, list(settings.seeds), settings.trials, device)
        if outcome.verdict is Verdict.CORRECT:
            speed = outcome.metrics["reference_ms"].value / max(outcome.metrics["ms"].value, 1e-9)
            if speed > settings.reverify_above:
                fresh = [s + 7919 for s in settings.seeds] + [max(settings.seeds) + 104729]
                again = await _run_harness(tmp, ann, settings, fresh, 0, device)
                if again.verdict is not Verdict.CORRECT:
                    return GpuOutcome(Verdict.INCORRECT, f"a {speed:.1f}x speedup did not hold up on fresh seeds "
                                      f"{fresh}: {again.feedback}")
                outcome.feedback += f"\nspeedup {speed:.1f}x re-verified on fresh seeds {fresh}"
        return outcome


async def _build_harness(compiler: Compiler, ann: Annotation, tmp: str) -> tuple[bool, str]:
    Path(tmp, "harness.cu").write_text(harness_cu.harness_source(ann))
    argv = [compiler.nvcc, f"-arch={compiler.arch}", "-O2", "-std=c++17", "harness.cu", "-o", "harness", "-ldl"]
    proc = await run_limited(argv, cwd=tmp, timeout=compiler.timeout, memory_bytes=compiler.memory_bytes)
    return proc.ok, proc.tail()


async def _run_harness(tmp: str, ann: Annotation, settings: GpuSettings, seeds: list[int], trials: int,
                       device: str) -> GpuOutcome:
    out = Path(tmp, f"out-{secrets.token_hex(4)}")
    out.mkdir()
    argv = ["./harness", "./reference.so", "./candidate.so", str(out), str(trials), str(settings.warmup),
            *map(str, seeds)]
    async with gpu_lock(settings.lock_path):
        proc = await run_limited(argv, cwd=tmp, timeout=settings.timeout, memory_bytes=None)
    if proc.timed_out:
        return GpuOutcome(Verdict.TIMEOUT, f"the GPU run did not finish within {settings.timeout:.0f} s")
    if proc.returncode == harness_cu.EXIT_CANDIDATE:
        return GpuOutcome(Verdict.RUNTIME_ERROR, f"the candidate failed on the GPU:\n{proc.tail()}")
    if proc.returncode != 0:
        who = "the original kernel" if proc.returncode == harness_cu.EXIT_REFERENCE else "the harness"
        return GpuOutcome(Verdict.RUNTIME_ERROR, f"{who} failed on the GPU (exit {proc.returncode}):\n{proc.tail()}")
    worst = 0.0
    for seed in seeds:
        state = (out / f"inputs_{seed}.txt").read_text() if (out / f"inputs_{seed}.txt").exists() else "missing"
        if state != "unchanged":
            return GpuOutcome(Verdict.INCORRECT, f"seed {seed}: the candidate modified its inputs ({state.strip()})")
        for b in ann.outputs:
            ref = (out / f"ref_{seed}_{b.name}.bin").read_bytes()
            cand = (out / f"cand_{seed}_{b.name}.bin").read_bytes()
            ok, diff, reason = harness_cu.compare_buffers(ref, cand, b.dtype, ann.tolerance_for(b))
            if not ok:
                return GpuOutcome(Verdict.INCORRECT, f"seed {seed}, output `{b.name}`: {reason}")
            worst = max(worst, diff)
    if trials <= 0:
        return GpuOutcome(Verdict.CORRECT, f"correct on seeds {seeds} (max abs diff {worst:.3g})")
    ref_ms: list[float] = []
    cand_ms: list[float] = []
    for line in (out / "timing.txt").read_text().splitlines():
        who, value = line.split()
        (ref_ms if who == "ref" else cand_ms).append(float(value))
    metrics = timing_metrics(ref_ms, cand_ms, device)
    return GpuOutcome(Verdict.CORRECT, _timing_text(seeds, worst, metrics, "the original kernel"), metrics)


def _timing_text(seeds: list[int], worst: float, metrics: dict[str, Metric], reference: str) -> str:
    ms, ref = metrics["ms"].value, metrics["reference_ms"].value
    return (f"correct on seeds {seeds} (max abs diff {worst:.3g}); median {ms:.4f} ms, mean {metrics['ms_mean'].value:.4f} ms "
            f"over {int(metrics['trials'].value)} trials; {reference}: {ref:.4f} ms ({ref / max(ms, 1e-9):.2f}x)")


# -- KernelBench-style Python -----------------------------------------------------------------
async def run_python(reference_file: str, candidate_file: str, settings: GpuSettings, device: str,
                     extensions_dir: str, reference_only: bool = False) -> GpuOutcome:
    with tempfile.TemporaryDirectory(prefix="autocomp-kb-gpu-") as tmp:
        Path(tmp, "reference.py").write_text(reference_file)
        Path(tmp, "candidate.py").write_text(candidate_file)
        nonce = secrets.token_hex(16)
        argv = [sys.executable, "-m", "autocomp.backends.cuda.gpu_runner", "reference.py",
                "reference.py" if reference_only else "candidate.py",
                "--trials", str(settings.trials), "--warmup", str(settings.warmup),
                "--reverify-above", str(settings.reverify_above), "--seeds", *map(str, settings.seeds)]
        if settings.lock_path:
            argv += ["--lock", settings.lock_path]
        if reference_only:
            argv.append("--reference-only")
        env = dict(os.environ)
        env["TORCH_EXTENSIONS_DIR"] = extensions_dir
        env.setdefault("MAX_JOBS", str(max(1, (os.cpu_count() or 2) // 2)))
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        proc = await run_limited(argv, cwd=tmp, timeout=settings.timeout, memory_bytes=None, env=env,
                                 stdin_data=(nonce + "\n").encode())
    if proc.timed_out:
        return GpuOutcome(Verdict.TIMEOUT, f"build + check + timing did not finish within {settings.timeout:.0f} s")
    marker = f"AUTOCOMP-RESULT {nonce} "
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(marker)]
    if not lines:
        return GpuOutcome(Verdict.RUNTIME_ERROR, f"the GPU runner gave no result (exit {proc.returncode}):\n{proc.tail()}")
    result = json.loads(lines[-1][len(marker):])
    return outcome_from_runner(result, device, list(settings.seeds))


def outcome_from_runner(result: dict, device: str, seeds: list[int]) -> GpuOutcome:
    """Map the runner's JSON verdict to an outcome (kept separate so it is testable)."""
    stage = result.get("stage")
    device = result.get("device") and _short(result["device"]) or device
    if stage == "build":
        return GpuOutcome(Verdict.COMPILE_ERROR, "load_inline could not build the candidate:\n" + result.get("error", "")[-4000:])
    if stage in ("reference", "setup"):
        return GpuOutcome(Verdict.RUNTIME_ERROR, f"cannot run the reference here ({stage}): {result.get('error', '')[-3000:]}")
    if stage != "done":
        return GpuOutcome(Verdict.RUNTIME_ERROR, f"the candidate failed ({stage}):\n{result.get('error', '')[-4000:]}")
    if not result.get("correct"):
        return GpuOutcome(Verdict.INCORRECT, result.get("reason", "outputs differ from the reference"))
    if "cand_ms" not in result:
        return GpuOutcome(Verdict.CORRECT, f"correct on seeds {seeds}")
    metrics = timing_metrics(result["ref_ms"], result["cand_ms"], device)
    text = _timing_text(seeds, float(result.get("max_abs_diff", 0.0)), metrics, "PyTorch reference (Model)")
    if result.get("reverified"):
        text += f"\nspeedup above 10x re-verified on fresh seeds {result['reverified']['seeds']}"
    return GpuOutcome(Verdict.CORRECT, text, metrics)


def _short(name: str) -> str:
    from autocomp.backends.cuda.gpu import short_name

    return short_name(name)
