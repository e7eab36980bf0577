"""The engine's front door: the one place that turns a problem and a run spec into a running
search, and that compares two versions of a kernel.

The CLI (``autocomp optimize``/``eval``), the language server (jobs, tune-on-save) and
anything else that drives the engine use only this module:

- :func:`start` builds the LLM pool (and its budget), the evaluator and the search for a
  :class:`RunSpec`, and returns a :class:`Run`: its :meth:`Run.events` is the typed event
  stream, :meth:`Run.stop` ends it cleanly with the best so far, and the pool is closed when
  the stream ends, however it ends.
- :func:`prepare_resume` reads a stored run back into a problem and a spec.
- :func:`resolve_llms` picks the LLMs the same way everywhere: explicit specs, else
  ``AUTOCOMP_LLM``, else the recorded session next to the kernel (``FILE.session.jsonl``).
- :func:`resolve_config` layers search settings: defaults, then the settings a replayed
  session was recorded with, then what the user set explicitly.
- :func:`compare` evaluates a baseline and a candidate and computes the speedup.
- :func:`unified_diff` is the one diff; :func:`detect_kernels` the one detection loop; the
  one re-anchoring rule is :mod:`autocomp.anchor`.
"""

from __future__ import annotations

import asyncio
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Iterable

from autocomp.backends.base import Backend, BackendError
from autocomp.config import SearchConfig
from autocomp.errors import UserError
from autocomp.events import Event
from autocomp.model import Evaluation, KernelSpan, Problem, Verdict, speedup

# The search settings a recorded session carries in its header and a replay reuses: the
# ones that decide which prompts are asked (so a replay under other values misses replies).
SESSION_KNOBS = ("iterations", "beam", "plans", "implementations", "keep", "explore_rate", "seed", "min_improvement", "repair", "early_stop", "tune_evals")


class RunSetupError(UserError):
    """A run cannot start (no LLM, unknown run, bad settings); the message says the fix."""


@dataclass
class RunSpec:
    """What to run, beyond the problem: every field optional.

    ``overrides`` are search settings the user set explicitly (``SearchConfig`` field names);
    unset ones come from a replayed session's header, else the defaults.
    """

    llm: list[str] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)
    record: str | None = None
    executor: Any = "local"  # a spec (``local``, ``ray``, ``ray://HOST:PORT``) or an Executor
    seed_plans: list[str] = field(default_factory=list)
    reuse: Any = None  # a schedules.ReuseChoice
    run_id: str | None = None  # set: resume this run
    base_config: SearchConfig | None = None  # a resumed run's stored settings


def resolve_llms(explicit: Iterable[str] | None, kernel_path: str | None) -> list[str]:
    """Explicit specs, else ``AUTOCOMP_LLM`` (comma-separated), else the recorded session
    next to the kernel; a RunSetupError with the ways to fix it otherwise."""
    specs = [s for s in (explicit or []) if s]
    if specs:
        return specs
    env = os.environ.get("AUTOCOMP_LLM", "").strip()
    if env:
        return [s.strip() for s in env.split(",") if s.strip()]
    if kernel_path:
        session = Path(kernel_path).with_suffix(".session.jsonl")
        if session.is_file():
            return [f"replay:{session}"]
    raise RunSetupError(
        "no LLM given: pass --llm openai:MODEL / anthropic:MODEL (keys from OPENAI_API_KEY / ANTHROPIC_API_KEY), "
        "--llm replay:SESSION.jsonl, or set AUTOCOMP_LLM (in the editor: the setting autocomp.llm); "
        "a FILE.session.jsonl next to the kernel is replayed when none is given"
    )


