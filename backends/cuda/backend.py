"""CudaBackend: the CUDA target behind the common protocol.

Tiers, always named in each result:
- ``static``: cheats and fallbacks refused before anything is built (:mod:`static_checks`);
- ``compiled``: ``nvcc`` + ptxas figures, cached by source hash (:mod:`compile`); without a
  GPU this is where evaluation stops, with verdict ``unverified`` and ``confirmed`` False;
- ``verified and timed``: correctness against the original and timing by a runner process (the
  candidate in its own process) on a local GPU (:mod:`harness`), ``confirmed`` True;
- ``remote``: the same protocol run by a worker command on a GPU host (:mod:`remote`).
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import os
import time
from pathlib import Path
from typing import Any, ClassVar, Sequence

from autocomp.backends import cscan
from autocomp.backends.base import Backend, BackendError, TierInfo, ToolCheck
from autocomp.backends.cuda import annotations, detect, gpu, harness, inline, pyvalidate, remote, static_checks
from autocomp.backends.cuda.compile import DEFAULT_ARCH, CompileResult, Compiler, default_cache_dir, find_nvcc, map_lines, nvcc_version
from autocomp.backends.cuda.headroom import headroom as roofline_headroom
from autocomp.model import Evaluation, KernelSpan, Metric, Problem, Verdict
from autocomp.sandbox import cpu_slots

COMPILED = "compiled"
STATIC = "static"
WHERE_TO_VERIFY = (
    "Not verified or timed: there is no NVIDIA GPU on this machine. Verification and timing run on a GPU: "
    "set autocomp.target.cuda.remote to a worker command on a GPU host (e.g. "
    "\"ssh gpuhost python -m autocomp.backends.cuda.worker\"; see docs/cuda.md), or run on a machine with a GPU."
)


class CudaBackend(Backend):
    name: ClassVar[str] = "cuda"
    file_suffixes: ClassVar[tuple[str, ...]] = (".cu", ".cuh", ".py")
    primary_metric: ClassVar[str] = "ms"
    lower_is_better: ClassVar[bool] = True
    evaluator_version: ClassVar[str] = "1"

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        super().__init__(settings)
        s = self.settings
        # default: the local GPU's own architecture when there is one, else sm_90 (H100/H200)
        native = gpu.native_arch() if not s.get("arch") and gpu.gpu_enabled(s.get("gpu")) else None
        self.arch = str(s.get("arch") or native or DEFAULT_ARCH)
        self.remote_command = str(s.get("remote") or os.environ.get("AUTOCOMP_CUDA_REMOTE") or "").strip()
        self.cache_dir = Path(str(s.get("cache_dir") or default_cache_dir()))
        self._compiler: Compiler | None = None
        self._gpu_settings = harness.GpuSettings(
            trials=max(100, int(s.get("trials", 100))),
            warmup=int(s.get("warmup", 3)),
            seeds=tuple(int(x) for x in s.get("seeds", (0, 1, 2))),
            timeout=float(s.get("gpu_timeout", 600.0)),
            lock_path=str(self.cache_dir / "gpu.lock"),
        )

    # -- protocol: finding kernels --------------------------------------------------------
    def detect(self, path: str, text: str) -> list[KernelSpan]:
        return detect.detect(path, text)

    def detection_hint(self) -> str:
        return ("A CUDA kernel is a .cu/.cuh file with a __global__ kernel and a host function that launches it, "
                "or a KernelBench-style .py file with class Model and get_inputs() (candidates define ModelNew).")

    def make_problem(self, path: str, text: str, function: str | None = None, line: int | None = None,
                     options: dict[str, Any] | None = None) -> Problem:
        problem = super().make_problem(path, text, function=function, line=line, options=options)
        if not detect.is_python(path):
            annotations.parse(text, path)  # a malformed annotation is the user's to fix, now
        return problem

    def candidate_span(self, problem: Problem, path: str, text: str) -> KernelSpan:
        """Where the candidate code is in a candidate file evaluated against ``problem``
        (``autocomp eval FILE --against BASE``). A KernelBench solution file -- ``ModelNew``
        with its sources and ``load_inline``, no ``Model``/``get_inputs`` -- is a candidate as
        a whole; a full problem file contributes its ``ModelNew`` section."""
        n = len(text.splitlines())
        if detect.is_python(path) and detect.is_python(problem.path):
            layout = detect.kb_layout(text)
            if layout is not None:
                if layout.model_new is None:
                    raise BackendError("defines no class ModelNew: a candidate file defines ModelNew "
                                       "(KernelBench layout: ModelNew, its CUDA sources and load_inline)")
                return KernelSpan("ModelNew", detect.TARGET, layout.span_start, layout.span_end)
            tree = _parse(text)
            if any(isinstance(s, ast.ClassDef) and s.name == "ModelNew" for s in tree.body):
                return KernelSpan("ModelNew", detect.TARGET, 0, n)
            raise BackendError("defines no top-level class ModelNew (or the file is not valid Python); a KernelBench "
                               "candidate defines ModelNew, its CUDA sources and the load_inline call")
        if detect.is_python(path) != detect.is_python(problem.path):
            raise BackendError(f"is a {'Python' if detect.is_python(path) else '.cu'} file but the baseline "
                               f"{problem.path} is not; compare files of the same kind")
        return self.make_problem(path, text, function=problem.name).span

    # -- protocol: tiers and tools --------------------------------------------------------
    def prompt_context(self, problem: Problem) -> dict[str, str]:
        """The architecture candidates are compiled for: prompts offer only its features
        (``wgmma`` needs ``sm_90a``; see prompts/cuda/menu.toml)."""
        return {**super().prompt_context(problem), "arch": self.arch}

    headroom = staticmethod(roofline_headroom)  # roofline floor when a GPU timed it (see .headroom)

    def tier(self) -> TierInfo:
        if self.remote_command:
            return TierInfo(name="remote", confirms=True, note=f"evaluated by `{self.remote_command}`")
        if gpu.gpu_enabled(self.settings.get("gpu")):
            names = ", ".join(gpu.gpu_names())
            return TierInfo(name=harness.TIER, confirms=True, note=f"CUDA events on {names}")
        note = WHERE_TO_VERIFY if find_nvcc(self.settings.get("nvcc")) else "nvcc not found: only static checks run"
        return TierInfo(name=COMPILED, confirms=False, note=note)

    def doctor(self) -> list[ToolCheck]:
        checks = []
        nvcc = find_nvcc(self.settings.get("nvcc"))
        if nvcc:
            checks.append(ToolCheck("nvcc", True, f"{nvcc} (CUDA {nvcc_version(nvcc)}), target {self.arch}"))
        else:
            checks.append(ToolCheck("nvcc", False, "install the CUDA toolkit (https://developer.nvidia.com/cuda-downloads) "
                                    "or set autocomp.target.cuda.nvcc"))
        names = gpu.gpu_names()
        checks.append(ToolCheck("NVIDIA GPU", bool(names), ", ".join(names) if names else
                                "none here: results stay unverified unless autocomp.target.cuda.remote names a GPU worker",
                                required=False))
        if self.remote_command:
            checks.append(ToolCheck("remote worker", True, self.remote_command, required=False))
        return checks

    def cache_identity(self) -> str:
        tier = self.tier()
        return f"{super().cache_identity()}:{tier.name}:{tier.note}"

    # -- protocol: evaluation -------------------------------------------------------------
    @property
    def compiler(self) -> Compiler:
        if self._compiler is None:
            nvcc = find_nvcc(self.settings.get("nvcc"))
            if nvcc is None:
                raise BackendError("nvcc not found: install the CUDA toolkit or set autocomp.target.cuda.nvcc "
                                   "(or NVCC) to its path. `autocomp doctor` shows what is missing.")
            flags = tuple(str(f) for f in self.settings.get("flags", ()))
            self._compiler = Compiler(nvcc, self.arch, flags, self.cache_dir,
                                      timeout=float(self.settings.get("compile_timeout", 180.0)))
        return self._compiler

    async def evaluate(self, problem: Problem, codes: Sequence[str]) -> list[Evaluation]:
        if self.remote_command:
            local = {k: v for k, v in self.settings.items() if k != "remote"}
            return await remote.evaluate_remote(self.remote_command, problem, list(codes), local)
        slots = asyncio.Semaphore(max(1, int(self.settings.get("jobs", cpu_slots()))))

        async def one(code: str) -> Evaluation:
            async with slots:
                start = time.monotonic()
                ev = await self._evaluate_one(problem, code)
                ev.seconds = time.monotonic() - start
                return ev

        return list(await asyncio.gather(*(one(c) for c in codes)))

    async def _evaluate_one(self, problem: Problem, code: str) -> Evaluation:
        if detect.is_python(problem.path):
            return await self._evaluate_python(problem, code)
        return await self._evaluate_cu(problem, code)

    # .cu files
    async def _evaluate_cu(self, problem: Problem, code: str) -> Evaluation:
        findings = static_checks.check_cu(code, problem.code)
        if findings:
            return _rejected(findings)
        candidate_file = problem.file_with(code)
        ann = annotations.parse(problem.file_text, problem.path)
        source = candidate_file
        if ann is not None:
            from autocomp.backends.cuda.harness_cu import entry_wrapper

            # compiling the fixed entry wrapper with the candidate proves its signature is unchanged
            source += entry_wrapper(problem.file_text, ann)
        result = await self.compiler.compile(source)
        start, n = problem.span.start_line, len(code.splitlines())
        file_lines = len(candidate_file.splitlines())

        def where(_file: str, line: int) -> str:
            if start < line <= start + n:
                return f"kernel line {line - start}"
            if line > file_lines:
                return "the generated entry wrapper (the entry's signature must not change)"
            return f"file line {line}"

        if not result.ok:
            return _compile_error(result, map_lines(result.log, where))
        if ann is None:
            note = ("compiled only: the file has no `// autocomp:` annotation describing inputs and outputs, "
                    "so it cannot be verified anywhere (see docs/cuda-annotations.md)")
            return self._unverified(result, note)
        if not gpu.gpu_enabled(self.settings.get("gpu")):
            return self._unverified(result, WHERE_TO_VERIFY)
        names = sorted({f.name for f in cscan.find_functions(candidate_file, cxx=True) if f.is_global})
        outcome = await harness.run_cu(self.compiler, problem.file_text, candidate_file, ann, self._gpu_settings,
                                       self._device(), kernel_names=names)
        return self._gpu_evaluation(outcome, result)

    # KernelBench-style Python
    async def _evaluate_python(self, problem: Problem, code: str) -> Evaluation:
        layout = detect.kb_layout(problem.file_text)
        candidate_file = problem.file_with(code)
        reference_only = layout is not None and layout.model_new is None and code == problem.code \
            and candidate_file == problem.file_text
        if reference_only:
            return await self._evaluate_reference(problem)
        reference = reference_file(problem)
        findings = static_checks.check_python(code, reference, candidate_file, problem.span.start_line)
        if findings:
            return _rejected(findings)
        report = pyvalidate.validate(candidate_file, reference)
        ref_includes = pyvalidate._reference_include_paths(_parse(reference))
        results: list[CompileResult] = []
        dropped: list[str] = []
        done: set[str] = set()
        for ext in {id(e): e for e in report.extensions.values()}.values():
            flags = tuple(f for f in ext.cflags if pyvalidate.flag_problem(f) is None and not f.startswith("-I"))
            includes = tuple(p for p in ext.include_paths if p in ref_includes)
            for text, first_line in ext.sources:
                if "__global__" not in text or text in done:
                    continue
                done.add(text)
                source, gone = inline.standalone(text)
                dropped += gone
                result = await self.compiler.compile(source, inline.FORCED_INCLUDES, include_paths=includes,
                                                     extra_flags=flags)
                if not result.ok:
                    base = first_line - problem.span.start_line

                    def where(_file: str, line: int, base: int = base) -> str:
                        return f"kernel line {base + line}"

                    return _compile_error(result, map_lines(result.log, where))
                results.append(result)
        merged = _merge(results, self.arch)
        note = ""
        if dropped:
            note = (f"(host wrappers using torch — {', '.join(sorted(set(dropped)))} — are built by load_inline on the GPU "
                    "tier; here only the device code was compiled)")
        if not gpu.gpu_enabled(self.settings.get("gpu")):
            return self._unverified(merged, WHERE_TO_VERIFY + (" " + note if note else ""))
        ext_dir = self.cache_dir / "torch_extensions" / hashlib.sha256(candidate_file.encode()).hexdigest()[:20]
        ext_dir.mkdir(parents=True, exist_ok=True)
        outcome = await harness.run_python(reference, candidate_file, self._gpu_settings, self._device(), str(ext_dir),
                                           kernel_names=report.kernel_names,
                                           toolkit=self.compiler.isolation(tuple(ref_includes)).readable)
        return self._gpu_evaluation(outcome, merged)

    async def _evaluate_reference(self, problem: Problem) -> Evaluation:
        """The starting point of a Model-only file is PyTorch itself: nothing to compile;
        on a GPU it is timed like any candidate."""
        if not gpu.gpu_enabled(self.settings.get("gpu")):
            return Evaluation(Verdict.UNVERIFIED, {}, "the PyTorch reference (class Model): no CUDA source to compile. "
                              + WHERE_TO_VERIFY, tier=COMPILED, confirmed=False)
        ext_dir = self.cache_dir / "torch_extensions" / "reference"
        ext_dir.mkdir(parents=True, exist_ok=True)
        outcome = await harness.run_python(problem.file_text, problem.file_text, self._gpu_settings, self._device(),
                                           str(ext_dir), reference_only=True)
        return self._gpu_evaluation(outcome, None)

    # -- helpers ----------------------------------------------------------------------------
    def _device(self) -> str:
        names = gpu.gpu_names()
        return gpu.short_name(names[0]) if names else "GPU"

    def _unverified(self, result: CompileResult, note: str) -> Evaluation:
        feedback = f"{result.summary()}\n{note}"
        return Evaluation(Verdict.UNVERIFIED, compile_metrics(result), feedback, tier=COMPILED, confirmed=False)

    def _gpu_evaluation(self, outcome: harness.GpuOutcome, result: CompileResult | None) -> Evaluation:
        """Confirmed when correct and the runner saw the launched kernels: both runners
        time the candidate in its own process, but a runner that could not list the
        kernels (no CUPTI in the toolkit) cannot show the candidate's own kernel ran."""
        metrics = dict(outcome.metrics)
        feedback = outcome.feedback
        if result is not None:
            metrics.update(compile_metrics(result))
            feedback += "\n" + result.summary()
        if not outcome.kernels_counted and outcome.verdict is Verdict.CORRECT:
            feedback += ("\nNot confirmed: the runner could not list the launched kernels (CUPTI is missing from the CUDA "
                         "toolkit), so it cannot show the candidate's own kernel ran; install the toolkit's CUPTI, or "
                         "apply it yourself / with --accept-unconfirmed.")
        confirmed = outcome.kernels_counted and outcome.verdict is Verdict.CORRECT
        return Evaluation(outcome.verdict, metrics, feedback, tier=harness.TIER, confirmed=confirmed)


