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
import shutil
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
from autocomp.sandbox import Isolation, python_view, run_limited

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


def runner_metrics(result: dict, device: str) -> dict[str, Metric]:
    """Figures from the two-process runner: the runner's clock, transfers subtracted."""
    source = f"runner clock, {device}, transfers subtracted"
    cand, ref = result["cand_ms"], result["ref_ms"]
    return {
        "ms": Metric(statistics.median(cand), "ms", source),
        "ms_mean": Metric(statistics.fmean(cand), "ms", f"{source}, mean"),
        "reference_ms": Metric(statistics.median(ref), "ms", f"{source}, reference"),
        "trials": Metric(float(len(cand)), "trials", source),
        "overhead_ms": Metric(float(result["overhead_ms"]), "ms", f"runner clock, {device}, transfer calibration"),
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
    proc = await run_limited(argv, cwd=tmp, timeout=compiler.timeout, memory_bytes=compiler.memory_bytes,
                             isolation=compiler.isolation())
    return proc.ok, proc.tail()


async def _run_harness(tmp: str, ann: Annotation, settings: GpuSettings, seeds: list[int], trials: int,
                       device: str) -> GpuOutcome:
    out = Path(tmp, f"out-{secrets.token_hex(4)}")
    out.mkdir()
    argv = ["./harness", "./reference.so", "./candidate.so", str(out), str(trials), str(settings.warmup),
            *map(str, seeds)]
    from autocomp.backends.cuda.gpu import device_nodes

    async with gpu_lock(settings.lock_path):
        proc = await run_limited(argv, cwd=tmp, timeout=settings.timeout, memory_bytes=None,
                                 isolation=Isolation(proc=True, devices=device_nodes()))
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
def torch_view() -> tuple[str, ...]:
    """Where PyTorch (and ninja) are installed, found without importing them here."""
    import importlib.util

    paths = []
    for name in ("torch", "ninja", "nvidia"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            for loc in spec.submodule_search_locations or [os.path.dirname(spec.origin or "")]:
                if loc:
                    paths.append(os.path.dirname(os.path.realpath(loc)))
    return tuple(dict.fromkeys(paths))


def runner_isolation(extensions_dir: str, toolkit: tuple[str, ...] = ()) -> Isolation:
    """The GPU runner's jail: Python, Autocomp, torch and the CUDA toolkit read-only, the
    extension build directory writable, the NVIDIA device nodes, and /proc (the CUDA
    driver reads /proc/driver/nvidia). No network, no environment, no other host files."""
    from autocomp.backends.cuda.gpu import device_nodes

    sysfs = tuple(p for p in ("/sys/bus/pci", "/sys/devices", "/sys/module/nvidia") if device_nodes() and os.path.exists(p))
    return Isolation(readable=python_view() + torch_view() + tuple(toolkit) + sysfs, writable=(extensions_dir,),
                     proc=True, devices=device_nodes())


async def run_python(reference_file: str, candidate_file: str, settings: GpuSettings, device: str,
                     extensions_dir: str, reference_only: bool = False, kernel_names: list[str] | tuple[str, ...] = (),
                     toolkit: tuple[str, ...] = ()) -> GpuOutcome:
    """Run :mod:`gpu_runner` (the timer) in the sandbox; its verdict comes back on the
    result channel only (descriptor 3), which no candidate process holds."""
    tmp = tempfile.mkdtemp(prefix="autocomp-kb-gpu-")
    try:
        Path(tmp, "reference.py").write_text(reference_file)
        Path(tmp, "candidate.py").write_text(reference_file if reference_only else candidate_file)
        if reference_only:  # the reference timed against itself: its ModelNew is its Model
            Path(tmp, "candidate.py").write_text(reference_file + "\n\nModelNew = Model\n")
        spec = {"reference": os.path.join(tmp, "reference.py"), "candidate": os.path.join(tmp, "candidate.py"),
                "trials": settings.trials, "warmup": settings.warmup, "checks": max(3, len(settings.seeds)),
                "kernel_names": [] if reference_only else list(kernel_names), "device": "cuda"}
        Path(tmp, "spec.json").write_text(json.dumps(spec))
        argv = [sys.executable, "-m", "autocomp.backends.cuda.gpu_runner", "spec.json"]
        env = {"TORCH_EXTENSIONS_DIR": extensions_dir, "PYTHONDONTWRITEBYTECODE": "1",
               "MAX_JOBS": str(max(1, (os.cpu_count() or 2) // 2))}
        cuda_home = next((t for t in toolkit if os.path.isdir(os.path.join(t, "nvvm"))), "")
        if cuda_home:
            env["CUDA_HOME"] = cuda_home
        async with gpu_lock(settings.lock_path):
            proc = await run_limited(argv, cwd=tmp, timeout=settings.timeout, memory_bytes=None, env=env,
                                     isolation=runner_isolation(extensions_dir, toolkit), channel=True,
                                     max_processes=512)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if proc.timed_out:
        return GpuOutcome(Verdict.TIMEOUT, f"build + check + timing did not finish within {settings.timeout:.0f} s")
    try:
        result = json.loads(proc.channel.decode("utf-8")) if proc.channel else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        return GpuOutcome(Verdict.RUNTIME_ERROR, f"the GPU runner gave no result (exit {proc.returncode}):\n{proc.tail()}")
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
    checks = int(result.get("checks", len(seeds)))
    if "cand_ms" not in result:
        return GpuOutcome(Verdict.CORRECT, f"correct on {checks} fresh random inputs")
    if "overhead_ms" in result:
        metrics = runner_metrics(result, device)
        text = (f"correct on {checks} fresh random inputs and on every timed trial (each with fresh inputs; max abs diff "
                f"{float(result.get('max_abs_diff', 0.0)):.3g}); median {metrics['ms'].value:.4f} ms over "
                f"{int(metrics['trials'].value)} trials; PyTorch reference (Model): {metrics['reference_ms'].value:.4f} ms "
                f"({metrics['reference_ms'].value / max(metrics['ms'].value, 1e-9):.2f}x). Timed by the runner's own clock, "
                f"transfers of {result['overhead_ms']:.4f} ms subtracted; the candidate ran in its own process.")
        if result.get("kernels"):
            text += "\nkernels launched: " + ", ".join(result["kernels"][:6])
        return GpuOutcome(Verdict.CORRECT, text, metrics)
    metrics = timing_metrics(result["ref_ms"], result["cand_ms"], device)
    text = _timing_text(seeds, float(result.get("max_abs_diff", 0.0)), metrics, "PyTorch reference (Model)")
    return GpuOutcome(Verdict.CORRECT, text, metrics)


def _short(name: str) -> str:
    from autocomp.backends.cuda.gpu import short_name

    return short_name(name)