def session_settings(specs: Iterable[str]) -> dict[str, Any]:
    """The search settings recorded in the header of the replayed sessions (when every
    LLM is a replay and the headers agree); empty for live models and old sessions."""
    from autocomp.llm.session import read_header

    found: dict[str, Any] | None = None
    for spec in specs:
        provider, _, rest = spec.partition(":")
        if provider != "replay":
            return {}
        try:
            header = read_header(rest)
        except OSError:
            return {}
        search = header.get("search") if isinstance(header, dict) else None
        if not isinstance(search, dict):
            return {}
        search = {k: v for k, v in search.items() if k in SESSION_KNOBS}
        if found is not None and found != search:
            return {}
        found = search
    return found or {}


def resolve_config(spec: RunSpec, specs: list[str]) -> SearchConfig:
    """Defaults (or a resumed run's stored settings) < the replayed session's recorded
    settings < what the user set explicitly."""
    from autocomp.config import ConfigError

    values = (spec.base_config or SearchConfig()).to_json()
    if spec.base_config is None:
        values.update(session_settings(specs))
    values.update({k: v for k, v in spec.overrides.items() if v is not None})
    try:
        return SearchConfig.from_json(values)
    except (ConfigError, TypeError) as exc:
        raise RunSetupError(str(exc)) from None


class Run:
    """A search that has been set up: iterate :meth:`events`, call :meth:`stop` to end it.

    The pool (with its budget) belongs to the run and is closed when the stream ends."""

    def __init__(self, search: Any, pool: Any, config: SearchConfig, specs: list[str]) -> None:
        self.search = search
        self.pool = pool
        self.config = config
        self.specs = specs

    @property
    def run_id(self) -> str:
        return self.search.run_id

    @property
    def replay(self) -> bool:
        return bool(self.pool.all_replay)

    async def events(self) -> AsyncIterator[Event]:
        try:
            async for event in self.search.run():
                yield event
        finally:
            await self.pool.close()

    run = events  # what a SearchWorker drives

    def stop(self) -> None:
        self.search.stop()


def start(problem: Problem, backend: Backend, spec: RunSpec, store: Any, kernel_path: str | None = None) -> Run:
    """Set up a run of the beam search on ``problem`` (no LLM call is made until
    :meth:`Run.events` is iterated). Raises RunSetupError / UserError with the fix."""
    from autocomp.evaluator import Evaluator
    from autocomp.executor import ExecutorError, make_executor
    from autocomp.llm import LLMConfigError, build_pool
    from autocomp.prompts import PromptError
    from autocomp.search import BeamSearch

    specs = resolve_llms(spec.llm, kernel_path if kernel_path is not None else problem.path)
    config = resolve_config(spec, specs)
    header = {"search": {k: getattr(config, k) for k in SESSION_KNOBS if hasattr(config, k)}}
    try:
        pool = build_pool(
            specs, store, record=spec.record, concurrency=config.llm_concurrency, timeout=config.llm_timeout,
            retries=config.llm_retries, header=header,
        )
    except LLMConfigError as exc:
        raise RunSetupError(str(exc)) from None
    pool.budget.calls, pool.budget.tokens, pool.budget.seconds = config.budget_calls, config.budget_tokens, config.budget_seconds
    try:
        executor = spec.executor if not isinstance(spec.executor, (str, type(None))) else make_executor(spec.executor or "local")
        evaluator = Evaluator(backend, store, executor=executor)
    except ExecutorError as exc:
        raise RunSetupError(str(exc)) from None
    try:
        search = BeamSearch(
            problem, backend, pool, config, store, run_id=spec.run_id, resumed=spec.run_id is not None,
            seed_plans=list(spec.seed_plans), evaluator=evaluator, reuse=spec.reuse,
        )
    except PromptError as exc:
        raise RunSetupError(str(exc)) from None
    return Run(search, pool, config, specs)


