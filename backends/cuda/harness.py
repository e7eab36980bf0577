"""The verified-and-timed tier: runs the reference and a candidate on a local NVIDIA GPU
and turns what the harness measured into an :class:`Evaluation`.

Two forms, one design (docs/cuda.md, "GPU tier by construction"): annotated ``.cu`` files
go through :mod:`cu_runner` with the generated C++ model child of :mod:`harness_cu`,
KernelBench-style Python through :mod:`gpu_runner`. In both the candidate runs in its own
process, away from the timer. Both run through :func:`run_limited` (no address-space
limit: a CUDA context reserves far more virtual memory than it uses), one timing at a time
per host.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
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
from autocomp.backends.cuda.compile import Compiler, toolkit_dirs
from autocomp.backends.cuda.gpu import driver_env
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
    kernels_counted: bool = True  # False: the runner could not list the launched kernels (no CUPTI)


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
                 settings: GpuSettings, device: str, kernel_names: list[str] | tuple[str, ...] = ()) -> GpuOutcome:
    """Build the original kernel, the candidate (each a shared library) and the model child,
    then run :mod:`cu_runner` (the timer) in the sandbox; its verdict comes back on the
    result channel only (descriptor 3), which no child holds."""
    wrapper = harness_cu.entry_wrapper(reference_file, ann)
    with tempfile.TemporaryDirectory(prefix="autocomp-cuda-gpu-") as tmp:
        builds = await asyncio.gather(
            compiler.build_shared(reference_file + wrapper, tmp, "reference"),
            compiler.build_shared(candidate_file + wrapper, tmp, "candidate"),
            _build_child(compiler, ann, tmp),
        )
        for (ok, log), what in zip(builds, ("the original kernel", "the candidate", "the runner's child program")):
            if not ok:
                verdict = Verdict.COMPILE_ERROR if what == "the candidate" else Verdict.RUNTIME_ERROR
                return GpuOutcome(verdict, f"building {what} for the GPU failed:\n{log}")
        buffers = [{"name": b.name, "dtype": b.dtype, "count": b.count, "elem": b.elem_bytes,
                    "role": 2 if b.inout else 1 if b.output else 0, "low": b.low, "high": b.high,
                    "tolerance": ann.tolerance_for(b)} for b in ann.buffers]
        spec = {"child": os.path.join(tmp, "child"), "reference": os.path.join(tmp, "reference.so"),
                "candidate": os.path.join(tmp, "candidate.so"), "buffers": buffers, "trials": settings.trials,
                "warmup": settings.warmup, "checks": max(3, len(settings.seeds)), "kernel_names": list(kernel_names)}
        Path(tmp, "spec.json").write_text(json.dumps(spec))
        argv = [sys.executable, "-m", "autocomp.backends.cuda.cu_runner", "spec.json"]
        async with gpu_lock(settings.lock_path):
            proc = await run_limited(argv, cwd=tmp, timeout=settings.timeout, memory_bytes=None,
                                     env={"PYTHONDONTWRITEBYTECODE": "1", **driver_env(), **import_env()},
                                     isolation=runner_isolation(tmp, toolkit_dirs(compiler.nvcc)), channel=True,
                                     max_processes=256)
        return _runner_outcome(proc, device, "the original kernel", settings)


def import_env() -> dict[str, str]:
    """``PYTHONPATH`` for a sandboxed runner when Autocomp is importable here only through
    that variable (an import overlay such as bench/gpu_check.sh builds), which the sandbox
    clears; empty for an installed or editable Autocomp."""
    import autocomp

    root = os.path.dirname(os.path.realpath(list(autocomp.__path__)[0]))
    entries = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {"PYTHONPATH": root} if any(os.path.realpath(p) == root for p in entries) else {}


def cupti_paths(toolkit: tuple[str, ...]) -> tuple[str, str] | None:
    """(include dir, library dir) of CUPTI in the CUDA toolkit, which the child uses to list
    the kernels a call launched; None when this toolkit has none."""
    for root in toolkit:
        for inc, lib in (("include", "lib64"), ("include", "lib"), ("extras/CUPTI/include", "extras/CUPTI/lib64"),
                         ("targets/x86_64-linux/include", "targets/x86_64-linux/lib")):
            if Path(root, inc, "cupti.h").exists() and any(Path(root, lib).glob("libcupti.so*")):
                return str(Path(root, inc)), str(Path(root, lib))
    return None


async def _build_child(compiler: Compiler, ann: Annotation, tmp: str) -> tuple[bool, str]:
    Path(tmp, "child.cu").write_text(harness_cu.child_source(ann))
    cupti = cupti_paths(toolkit_dirs(compiler.nvcc))
    extra = ([f"-I{cupti[0]}", f"-L{cupti[1]}", "-lcupti", f"-Xlinker=-rpath={cupti[1]}"] if cupti
             else ["-DAUTOCOMP_NO_CUPTI"])
    argv = [compiler.nvcc, f"-arch={compiler.arch}", "-O2", "-std=c++17", "child.cu", "-o", "child", "-ldl", *extra]
    proc = await run_limited(argv, cwd=tmp, timeout=compiler.timeout, memory_bytes=compiler.memory_bytes,
                             isolation=compiler.isolation())
    return proc.ok, proc.tail()


def _runner_outcome(proc, device: str, reference: str, settings: GpuSettings) -> GpuOutcome:
    """The runner's verdict from the result channel, or why there is none."""
    if proc.timed_out:
        return GpuOutcome(Verdict.TIMEOUT, f"build + check + timing did not finish within {settings.timeout:.0f} s")
    try:
        result = json.loads(proc.channel.decode("utf-8")) if proc.channel else None
    except ValueError:
        result = None
    if not isinstance(result, dict):
        return GpuOutcome(Verdict.RUNTIME_ERROR, f"the GPU runner gave no result (exit {proc.returncode}):\n{proc.tail()}")
    return outcome_from_runner(result, device, list(settings.seeds), reference)


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
    driver = tuple(d for d in driver_env().get("LD_LIBRARY_PATH", "").split(os.pathsep) if d)
    overlay = tuple(p for p in import_env().get("PYTHONPATH", "").split(os.pathsep) if p)
    return Isolation(readable=python_view() + torch_view() + tuple(toolkit) + sysfs + driver + overlay,
                     writable=(extensions_dir,),
                     proc=True, devices=device_nodes())


