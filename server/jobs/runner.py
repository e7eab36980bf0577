"""Running a job: build its problem and its run off the event loop, stream the engine's
events into the job's state, publish them, and hand a finished run to the ``finished``
hooks (the apply feature).

A job runs as its own asyncio task (see :mod:`.registry`); everything slow happens
elsewhere: the backend and the problem are built (the backend may probe toolchains, the
problem parses the whole file) and the run is set up on the job's worker thread, and the
candidates are evaluated in the job's evaluation process (:mod:`.worker`). Two kinds of
job share this machinery: ``optimize`` (the beam search, through the engine's front door
:func:`autocomp.run.start`) and ``tune`` (the constants tuning of
:mod:`autocomp.tuning.engine`, whose trials are streamed as the same engine events, so the
progress, lenses, diagnostics and apply steps are the same).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import traceback
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from lsprotocol import types as lsp

from autocomp import events as ev
from autocomp.backends.base import Backend, BackendError
from autocomp.model import Candidate, Problem
from autocomp.server.documents import INLINE_BYTES, DetectedKernel, uri_to_path
from autocomp.server.jobs.publish import Publisher, begin_progress, end_progress
from autocomp.server.jobs.state import OPTIMIZE, TUNE, Job
from autocomp.server.jobs.worker import EvaluationProcess, SearchWorker

if TYPE_CHECKING:
    from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)


def start(
    ls: "AutocompServer",
    uri: str,
    detected: DetectedKernel,
    *,
    kind: str = OPTIMIZE,
    seed_plans: list[str] | None = None,
    previous: Job | None = None,
    reuse: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
) -> Job:
    """Start a job on ``detected`` in the current text of ``uri``; returns at once (nothing
    is parsed or built on the event loop)."""
    text, _version = ls.document_text(uri) or ("", None)
    span = detected.span
    job = Job(
        uri=uri,
        kernel=detected.name,
        target=detected.target,
        path=uri_to_path(uri),
        original_code=span.text_of(text),
        start_line=span.start_line,
        end_line=span.end_line,
        lower_is_better=detected.backend.lower_is_better,
        kind=kind,
        seed_plans=list(seed_plans or []),
        reuse=reuse,
        options=dict(options or {}),
    )
    job.begin(ls.settings.search.iterations if kind == OPTIMIZE else 0, detected.backend.primary_metric)
    target_settings = ls.settings.target_settings(detected.target)

    async def body(j: Job) -> None:
        if previous is not None:
            await ls.jobs.wait(previous)
        await run_job(ls, j, text, target_settings, dict(j.options), detected)

    return ls.jobs.start(job, body)


def _build(job: Job, text: str, target_settings: dict[str, Any], built: dict[str, Any]) -> tuple[Problem, Backend]:
    """The job's own backend (it runs on the job's worker loop, and a backend may hold
    loop-bound state) and its problem; on the worker thread. The problem is also left in
    ``built`` for the job's task, which re-anchors the job on it."""
    from autocomp.backends import get_backend

    backend = get_backend(job.target, target_settings)
    problem = built.get("prebuilt") or backend.make_problem(job.path, text, function=job.kernel)
    built["problem"] = problem
    return problem, backend


def _search_factory(
    ls: "AutocompServer", job: Job, text: str, target_settings: dict[str, Any], executor: Any, built: dict[str, Any]
) -> Callable[[], Any]:
    """A function that sets up the job's run through the engine's front door
    (:func:`autocomp.run.start`); it runs on the job's worker thread, so building the
    problem, the LLM SDK imports and client setup never stall the server's loop."""
    from autocomp.run import RunSpec, resolve_llms

    settings = ls.settings
    store = ls.store()
    overrides = settings.search_overrides()
    executor_spec = settings.executor
    seed_plans = list(job.seed_plans)
    reuse = dict(job.reuse) if job.reuse else None

    def build() -> Any:
        from autocomp.run import start as start_run
        from autocomp.schedules import ReuseChoice

        problem, backend = _build(job, text, target_settings, built)
        # Explicit models, else AUTOCOMP_LLM, else the recorded session next to the
        # kernel, as the CLI does; a RunSetupError with the fix otherwise.
        specs = resolve_llms(settings.llm, job.path)
        spec = RunSpec(
            llm=specs,
            overrides=overrides,
            executor=executor if executor is not None else executor_spec,
            seed_plans=seed_plans,
            reuse=ReuseChoice.from_json(reuse) if reuse else None,
        )
        return start_run(problem, backend, spec, store, kernel_path=job.path)

    return build