def prepare_resume(store: Any, run_id: str, get_backend: Callable[[str], Backend]) -> tuple[Problem, Backend, RunSpec]:
    """A stored run's problem, backend and spec (its models, settings, seed plans, reuse)."""
    from autocomp.schedules import ReuseChoice

    meta = store.run_meta(run_id)
    if meta is None:
        raise RunSetupError(f"no run {run_id!r} in {store.home} (list them with `autocomp runs`)")
    try:
        problem = Problem.from_json(meta["problem"])
        base = SearchConfig.from_json(meta["config"])
    except (KeyError, TypeError, ValueError) as exc:
        raise RunSetupError(f"run {run_id!r} in {store.home} has unreadable metadata ({exc}); start a new run") from None
    try:
        backend = get_backend(problem.target)
    except BackendError as exc:
        raise RunSetupError(str(exc)) from None
    spec = RunSpec(
        llm=list(meta.get("models") or []),
        run_id=run_id,
        seed_plans=list(meta.get("seed_plans") or []),
        reuse=ReuseChoice.from_json(meta["reuse"]) if meta.get("reuse") else None,
        base_config=base,
    )
    return problem, backend, spec


@dataclass
class Comparison:
    """A baseline and a candidate evaluated on the same problem: the verdicts, the metric
    speedups are computed on, and the speedup (null unless both are correct)."""

    baseline: Evaluation
    candidate: Evaluation
    primary_metric: str
    lower_is_better: bool
    speedup: float | None


async def compare(
    backend: Backend,
    baseline: Problem,
    candidate_code: str,
    store: Any = None,
    candidate_problem: Problem | None = None,
    executor: Any = None,
) -> Comparison:
    """Evaluate ``baseline.code`` on ``baseline`` and ``candidate_code`` on
    ``candidate_problem`` (default: the same problem: the baseline is the oracle)."""
    from autocomp.evaluator import Evaluator

    evaluator = Evaluator(backend, store, executor=executor) if executor is not None else Evaluator(backend, store)
    if candidate_problem is None or candidate_problem is baseline:
        base_eval, cand_eval = await evaluator.evaluate(baseline, [baseline.code, candidate_code])
    else:
        (base_eval,), (cand_eval,) = await asyncio.gather(
            evaluator.evaluate(baseline, [baseline.code]), evaluator.evaluate(candidate_problem, [candidate_code])
        )
    primary = backend.primary_metric
    ratio = None
    if base_eval.verdict is Verdict.CORRECT and cand_eval.verdict is Verdict.CORRECT:
        ratio = speedup(base_eval.metrics.get(primary), cand_eval.metrics.get(primary), backend.lower_is_better)
    return Comparison(base_eval, cand_eval, primary, backend.lower_is_better, ratio)


def unified_diff(before: str, after: str, from_name: str, to_name: str | None = None) -> str:
    """The one diff of the project: ``a/NAME`` → ``b/NAME`` unless ``to_name`` is given."""
    if to_name is None:
        from_name, to_name = f"a/{from_name}", f"b/{from_name}"
    return "".join(
        difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=from_name, tofile=to_name)
    )


def detect_kernels(
    path: str, text: str, backends: Iterable[tuple[str, Backend | None]], log: Any = None
) -> list[tuple[KernelSpan, Backend]]:
    """The one detection loop: each available backend that claims the file's suffix finds
    its kernels; a backend that raises finds none; a kernel two targets both claim (same
    lines) goes to the first. Sorted by line."""
    suffix = os.path.splitext(path)[1].lower()
    found: list[tuple[KernelSpan, Backend]] = []
    seen: set[tuple[int, int]] = set()
    for name, backend in backends:
        if backend is None:
            continue
        if backend.file_suffixes and suffix not in backend.file_suffixes:
            continue
        try:
            spans = backend.detect(path, text)
        except Exception:  # detection must never raise; if it does, treat as none
            if log is not None:
                log.exception("%s detection failed on %s", name, path)
            continue
        for span in spans:
            if (span.start_line, span.end_line) not in seen:
                seen.add((span.start_line, span.end_line))
                found.append((span, backend))
    found.sort(key=lambda item: item[0].start_line)
    return found
