"""The Gemmini target: C kernels built with the RISC-V cross compiler and run on Spike with
Autocomp's Gemmini extension (bit-exact functional model + timing model).

For each batch the original kernel (the oracle) and every candidate are built into their
own ELF in their own temporary directory, and run in parallel up to the core count. The
candidate's file is compiled alone into ``kernel.o`` and checked as an object (sections,
instructions, external symbols: :mod:`.objcheck`) before it is linked with a separately
compiled harness (:mod:`.harness`). Inputs come from seeds drawn from ``secrets`` once per
reference computation (never fixed public values); the reference and the candidates it
judges share them. Every compiler and simulator process runs in the sandbox
(:mod:`autocomp.sandbox`). The extension hands back, on a channel the program cannot write,
the modelled cycles of the measured call and memory snapshots; correctness is decided here
by comparing the snapshots with the original's (:mod:`.compare`).
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import dataclasses
import os
import re
import secrets
import shlex
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

from autocomp.backends.base import Backend, BackendError, TierInfo, ToolCheck, sources_digest
from autocomp.backends.cscan import find_global_arrays, mask
from autocomp.model import Evaluation, KernelSpan, Metric, Problem, Verdict
from autocomp.sandbox import cpu_slots

from . import compare
from .checks import reject_reason
from .detect import HINT, SUBSTITUTE_NAME, detect_kernels, find_function
from .elfsym import ElfError, read_symbols
from .harness import (
    CANDIDATE_FILE,
    HARNESS_FILE,
    KERNEL_ENTRY,
    MODES,
    ORIGINAL_FILE,
    SUBSTITUTE_KEEP,
    SUBSTITUTE_MAIN,
    HarnessPlan,
    generate_function_harness,
    generate_substitute_harness,
    instrument_substitute_file,
)
from .images import Image, image_named
from .objcheck import Allowance, ObjectError, check_object, read_object
from .signature import Signature, parse_signature

TIER_NAME = "spike + gemmini timing model"
# Allowance for the harness around the measured call (seeding, filling and copying arrays): a
# fixed part plus a part per byte of the arrays it snapshots (inputs and outputs), and the wall
# time Spike needs for that many instructions (it runs ~20-50M instructions per second here).
HARNESS_BASE_INSTRUCTIONS = 20_000_000
HARNESS_INSTRUCTIONS_PER_BYTE = 64
HARNESS_BYTES_PER_SECOND = 2_000_000
MODEL_SOURCE = "gemmini timing model"
SCRATCHPAD_ROWS = 4 * 4096  # default Gemmini configuration (FACTS.md)
MAX_DMA_INFLIGHT = 64  # timing_params.h MAX_DMA_INFLIGHT: what the extension accepts
ACCUMULATOR_ROWS = 1024

DEFAULTS: dict[str, Any] = {
    # How many input sets (and their data modes, by position); the seed VALUES are drawn from
    # `secrets` per reference computation unless `public_seeds` is true (for debugging only).
    "seeds": [1, 2, 3],
    "public_seeds": False,
    "compile_timeout": 60.0,
    "run_timeout": 60.0,
    "max_instructions": 200_000_000,  # the measured call; the harness gets its own allowance
    "host_dcache": True,  # model the host's L1 data cache (timing_params.h); false: loads pay only their load-use bubble
    # Which build of Gemmini the model times (images.py): "default" (defaultConfig, FireSim's LLC
    # and DDR3) or "lean" (FireSimLeanGemminiRocketConfig, FireSim's public image).
    "image": "default",
    # Requests each DMA engine keeps in flight: max_in_flight_mem_reqs of the modelled Gemmini
    # configuration; None takes the image's (defaultConfig 16, leanConfig 64).
    "dma_inflight": None,
    "keep_builds": False,
}


@dataclass
class Prepared:
    """Everything about a problem that does not depend on the candidate."""

    mode: str  # "function" or "substitute"
    span: KernelSpan
    seeds: tuple[int, ...]
    sig: Signature | None = None
    global_arrays: list[str] = field(default_factory=list)
    inside_function: bool = False
    main_args: str = ""
    headers: dict[str, bytes] = field(default_factory=dict)
    file_label: str = "kernel.c"


@dataclass
class RunResult:
    """A built-and-run piece of code: either a terminal evaluation (rejected, compile error,
    runtime error, timeout) or the simulator's report to be judged."""

    evaluation: Evaluation | None = None
    sim: Any = None  # toolchain.SimRun
    seconds: float = 0.0


@dataclass
class Reference:
    sig: Signature | None
    snapshots: list[dict[str, bytes]]
    seeds: tuple[int, ...] = ()


KEEP_KERNEL = "autocomp_keep_kernel"
FUNCTION_ALLOWANCE = Allowance(reserved=frozenset({KEEP_KERNEL}))