TUNE_BEAM = 4  # configurations a tuning offers as candidates (diagnostics, quick fixes)


class TuneRun:
    """A tuning of a kernel's constants as a run: ``run()`` streams the engine's events
    (the baseline, one ``CandidateEvaluated`` per configuration tried, ``RunFinished``),
    ``stop()`` ends it after the configurations in flight, keeping the best so far."""

    def __init__(self, problem: Problem, backend: Backend, store: Any, executor: Any, options: dict[str, Any]) -> None:
        self.problem, self.backend, self.store, self.executor = problem, backend, store, executor
        self.options = options
        self._stop = False

    def stop(self) -> None:
        self._stop = True

    async def run(self) -> AsyncIterator[Any]:
        from autocomp.evaluator import Evaluator
        from autocomp.model import Verdict
        from autocomp.tuning.engine import DEFAULT_BUDGET, TuneError, find_space, tune

        problem, backend = self.problem, self.backend
        space = await find_space(backend, problem)
        valid = space.valid_configs()
        strategy = str(self.options.get("strategy") or "tpe")
        budget = self.options.get("budget")
        if budget is None:
            budget = len(valid) if strategy == "grid" else min(DEFAULT_BUDGET, len(valid))
        budget = max(1, min(int(budget), len(valid) or 1))
        evaluator = Evaluator(backend, self.store, executor=self.executor) if self.executor is not None else Evaluator(backend, self.store)
        run_id = self.store.new_run_id(problem.name) if self.store is not None else "tune"
        tier = backend.tier()
        yield ev.RunStarted(
            run_id, problem.path, problem.name, problem.target, {"iterations": budget, "strategy": strategy}, [],
            tier.name, tier.confirms, False, backend.primary_metric,
        )
        base_eval = await evaluator.evaluate_one(problem, problem.code)
        baseline = Candidate(id="t0", code=problem.code, plan="the constants as written", evaluation=base_eval)
        yield ev.BaselineEvaluated(run_id, baseline)
        if base_eval.verdict not in (Verdict.CORRECT, Verdict.UNVERIFIED):
            raise TuneError(f"{problem.path}: the kernel as written does not evaluate ({base_eval.verdict.value}): "
                            f"{base_eval.feedback[:600]}")
        queue: asyncio.Queue[Any] = asyncio.Queue()
        names = space.names

        ranked: list[tuple[float, Candidate]] = []

        def on_trial(trial: Any, result: Any) -> None:
            config = ", ".join(f"{n}={trial.config[n]}" for n in names)
            cand = Candidate(id=f"t{trial.number}", code=trial.code, plan=f"constants {config}", parent=baseline.id,
                             iteration=trial.number, evaluation=trial.evaluation)
            queue.put_nowait(ev.CandidateEvaluated(run_id, trial.number, cand, trial.speedup, bool(trial.speedup and trial.speedup > 1.0), trial.number))
            if trial.speedup is not None and trial.evaluation.verdict.correct:
                # The "beam" of a tuning: its best configurations so far (diagnostics, quick fixes).
                ranked.append((trial.speedup, cand))
                ranked.sort(key=lambda pair: pair[0], reverse=True)
                del ranked[TUNE_BEAM:]
                beam = [ev.BeamEntry(c.id, c.plan, c.evaluation.metrics.get(backend.primary_metric), sp, c.iteration)
                        for sp, c in ranked]
                queue.put_nowait(ev.BeamUpdated(run_id, trial.number, beam))

        task = asyncio.ensure_future(tune(
            problem, backend, self.store, budget=budget, strategy=strategy, seed=int(self.options.get("seed") or 0),
            space=space, evaluator=evaluator, on_trial=on_trial, run_id=run_id, baseline=base_eval,
            should_stop=lambda: self._stop,
        ))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                yield item
            result = task.result()
        finally:
            if not task.done():
                task.cancel()
        best = baseline
        if result.best is not None and result.improved:
            best = Candidate(id=f"t{result.best.number}", code=result.best.code, plan="", parent=baseline.id,
                             evaluation=result.best.evaluation)
        yield ev.RunFinished(
            run_id, "cancelled" if self._stop else "completed", best, baseline,
            result.speedup if best is not baseline else 1.0, backend.primary_metric, result.confirmed,
            evaluated_total=len(result.trials),
        )