async def run_python(reference_file: str, candidate_file: str, settings: GpuSettings, device: str,
                     extensions_dir: str, reference_only: bool = False, kernel_names: list[str] | tuple[str, ...] = (),
                     toolkit: tuple[str, ...] = ()) -> GpuOutcome:
    """Run :mod:`gpu_runner` (the timer) in the sandbox; its verdict comes back on the
    result channel only (descriptor 3), which no candidate process holds."""
    tmp = tempfile.mkdtemp(prefix="autocomp-kb-gpu-")
    Path(extensions_dir).mkdir(parents=True, exist_ok=True)
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
               "MAX_JOBS": str(max(1, (os.cpu_count() or 2) // 2)), **driver_env(), **import_env()}
        ninja = shutil.which("ninja") or shutil.which("ninja", path=os.path.join(sys.prefix, "bin"))
        if ninja:  # load_inline builds with ninja, found on PATH (often the venv's bin, not /usr/bin)
            env["PATH"] = os.pathsep.join((os.path.dirname(ninja), "/usr/local/bin", "/usr/bin", "/bin"))
            toolkit = (*toolkit, os.path.dirname(os.path.realpath(ninja)), os.path.dirname(ninja))
        cuda_home = next((t for t in toolkit if os.path.isdir(os.path.join(t, "nvvm"))), "")
        if cuda_home:
            env["CUDA_HOME"] = cuda_home
        async with gpu_lock(settings.lock_path):
            proc = await run_limited(argv, cwd=tmp, timeout=settings.timeout, memory_bytes=None, env=env,
                                     isolation=runner_isolation(extensions_dir, toolkit), channel=True,
                                     max_processes=512)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _runner_outcome(proc, device, "PyTorch reference (Model)", settings)


def outcome_from_runner(result: dict, device: str, seeds: list[int],
                        reference: str = "PyTorch reference (Model)") -> GpuOutcome:
    """Map a runner's JSON verdict (either runner) to an outcome (kept separate so it is
    testable)."""
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
    counted = bool(result.get("kernels_counted", True))
    if "cand_ms" not in result:
        return GpuOutcome(Verdict.CORRECT, f"correct on {checks} fresh random inputs", kernels_counted=counted)
    metrics = runner_metrics(result, device)
    text = (f"correct on {checks} fresh random inputs and on every timed trial (each with fresh inputs; max abs diff "
            f"{float(result.get('max_abs_diff', 0.0)):.3g}); median {metrics['ms'].value:.4f} ms over "
            f"{int(metrics['trials'].value)} trials; {reference}: {metrics['reference_ms'].value:.4f} ms "
            f"({metrics['reference_ms'].value / max(metrics['ms'].value, 1e-9):.2f}x). Timed by the runner's own clock, "
            f"transfers of {result['overhead_ms']:.4f} ms subtracted; the candidate ran in its own process.")
    if result.get("kernels"):
        text += "\nkernels launched: " + ", ".join(result["kernels"][:6])
    return GpuOutcome(Verdict.CORRECT, text, metrics, kernels_counted=counted)


def _short(name: str) -> str:
    from autocomp.backends.cuda.gpu import short_name

    return short_name(name)