def reference_file(problem: Problem) -> str:
    """The problem without its starting kernel: importing the reference must not build
    the starting kernel's extension (minutes of compile for nothing)."""
    layout = detect.kb_layout(problem.file_text)
    if layout is not None and layout.model_new is not None and problem.name == "ModelNew":
        return problem.span.replace_in(problem.file_text, "")
    return problem.file_text


def _parse(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def compile_metrics(result: CompileResult) -> dict[str, Metric]:
    """ptxas figures, each with unit and source (``ptxas sm_90``)."""
    source = f"ptxas {result.arch}"
    if not result.kernels:
        return {}
    return {
        "registers": Metric(float(result.max_registers), "registers/thread", source),
        "spill_bytes": Metric(float(result.spill_bytes), "bytes", source),
        "smem_bytes": Metric(float(result.max_smem), "bytes/block", source),
        "kernels": Metric(float(len(result.kernels)), "kernels", source),
    }


def _merge(results: list[CompileResult], arch: str) -> CompileResult:
    kernels = [k for r in results for k in r.kernels]
    return CompileResult(ok=True, log="\n".join(r.log for r in results if r.log), kernels=kernels,
                         seconds=sum(r.seconds for r in results), cached=all(r.cached for r in results) and bool(results),
                         arch=arch)


def _rejected(findings: list[static_checks.Finding]) -> Evaluation:
    text = "\n".join(f.render() for f in findings)
    return Evaluation(Verdict.REJECTED, {}, f"rejected before building:\n{text}", tier=STATIC, confirmed=False)


def _compile_error(result: CompileResult, log: str) -> Evaluation:
    head = f"nvcc ({result.arch}) failed" + (" (timed out)" if result.timed_out else "")
    return Evaluation(Verdict.COMPILE_ERROR, {}, f"{head}:\n{log}", tier=COMPILED, confirmed=False)