def _tune_factory(
    ls: "AutocompServer", job: Job, text: str, target_settings: dict[str, Any], executor: Any, options: dict[str, Any],
    built: dict[str, Any],
) -> Callable[[], Any]:
    store = ls.store()

    def build() -> Any:
        problem, backend = _build(job, text, target_settings, built)
        return TuneRun(problem, backend, store, executor, options)

    return build


def _close_later(executor: Any) -> None:
    """End an evaluation process without blocking the loop (it may take a moment)."""
    if executor is not None:
        threading.Thread(target=executor.close, name="autocomp close evaluations", daemon=True).start()


async def run_job(
    ls: "AutocompServer",
    job: Job,
    text: str,
    target_settings: dict[str, Any],
    options: dict[str, Any] | None = None,
    detected: DetectedKernel | None = None,
) -> None:
    """The body of a job's task. Raises nothing but its own cancellation: a crashed job
    reports its error and the server lives on."""
    from autocomp.errors import UserError

    publisher = Publisher(ls, job)
    # Evaluations out of the server's process (its GIL serves the editor's requests);
    # another executor (Ray) is already out of it.
    executor = EvaluationProcess() if ls.settings.executor in ("", "local", None) else None
    try:
        ls.notify_status(job.status())
        built: dict[str, Any] = {}
        if detected is not None and len(text) > INLINE_BYTES:
            # A big document's problem is built in the detection process: parsing it on
            # the worker thread would hold the interpreter (and so every request) for
            # as long as one parse of the whole file takes.
            built["prebuilt"] = await ls.documents.make_problem(job.uri, detected, text, target_settings)
        if job.kind == TUNE:
            factory = _tune_factory(ls, job, text, target_settings, executor, options or {}, built)
        else:
            factory = _search_factory(ls, job, text, target_settings, executor, built)
        worker = SearchWorker(factory, f"autocomp {job.id}")
        job.attach(search=worker)
        await begin_progress(ls, job)
        async for event in worker.events():
            problem = built.pop("problem", None)
            if problem is not None:
                job.anchor_on(problem.code, problem.span.start_line, problem.span.end_line)
            job.fold(event)
            if isinstance(event, ev.BaselineEvaluated) and job.baseline is not None and job.baseline.metric is not None:
                ls.sessions.kernel(job.uri, job.kernel).measurement = job.baseline.metric  # the lens shows it from now on
            if isinstance(event, ev.RunFinished):
                publisher.publish(force=True)
                end_progress(ls, job)  # the progress bar closes before the edit and its message
                if not job.superseded:
                    for hook in ls.jobs.hooks.finished:
                        await hook(job, event)
            elif isinstance(event, ev.RunFailed):
                ls.show(f"Autocomp: {job.verb} {job.kernel} failed: {event.error}", lsp.MessageType.Error)
            elif isinstance(event, ev.Notice) and event.level == "warning":
                ls.report_once(f"Autocomp: {event.message}", lsp.MessageType.Warning)
            publisher.publish(force=not isinstance(event, (ev.CandidateEvaluated, ev.PlansProposed)))
        job.stream_ended()
    except (UserError, BackendError) as exc:
        job.fail(str(exc))
        ls.report_once(f"Autocomp: {exc}", lsp.MessageType.Error)
    except asyncio.CancelledError:
        job.cancelled()
        if isinstance(job.search, SearchWorker):
            job.search.cancel()  # the worker's evaluations are killed with it
        raise
    except Exception as exc:  # a crashed job reports its error and leaves the server healthy
        log.error("job %s crashed:\n%s", job.id, traceback.format_exc())
        job.fail(f"{type(exc).__name__}: {exc}")
        ls.show(f"Autocomp: {job.verb} {job.kernel} failed: {job.message}", lsp.MessageType.Error)
    finally:
        _close_later(executor)
        publisher.close()
        end_progress(ls, job)
        try:
            publisher.publish(force=True)
        except Exception:  # the connection may be gone at shutdown
            log.debug("final publish failed", exc_info=True)