# What a substitute-mode test program may have beyond a kernel: its main (renamed), exit(),
# the harness's measure calls placed on its marker lines, and the keep-alive table.
SUBSTITUTE_ALLOWANCE = Allowance(
    undefined=frozenset({"exit", "abort", "autocomp_measure_begin", "autocomp_measure_end"}),
    reserved=frozenset({SUBSTITUTE_MAIN, "autocomp_measure_begin", "autocomp_measure_end", SUBSTITUTE_KEEP}),
)


class GemminiBackend(Backend):
    name = "gemmini"
    file_suffixes = (".c", ".h")
    primary_metric = "cycles"
    lower_is_better = True
    evaluator_version = "25"  # 25: an execute step stretched by the writes its bank takes is checked again over its stretched span until no further write lands on it (the single-ported bank serves every write and read; 256x16x256 in 16x1x16 tiles read below that bound); 24: a move-out is done (its rows free, the next store free to start) when its last SRAM read fires, up to 9 accumulator or 6 scratchpad rows ahead of the DMA writer taking them (Scratchpad.scala io.dma.write.resp at the read; the write path's queues); 23: each SRAM bank keeps 128 write windows and replaces the one that ends first (16 kept oldest-first forgot the first move-ins of a loop_ws tile before its steps were timed); 22: a scratchpad bank refuses reads (execute operands, move-outs) in any cycle it is written, the array's result writes included (ScratchpadBank single ported); 21: the array's result writes go before a move-in's into the same scratchpad or accumulator bank (Scratchpad.scala write precedence); 20: an accumulator bank answers no move-out read while the array (or an accumulating move-in) accumulates into it (AccumulatorMem read port; ACC_BANKS 2); 19: refit 60/35/50 (L2 hit 35) on evaluator 18's model; 18: accumulator read path 10 cycles (AccumulatorScale latency 8), scratchpad read path 2 (a one-cycle queue, not its depth), ReLU before the scale on accumulator read-outs, accumulator array operands and normalisation activations refused with the RTL reason; 17: refit 60/40/50 (L2 hit 40, LLC hit 50; the grid rerun at evaluator 16); 16: LoopMatmul move-outs (and bias move-ins) walk the rows of one 64-column block before the next, as StC does; the DMA writer takes a row's blocks before writing it; loop_conv_ws moves out DIM channels per request; 15: DMA requests sized as the StreamReader/StreamWriter size them (the smallest aligned 16/32/64-byte block holding a line's span, all its beats); 14: refit 60/45/45 (L2 hit 45, LLC hit 45); 13: library with explicit tiles (tiled_matmul, tiled_conv) and plan/tile-step functions, buffers_kib; 12: DRAM banks and rows (FASED DDR3), refit 60/35/50; 11: a WS step's mesh tag freed by the next step's results; 10: library tile search as Gemmini's, divider early-out, L1 probes, conv operand reuse, refit 50/35/50; 9: mesh tags, LLC refills booked when DRAM answers, refit 80/45/50; 8: random L2 replacement, booking by time

    def __init__(self, settings: dict[str, Any] | None = None) -> None:
        super().__init__(settings)
        self._toolchain: Any = None
        self._references: dict[str, Reference] = {}
        # References being computed, by key: evaluations of the same original that run at
        # once (`eval FILE --against BASE` evaluates BASE and FILE side by side) share one.
        self._reference_jobs: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task]] = {}
        self._secret_seeds: dict[str, tuple[int, ...]] = {}
        self._harness_objects: dict[str, bytes] = {}
        self._harness_locks: dict[tuple[int, str], asyncio.Lock] = {}

    # -- settings --------------------------------------------------------------------
    def _setting(self, key: str) -> Any:
        return self.settings.get(key, DEFAULTS[key])

    def seeds(self) -> tuple[int, ...]:
        raw = self._setting("seeds")
        if isinstance(raw, int):
            raw = [raw]
        try:
            seeds = tuple(int(s) for s in raw)
        except (TypeError, ValueError):
            raise BackendError(
                f"autocomp.target.gemmini.seeds must be a list of integers, got {raw!r}"
            ) from None
        if not seeds:
            raise BackendError("autocomp.target.gemmini.seeds is empty; give at least one seed, e.g. [1, 2, 3]")
        return seeds

    def image(self) -> Image:
        """The Gemmini build the model stands for (BackendError naming the choices)."""
        try:
            return image_named(self._setting("image"))
        except ValueError as exc:
            raise BackendError(str(exc)) from None

    def _dma_inflight(self) -> int:
        raw = self._setting("dma_inflight")
        if raw is None:
            return self.image().dma_inflight
        if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= MAX_DMA_INFLIGHT:
            raise BackendError(
                f"autocomp.target.gemmini.dma_inflight must be an integer from 1 to {MAX_DMA_INFLIGHT} "
                f"(16 models Gemmini's default configuration, 64 its FireSim Lean image), got {raw!r}"
            )
        return raw

    def cache_identity(self) -> str:
        """Also covers the model, headers and harness sources: editing any of them changes
        cycle counts or verdicts, so cached evaluations must not be reused."""
        return f"{super().cache_identity()}:{_sources_digest()}"

    def headroom(self, problem: Problem, evaluation: Evaluation) -> str:
        """Compute and data floors of the problem against this version's cycles (see
        :mod:`.headroom`)."""
        from .headroom import headroom

        return headroom(problem, evaluation)

    # -- finding kernels -------------------------------------------------------------
    def detect(self, path: str, text: str) -> list[KernelSpan]:
        return detect_kernels(text)

    def detection_hint(self) -> str:
        return HINT

    # -- toolchain -------------------------------------------------------------------
    def toolchain(self) -> Any:
        """The discovered toolchain (BackendError naming the missing piece and its fix)."""
        if self._toolchain is None:
            try:
                from .toolchain import GemminiToolchain
            except ImportError as exc:
                raise BackendError(f"the Gemmini toolchain module cannot load ({exc}); run `autocomp doctor`") from exc
            self._toolchain = GemminiToolchain.discover(self.settings)
        return self._toolchain

    def tier(self) -> TierInfo:
        try:
            self.toolchain()
        except BackendError as exc:
            return TierInfo(name="gemmini (toolchain missing)", confirms=False, note=str(exc))
        return TierInfo(name=TIER_NAME, confirms=True, note="Spike with Autocomp's Gemmini functional and timing model")

    def doctor(self) -> list[ToolCheck]:
        try:
            from .toolchain import GemminiToolchain
        except ImportError as exc:
            return [ToolCheck("gemmini toolchain module", False, f"cannot import: {exc}")]
        return [*GemminiToolchain.doctor(self.settings), self._build_check()]

    def prompt_context(self, problem: Problem) -> dict[str, str]:
        """Adds ``image``: the Lean build's prompts say what it lacks (prompts/gemmini/lean.md)."""
        return {**super().prompt_context(problem), "image": str(self._setting("image"))}

    def _build_check(self) -> ToolCheck:
        """Which Gemmini build the cycles stand for (setting ``image``), or what is wrong with it."""
        try:
            image, inflight = self.image(), self._dma_inflight()
        except BackendError as exc:
            return ToolCheck("modelled build", False, str(exc))
        return ToolCheck("modelled build", True, f"{image.name}: {image.title}; {inflight} DMA requests in flight "
                         "(setting autocomp.target.gemmini.image)")

    # -- problem preparation ---------------------------------------------------------
    def prepare(self, problem: Problem) -> Prepared:
        """Parse the problem once: signature (function mode) or the test program's globals
        (SUBSTITUTE mode). BackendError with the fix when the harness cannot be built."""
        text = problem.file_text
        seeds = self.seeds()
        headers = _local_headers(problem.path)
        label = os.path.basename(problem.path) or "kernel.c"
        if problem.span.name == SUBSTITUTE_NAME and _has_markers(text, problem.span):
            main = find_function(text, "main")
            if main is None:
                raise BackendError(
                    f"{problem.path}: a `// SUBSTITUTE HERE` test program needs a main() that runs the kernel"
                )
            main_params = " ".join(main.params(mask(text)).split())
            main_args = "" if main_params in ("", "void") else "0, (char **)0"
            lines = text.splitlines(keepends=True)
            start_off = sum(len(l) for l in lines[: problem.span.start_line])
            end_off = sum(len(l) for l in lines[: problem.span.end_line])
            clean = mask(text)
            inside = _brace_depth(clean, start_off) > 0
            arrays = [g.name for g in find_global_arrays(text, exclude=(start_off, end_off))]
            if not arrays:
                raise BackendError(
                    f"{problem.path}: the test program has no global arrays outside the SUBSTITUTE region, so "
                    f"there is nothing to compare; keep inputs and outputs in file-scope arrays"
                )
            return Prepared("substitute", problem.span, seeds[:1], None, arrays, inside, main_args, headers, label)
        fn = find_function(text, problem.span.name)
        if fn is None:
            raise BackendError(f"{problem.path}: kernel function {problem.span.name!r} not found")
        sig = parse_signature(text, fn)
        return Prepared("function", problem.span, seeds, sig, headers=headers, file_label=label)

    # -- evaluation ------------------------------------------------------------------
    async def evaluate(self, problem: Problem, codes: Sequence[str]) -> list[Evaluation]:
        prep = self.prepare(problem)
        if not codes:
            return []
        self._dma_inflight()  # a bad setting is refused before anything is built (the image too)
        toolchain = self.toolchain()
        slots = asyncio.Semaphore(cpu_slots())
        key = f"{problem.oracle_key()}:{self.cache_identity()}:{prep.mode}:{len(prep.seeds)}"
        if key in self._references:
            seeds = self._references[key].seeds
        else:
            # Drawn once per reference computation; the reference and every candidate judged
            # against it run on the same secret inputs.
            seeds = self._secret_seeds.setdefault(key, self._draw_seeds(prep.seeds))
        prep = dataclasses.replace(prep, seeds=seeds)
        ref_task: asyncio.Task | None = None  # the reference run this call started (and owns)
        shared: asyncio.Task | None = None  # one another evaluation started, awaited here
        tasks: list[asyncio.Task] = []
        try:
            if key not in self._references:
                loop = asyncio.get_running_loop()
                job = self._reference_jobs.get(key)
                if job is not None and job[0] is loop and not job[1].done():
                    shared = job[1]
                else:
                    ref_task = asyncio.create_task(self._reference(problem, prep, toolchain, slots))
                    self._reference_jobs[key] = (loop, ref_task)
            tasks = [asyncio.create_task(self._build_and_run(problem, prep, prep.sig, code, toolchain, slots)) for code in codes]
            if ref_task is not None:
                self._references[key] = await ref_task
            elif shared is not None:
                self._references[key] = await asyncio.shield(shared)
            ref = self._references[key]
            results = list(await asyncio.gather(*tasks))
            if ref.sig is not None and prep.sig is not None and ref.sig != prep.sig:
                # The original wrote an array the signature called an input: redo with the
                # corrected roles (rare; only the first batch of a problem pays).
                reruns = [
                    asyncio.create_task(self._build_and_run(problem, prep, ref.sig, code, toolchain, slots))
                    for code in codes
                ]
                tasks = reruns
                results = list(await asyncio.gather(*reruns))
            return [self._judge(prep, ref, r) for r in results]
        finally:
            # On cancel or error, stop every build/run and wait until their processes are
            # killed and their directories removed before returning.
            pending = [t for t in tasks + ([ref_task] if ref_task else []) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
            # asyncio subprocess transports sit in reference cycles and are never closed
            # explicitly; collected after the caller's loop has closed, their finalizer raises
            # "Event loop is closed". Collect them now, while the loop still runs.
            gc.collect()

    def _draw_seeds(self, configured: tuple[int, ...]) -> tuple[int, ...]:
        if self._setting("public_seeds"):
            return configured
        return tuple(secrets.randbits(62) | 1 for _ in configured)

    async def _reference(self, problem: Problem, prep: Prepared, toolchain: Any, slots: asyncio.Semaphore) -> Reference:
        """Run the original kernel; its snapshots are what candidates must reproduce."""
        sig = prep.sig
        for _attempt in range(2):
            run = await self._build_and_run(problem, prep, sig, problem.code, toolchain, slots, is_reference=True)
            if run.evaluation is not None:
                ev = run.evaluation
                hint = ""
                if ev.verdict is Verdict.TIMEOUT:
                    hint = (
                        " If the kernel is just slow, raise the settings autocomp.target.gemmini.max_instructions "
                        "and autocomp.target.gemmini.run_timeout."
                    )
                raise BackendError(
                    f"{problem.path}: the original kernel `{problem.name}` cannot serve as the reference "
                    f"({ev.verdict.value}): {ev.feedback}{hint}"
                )
            if prep.mode == "substitute" or sig is None:
                return Reference(None, run.sim.snapshots, prep.seeds)
            changed = compare.changed_inputs(sig, run.sim.snapshots, len(prep.seeds))
            if not changed:
                return Reference(sig, run.sim.snapshots, prep.seeds)
            sig = sig.reclassified(changed)
        raise BackendError(f"{problem.path}: could not tell the inputs of `{problem.name}` from its outputs")

    async def _build_and_run(
        self,
        problem: Problem,
        prep: Prepared,
        sig: Signature | None,
        code: str,
        toolchain: Any,
        slots: asyncio.Semaphore,
        is_reference: bool = False,
    ) -> RunResult:
        start = time.monotonic()
        if not is_reference:
            reason = reject_reason(
                code, problem.name if prep.mode == "function" else None, sig.params if sig else None
            )
            if reason:
                return RunResult(Evaluation(Verdict.REJECTED, feedback=reason, tier=TIER_NAME), seconds=time.monotonic() - start)
        async with slots:
            workdir = tempfile.mkdtemp(prefix="autocomp-gemmini-")
            try:
                result = await self._build_in(workdir, problem, prep, sig, code, toolchain)
            finally:
                if not self._setting("keep_builds"):
                    shutil.rmtree(workdir, ignore_errors=True)
        result.seconds = time.monotonic() - start
        if result.evaluation is not None:
            result.evaluation.seconds = result.seconds
        return result

    async def _build_in(
        self, workdir: str, problem: Problem, prep: Prepared, sig: Signature | None, code: str, toolchain: Any
    ) -> RunResult:
        for name, data in prep.headers.items():
            with open(os.path.join(workdir, name), "wb") as f:
                f.write(data)
        candidate_text = problem.file_with(code)
        compile_timeout = float(self._setting("compile_timeout"))
        plan: HarnessPlan
        if prep.mode == "function":
            assert sig is not None
            plan = generate_function_harness(sig, prep.seeds)
            extra: tuple[str, ...] = ()
            # A static kernel that nothing in its file calls would be dropped by the compiler.
            candidate_text += (
                f"\n/* Added by Autocomp: keep the kernel in the object. */\n"
                f"static void *const {KEEP_KERNEL} __attribute__((used)) = (void *)&{problem.name};\n"
            )
        else:
            n_code_lines = len((code if code.endswith("\n") or not code else code + "\n").splitlines())
            candidate_text = instrument_substitute_file(
                candidate_text, prep.span.start_line - 1, prep.span.start_line + n_code_lines, prep.inside_function
            )
            plan = generate_substitute_harness(prep.global_arrays, prep.seeds[0], prep.inside_function, main_args=prep.main_args)
            candidate_text += plan.candidate_suffix
            extra = (f"-Dmain={SUBSTITUTE_MAIN}",)
        with open(os.path.join(workdir, CANDIDATE_FILE), "w", encoding="utf-8") as f:
            f.write(candidate_text)

        def compile_error(built: Any, what: str = "the compiler") -> RunResult:
            if built.timed_out:
                message = f"{what} did not finish within {compile_timeout} s"
            else:
                message = map_compiler_message(built.tail(6000), prep.span, _line_count(code), prep.file_label)
            return RunResult(Evaluation(Verdict.COMPILE_ERROR, feedback=message, tier=TIER_NAME))

        # 1. The candidate's translation unit, alone.
        built = await toolchain.compile_object(CANDIDATE_FILE, "kernel.o", workdir, timeout=compile_timeout, extra=extra)
        if not built.ok or not os.path.exists(os.path.join(workdir, "kernel.o")):
            return compile_error(built)
        kernel_local = False
        if prep.mode == "function":
            found = _defined_function(os.path.join(workdir, "kernel.o"), problem.name)
            if found is None:
                return RunResult(Evaluation(
                    Verdict.REJECTED,
                    feedback=f"the compiled code defines no function `{problem.name}`; keep the kernel's name and signature",
                    tier=TIER_NAME,
                ))
            kernel_local = found == "local"
        # 2. Checks on the object that will run, not on its text.
        problems = check_object(
            os.path.join(workdir, "kernel.o"), SUBSTITUTE_ALLOWANCE if prep.mode == "substitute" else FUNCTION_ALLOWANCE
        )
        if problems:
            lead = "the compiled kernel does things a kernel may not"
            if prep.mode == "substitute":
                lead = (
                    "the compiled test program does things a kernel may not (in `// SUBSTITUTE HERE` mode the whole "
                    "program is the candidate, so the program's own code outside the kernel must pass these checks too)"
                )
            return RunResult(Evaluation(
                Verdict.REJECTED, feedback=lead + ":\n" + "\n".join(f"- {p}" for p in problems[:12]), tier=TIER_NAME
            ))
        # 3. Only the kernel stays global, renamed to the entry the harness calls.
        objcopy = toolchain.binutil("objcopy")
        if prep.mode == "function":
            steps = []
            if kernel_local:
                steps.append([objcopy, f"--globalize-symbol={problem.name}", "kernel.o"])
            steps.append([objcopy, f"--keep-global-symbol={problem.name}", "kernel.o"])
            steps.append([objcopy, f"--redefine-sym={problem.name}={KERNEL_ENTRY}", "kernel.o"])
            script = " && ".join(shlex.join(step) for step in steps)
            done = await toolchain.tool(["/bin/sh", "-c", script], workdir, timeout=compile_timeout)
            if not done.ok:
                return RunResult(Evaluation(Verdict.COMPILE_ERROR, feedback="objcopy failed: " + done.tail(2000), tier=TIER_NAME))
        # 4. The harness: its own translation unit (cached: it does not depend on the candidate).
        harness_obj = os.path.join(workdir, "harness.o")
        cache_key = hashlib.sha256(
            (plan.source + "\0" + problem.file_text + "\0" + repr(sorted(prep.headers.items()))).encode()
        ).hexdigest()
        if len(self._harness_locks) > 256:
            self._harness_locks.clear()
        lock = self._harness_locks.setdefault((id(asyncio.get_running_loop()), cache_key), asyncio.Lock())
        async with lock:  # one compile per harness, however many candidates wait for it
            cached = self._harness_objects.get(cache_key)
            if cached is None:
                with open(os.path.join(workdir, ORIGINAL_FILE), "w", encoding="utf-8") as f:
                    f.write(problem.file_text)
                with open(os.path.join(workdir, HARNESS_FILE), "w", encoding="utf-8") as f:
                    f.write(plan.source)
                built = await toolchain.compile_object(HARNESS_FILE, "harness.o", workdir, timeout=compile_timeout)
                if built.ok and os.path.exists(harness_obj):
                    # Everything the original file defines stays inside the harness object: only
                    # main (and in substitute mode the measure calls on the marker lines) is global.
                    keep = ["main"] + (["autocomp_measure_begin", "autocomp_measure_end"] if prep.mode == "substitute" else [])
                    built = await toolchain.tool(
                        [objcopy, *(f"--keep-global-symbol={k}" for k in keep), "harness.o"], workdir, timeout=compile_timeout
                    )
                if not built.ok or not os.path.exists(harness_obj):
                    return RunResult(Evaluation(
                        Verdict.RUNTIME_ERROR,
                        feedback="the generated harness does not compile against the original file:\n" + built.tail(3000),
                        tier=TIER_NAME,
                    ))
                with open(harness_obj, "rb") as f:
                    cached = f.read()
                if len(self._harness_objects) > 64:
                    self._harness_objects.clear()
                self._harness_objects[cache_key] = cached
            else:
                with open(harness_obj, "wb") as f:
                    f.write(cached)
        # 5. Link.
        elf = os.path.join(workdir, "kernel.elf")
        built = await toolchain.link(["harness.o", "kernel.o"], elf, workdir, timeout=compile_timeout)
        if not built.ok or not os.path.exists(elf):
            return compile_error(built, "the linker")
        try:
            symbols = read_symbols(elf)
            intruders = _harness_intruders(elf, harness_obj)
        except (OSError, ElfError, ObjectError) as exc:
            return RunResult(Evaluation(Verdict.RUNTIME_ERROR, feedback=f"cannot read the built program: {exc}", tier=TIER_NAME))
        if intruders:
            return RunResult(Evaluation(
                Verdict.REJECTED,
                feedback="the linked program has code of the kernel's inside the harness's code range: " + ", ".join(intruders[:5]),
                tier=TIER_NAME,
            ))
        regions: dict[str, tuple[str, int]] = {}
        for region, symbol in plan.region_symbols.items():
            sym = symbols.get(symbol)
            if sym is not None and sym.size > 0:
                regions[region] = (symbol, sym.size)
            elif prep.mode == "function":
                return RunResult(Evaluation(Verdict.RUNTIME_ERROR, feedback=f"harness array {symbol} missing from the program", tier=TIER_NAME))
        # Limits that fit the problem: max_instructions bounds the measured call alone (the
        # model enforces it at the end of the region); the harness's own work (filling and
        # copying the arrays) gets an allowance that scales with the bytes it handles, and so
        # does the wall limit.
        data_bytes = sum(size for _sym, size in regions.values())
        call_limit = int(self._setting("max_instructions"))
        calls = max(1, plan.snapshots_per_run // 2)  # the kernel runs once per input set
        sim = await toolchain.run(
            elf,
            workdir,
            regions,
            timeout=float(self._setting("run_timeout")) + data_bytes / HARNESS_BYTES_PER_SECOND,
            max_instructions=calls * call_limit + HARNESS_BASE_INSTRUCTIONS + HARNESS_INSTRUCTIONS_PER_BYTE * data_bytes,
            region_instruction_limit=call_limit,
            host_dcache=bool(self._setting("host_dcache")),
            **self.image().run_options(dma_inflight=self._dma_inflight()),
        )
        terminal = self._run_failure(sim, plan)
        if terminal is not None:
            return RunResult(terminal)
        return RunResult(sim=sim)

    def _run_failure(self, sim: Any, plan: HarnessPlan) -> Evaluation | None:
        """A terminal verdict from the simulator's report, or None when it ran through."""
        out = _tail(sim.stdout)
        printed = f"\nProgram output (untrusted):\n{out}" if out else ""
        if sim.timed_out:
            limit = f"{int(self._setting('max_instructions')):,} instructions per kernel call"
            raise_hint = (
                " (if the kernel is just slow, raise autocomp.target.gemmini.max_instructions and "
                "autocomp.target.gemmini.run_timeout)"
            )
            if getattr(sim, "stopped_quietly", False):
                why = (
                    f"stopped: the simulation ended without the harness's exit: the program ran past {limit}, or it "
                    f"stopped the simulator itself (writing tohost) instead of returning{raise_hint}"
                )
            else:
                why = (
                    f"stopped: the run exceeded the wall limit ({self._setting('run_timeout')} s plus the harness's "
                    f"allowance) or {limit}{raise_hint}"
                )
            return Evaluation(
                Verdict.TIMEOUT,
                feedback=why + (f"; {sim.error}" if sim.error else "") + printed,
                tier=TIER_NAME,
            )
        if sim.error and "the measured call retired" in sim.error:
            return Evaluation(Verdict.TIMEOUT, feedback=f"stopped: {sim.error}{printed}", tier=TIER_NAME)
        if sim.error:
            return Evaluation(Verdict.RUNTIME_ERROR, feedback=f"simulator stopped the program: {sim.error}{printed}", tier=TIER_NAME)
        if sim.exit_code is None:
            return Evaluation(Verdict.RUNTIME_ERROR, feedback=f"the program never exited{printed}", tier=TIER_NAME)
        if sim.exit_code != 0:
            return Evaluation(Verdict.RUNTIME_ERROR, feedback=f"the program exited with code {sim.exit_code}{printed}", tier=TIER_NAME)
        if len(sim.snapshots) != plan.snapshots_per_run:
            return Evaluation(
                Verdict.RUNTIME_ERROR,
                feedback=(
                    f"the program did not follow the harness ({len(sim.snapshots)} of {plan.snapshots_per_run} "
                    f"snapshots taken): the kernel must return normally, not call exit() or jump elsewhere{printed}"
                ),
                tier=TIER_NAME,
            )
        return None

    def _judge(self, prep: Prepared, ref: Reference, run: RunResult) -> Evaluation:
        if run.evaluation is not None:
            return run.evaluation
        sim = run.sim
        if prep.mode == "function":
            assert ref.sig is not None
            mismatch = compare.compare_function_runs(ref.sig, prep.seeds, MODES, ref.snapshots, sim.snapshots)
        else:
            mismatch = compare.compare_globals(ref.snapshots[0], sim.snapshots[0])
        source = model_source(self.image())
        metrics = _metrics(sim, source)
        if mismatch is not None:
            return Evaluation(Verdict.INCORRECT, metrics=metrics, feedback=mismatch.message, tier=TIER_NAME, confirmed=True, seconds=run.seconds)
        if sim.cycles is None:
            return Evaluation(
                Verdict.RUNTIME_ERROR,
                feedback="the timing model reported no measured region",
                tier=TIER_NAME,
                seconds=run.seconds,
            )
        return Evaluation(Verdict.CORRECT, metrics=metrics, feedback=summary(sim, source), tier=TIER_NAME, confirmed=True, seconds=run.seconds)


# -- helpers -------------------------------------------------------------------------

def _sources_digest() -> str:
    """Hash of everything under this package that decides an evaluation's outcome."""
    return sources_digest(os.path.dirname(os.path.abspath(__file__)), ("", "sim", "include", "include/include"),
                          (".py", ".h", ".c", ".cc", ".inc", ".toml"))


def _harness_intruders(elf: str, harness_obj: str) -> list[str]:
    """Symbols in the linked ELF's harness section that are neither the harness object's own
    nor the runtime's exit (which the model trusts for its exit marker)."""
    from .toolchain import HARNESS_SECTION

    own = read_object(harness_obj)
    index = {s.index for s in own.sections if s.name == HARNESS_SECTION}
    allowed = {sym.name for sym in own.symbols if sym.shndx in index and sym.name} | {"_exit"}
    linked = read_object(elf)
    ranges = [(s.index, s.addr, s.addr + s.size) for s in linked.sections if s.name == HARNESS_SECTION]
    bad = []
    for sym in linked.symbols:
        if not sym.name or sym.type in (3, 4):  # section and file symbols
            continue
        for idx, _lo, _hi in ranges:
            if sym.shndx == idx and sym.name not in allowed:
                bad.append(sym.name)
    return sorted(set(bad))


def _defined_function(obj_path: str, name: str) -> str | None:
    """"global" or "local" when ``obj_path`` defines ``name`` (a function), else None."""
    try:
        obj = read_object(obj_path)
    except Exception:  # noqa: BLE001 - an unreadable object is reported by check_object
        return None
    for sym in obj.symbols:
        if sym.name == name and sym.shndx != 0 and sym.type == 2:
            return "local" if sym.bind == 0 else "global"
    return None


def model_source(image: Image) -> str:
    """What a modelled figure is a claim about: the model, and the build when not the default."""
    return MODEL_SOURCE if image.name == "default" else f"{MODEL_SOURCE}, {image.name} image"


def _metrics(sim: Any, source: str = MODEL_SOURCE) -> dict[str, Metric]:
    metrics: dict[str, Metric] = {}
    if sim.cycles is not None:
        metrics["cycles"] = Metric(float(sim.cycles), "cycles", source)
    if sim.instructions is not None:
        metrics["instructions"] = Metric(float(sim.instructions), "instructions", "spike")
    for queue, busy in sorted((sim.queue_busy or {}).items()):
        metrics[f"{queue}_busy"] = Metric(float(busy), "cycles", source)
    metrics["scratchpad_rows"] = Metric(float(sim.scratchpad_rows_used), "rows", source)
    metrics["accumulator_rows"] = Metric(float(sim.accumulator_rows_used), "rows", source)
    return metrics


def summary(sim: Any, source: str = MODEL_SOURCE) -> str:
    """Readable hardware feedback for the plan prompt: cycles, where they went, memory use."""
    lines = []
    cycles = sim.cycles or 0
    if sim.cycles is not None:
        lines.append(f"Modelled {sim.cycles:,} cycles ({source}) for one kernel call.")
    if sim.instructions is not None:
        lines.append(f"Host instructions in the call: {sim.instructions:,} (spike).")
    busy = sim.queue_busy or {}
    if busy:
        parts = []
        for queue in ("load", "execute", "store"):
            if queue in busy:
                share = f" ({100 * busy[queue] / cycles:.0f}% of cycles)" if cycles else ""
                parts.append(f"{queue} {busy[queue]:,}{share}")
        lines.append("Queue busy cycles: " + ", ".join(parts) + ".")
        top = max(busy, key=lambda q: busy[q])
        if cycles and busy[top] < 0.5 * cycles:
            lines.append(
                "No queue is busy for half the time: the kernel is bound by host-side issue, fences or "
                "dependencies; overlap loads, compute and stores, and issue fewer, larger commands."
            )
        else:
            lines.append(f"Busiest queue: {top}.")
    lines.append(
        f"Scratchpad rows used: {sim.scratchpad_rows_used:,} of {SCRATCHPAD_ROWS:,}; accumulator rows used: "
        f"{sim.accumulator_rows_used:,} of {ACCUMULATOR_ROWS:,}."
    )
    return "\n".join(lines)


_DIAG = re.compile(r"^(?:\./)?kernel\.c:(\d+)(:\d+)?(:)", re.M)
_GUTTER = re.compile(r"^(\s*)(\d+) \|", re.M)


def _line_count(code: str) -> int:
    return len(code.splitlines())


def map_compiler_message(text: str, span: KernelSpan, code_lines: int, file_label: str) -> str:
    """Compiler output with candidate-file lines turned into kernel-relative ones
    ("kernel line 7:12: error: ...") and the include chain noise dropped. ``code_lines`` is
    the candidate kernel's length; lines after it map back to the original file's."""
    original_len = span.end_line - span.start_line

    def repl(m: re.Match) -> str:
        line = int(m.group(1))  # 1-based line in the candidate file
        col = m.group(2) or ""
        if span.start_line < line <= span.start_line + code_lines:
            return f"kernel line {line - span.start_line}{col}{m.group(3)}"
        if line > span.start_line + code_lines:
            line = line - code_lines + original_len
        return f"{file_label}:{line}{col}{m.group(3)}"

    kept = [
        l
        for l in text.splitlines()
        if not l.startswith("In file included from") and not re.match(r"\s+from [\w./-]+:\d+[:,]$", l)
    ]
    def gutter(m: re.Match) -> str:
        # gcc's source excerpts ("   25 | code") use file lines too
        line = int(m.group(2))
        if span.start_line < line <= span.start_line + code_lines:
            line -= span.start_line
        elif line > span.start_line + code_lines:
            line = line - code_lines + original_len
        return f"{m.group(1)}{line:>{len(m.group(2))}} |"

    text = _DIAG.sub(repl, "\n".join(kept))
    return _GUTTER.sub(gutter, text).strip()


def _tail(text: str, limit: int = 1500) -> str:
    text = (text or "").strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def _has_markers(text: str, span: KernelSpan) -> bool:
    lines = text.splitlines()
    return span.start_line >= 1 and "SUBSTITUTE HERE" in lines[span.start_line - 1]


def _brace_depth(clean: str, offset: int) -> int:
    depth = 0
    for ch in clean[:offset]:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
    return depth


def _local_headers(path: str) -> dict[str, bytes]:
    """Headers next to the kernel's file (``#include "params.h"``), copied into each build
    directory. Our own gemmini.h always wins over a local copy."""
    folder = os.path.dirname(os.path.abspath(path)) if path else ""
    found: dict[str, bytes] = {}
    if not folder or not os.path.isdir(folder):
        return found
    total = 0
    for name in sorted(os.listdir(folder)):
        full = os.path.join(folder, name)
        if not name.endswith(".h") or name in ("gemmini.h", "autocomp_harness.h") or not os.path.isfile(full):
            continue
        size = os.path.getsize(full)
        if total + size > 4 << 20:
            break
        with open(full, "rb") as f:
            found[name] = f.read()
        total += size
    return found
