"""The beam search of the Autocomp paper, as an async stream of events.

Per iteration, for every beam member: ``plans`` plan prompts (each with its own dropout of
the menu), ``implementations`` implementations per plan, every candidate evaluated as soon
as it is written (one repair attempt for build/run failures), then the next beam is the best
``beam`` of the old beam plus the children that beat their parent.

With ``reuse`` (a :class:`~autocomp.schedules.ReuseChoice`), a reuse phase comes first: each
plan of the source run's schedule is re-implemented on this kernel, in order, as its own
``implementations`` candidates (ids ``i0.b0.p<step>.k<k>``, iteration 0); a step whose best
child beats its parent moves the chain on, and the next plan is implemented on that child.
The first beam is the best of the start and the improving children; the ordinary search
then spends what is left of the budget. A finished run stores its own schedule.

With ``tune_evals`` > 0 (``--tune-evals N``, ``autocomp.search.tuneEvals``), a candidate that
becomes the new best has its integer constants (tile sizes, unroll factors, launch shapes;
:mod:`autocomp.tuning`) tuned with at most N evaluations and no LLM call, through the same
evaluator, cache and sandbox. A tuned variant that beats it enters the beam as its own
candidate ``<id>.t`` whose plan reads ``tuned from <id>: NAME=VALUE, ...``. A kernel without
tunables is not tuned; a configuration that fails is a failed trial; stop() ends the tuning
with the rest of the run. The sampler's seed comes from the run's seed and the candidate's
id, so tuning keeps a run reproducible.

All independent work runs concurrently: a plan's implementations start when that plan
arrives, a candidate's evaluation when its code arrives. Decisions never depend on the order
in which concurrent work finishes (seeds and model slots come from positions, results are
gathered in position order), so the same seed and the same replies give the same run, and a
resumed run replays the cached replies and evaluations to the exact point it was killed.
"""

from __future__ import annotations

import asyncio
import time
from typing import AsyncIterator

from autocomp import sandbox
from autocomp.backends.base import Backend
from autocomp.beam import improves, primary_value, rank_key, select_beam
from autocomp.config import SearchConfig
from autocomp.evaluator import Evaluator
from autocomp.events import (
    BaselineEvaluated,
    BeamEntry,
    BeamUpdated,
    CandidateEvaluated,
    Event,
    IterationFinished,
    Notice,
    PlansProposed,
    RunFailed,
    RunFinished,
    RunStarted,
)
from autocomp.extract import extract_code, plan_text
from autocomp.llm.base import BudgetExhausted, LLMCallError, LLMReply
from autocomp.llm.pool import LLMPool
from autocomp.menu import rng_for, sample_menu
from autocomp.model import Candidate, Evaluation, Problem, Usage, Verdict, speedup
from autocomp.prompting import implement_request, outcome, plan_request, repair_request
from autocomp.prompts import pieces_for_problem
from autocomp.schedules import ReuseChoice, signature_of
from autocomp.store import Store, StoreError

_DONE = object()
TUNED_SUFFIX = ".t"  # a tuned variant's id: the id of the candidate it was tuned from + ".t"
TUNER_MODEL = "autotuner (Optuna TPE, no LLM)"
TUNE_BATCH = 4  # configurations evaluated at once while tuning: fixed, so every machine tries the same ones

SANDBOX_OFF_NOTICE = (
    "sandbox is off (AUTOCOMP_SANDBOX=off or autocomp.sandbox = \"off\"): candidates run without isolation, "
    "with access to your files and network; only their environment is cleared"
)


class BeamSearch:
    def __init__(
        self,
        problem: Problem,
        backend: Backend,
        pool: LLMPool,
        config: SearchConfig,
        store: Store | None,
        run_id: str | None = None,
        seed_plans: list[str] | None = None,
        resumed: bool = False,
        evaluator: Evaluator | None = None,
        reuse: ReuseChoice | None = None,
    ) -> None:
        self.problem = problem
        self.backend = backend
        self.pool = pool
        self.config = config.validate()
        self.store = store
        self.resumed = resumed
        self.run_id = run_id or (store.new_run_id(problem.name) if store else f"run-{int(time.time())}")
        self.seed_plans = list(seed_plans or [])
        self.reuse = reuse
        self.reuse_result: dict[str, object] | None = None
        self.evaluator = evaluator or Evaluator(backend, store)
        self.pieces = pieces_for_problem(backend.prompt_pieces(), problem.path, backend.prompt_context(problem))
        self.metric = backend.primary_metric
        self.lower_is_better = backend.lower_is_better
        self.candidates: dict[str, Candidate] = {}
        self.baseline: Candidate | None = None
        self.best: Candidate | None = None
        self.evaluated_total = 0
        self.tuned_evaluations = 0  # configurations tried while tuning new bests (tune_evals)
        self.finish_reason: str | None = None
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._seq = 0
        self._stopping = False
        self._work: asyncio.Task[list[Candidate]] | None = None
        self._notices_seen = 0
        self._fatal: BaseException | None = None
        self._events_gen = 0  # which log of the run this one writes (store.append_event)
        self._protected = False  # resuming a finished run: its record is kept until this one succeeds
        self._pending_notices: list[str] = []
        self.pool.track(store, self.run_id)

    # -- public ----------------------------------------------------------------------
    async def run(self) -> AsyncIterator[Event]:
        """Yield events until the run finishes, fails or is stopped. Cancelling the
        consumer cancels all work (and so kills evaluator processes)."""
        driver = asyncio.create_task(self._drive())
        try:
            while True:
                item = await self._queue.get()
                if item is _DONE:
                    break
                yield item  # type: ignore[misc]
            if self._fatal is not None:  # the store failed: the caller reports it (one line)
                raise self._fatal
        finally:
            if not driver.done():
                driver.cancel()
                try:
                    await driver
                except (asyncio.CancelledError, Exception):
                    pass

    def stop(self) -> None:
        """End the run cleanly with the best so far (reason ``cancelled``)."""
        self._stopping = True
        if self._work is not None and not self._work.done():
            self._work.cancel()

    # -- driving ---------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        if self.store is not None:
            self.store.append_event(self.run_id, self._seq, event.to_json(), gen=self._events_gen)
        self._seq += 1
        self._queue.put_nowait(event)

    def _flush_notices(self) -> None:
        while self._notices_seen < len(self.pool.notices):
            self._emit(Notice(self.run_id, "warning", self.pool.notices[self._notices_seen]))
            self._notices_seen += 1

    def _save_meta(self, status: str, **extra: object) -> None:
        if self.store is None:
            return
        if self._protected and (status != "finished" or extra.get("reason") == "cancelled"):
            return  # resuming a finished run: its record stays as it was until this run succeeds
        meta = self.store.run_meta(self.run_id) or {}
        meta.update(
            {
                "run_id": self.run_id,
                "problem": self.problem.to_json(),
                "config": self.config.to_json(),
                "models": self.pool.specs,
                "target": self.problem.target,
                "kernel": self.problem.name,
                "path": self.problem.path,
                "status": status,
                "updated": time.strftime("%Y-%m-%d %H:%M:%S"),
                "seed_plans": self.seed_plans,
                "reuse": self.reuse.to_json() if self.reuse else None,
            }
        )
        meta.setdefault("created", meta["updated"])
        meta.update(extra)
        if self._protected and status == "finished":
            old_gen = self.store.events_gen(self.run_id)
            meta["events_gen"] = self._events_gen
            self.store.save_run_meta(self.run_id, meta)
            self._protected = False
            if old_gen != self._events_gen:
                self.store.clear_events(self.run_id, old_gen)
            return
        if self.resumed:
            meta["events_gen"] = self._events_gen
        self.store.save_run_meta(self.run_id, meta)

    async def _drive(self) -> None:
        try:
            await self._search()
        except asyncio.CancelledError:
            raise
        except StoreError as exc:  # the store itself failed: nothing more can be recorded
            self._fatal = exc
        except Exception as exc:  # report, never crash the host (server or CLI)
            self._save_meta("failed", error=f"{type(exc).__name__}: {exc}")
            self._emit(RunFailed(self.run_id, f"{type(exc).__name__}: {exc}", self.best))
        finally:
            self._queue.put_nowait(_DONE)

    async def _search(self) -> None:
        tier = self.backend.tier()
        self.pool.budget.calls = self.config.budget_calls
        self.pool.budget.tokens = self.config.budget_tokens
        self.pool.budget.seconds = self.config.budget_seconds
        if self.resumed and self.store is not None:
            self._begin_resume()
        self._save_meta("running")
        self._emit(
            RunStarted(
                self.run_id,
                path=self.problem.path,
                kernel=self.problem.name,
                target=self.problem.target,
                config=self.config.to_json(),
                models=self.pool.specs,
                tier=tier.name,
                confirms=tier.confirms,
                replay=self.pool.all_replay,
                primary_metric=self.metric,
                resumed=self.resumed,
                reuse=self.reuse.to_json() if self.reuse else None,
            )
        )
        for message in self._pending_notices:
            self._emit(Notice(self.run_id, "info", message))
        if sandbox.label() == "off":
            self._emit(Notice(self.run_id, "warning", SANDBOX_OFF_NOTICE))
        executor = self.evaluator.executor
        if executor.name != "local":
            self._emit(Notice(self.run_id, "info", f"evaluations run on {executor.describe()}"))
        baseline = Candidate(id="start", code=self.problem.code)
        baseline.evaluation = await self.evaluator.evaluate_one(self.problem, baseline.code)
        self.candidates[baseline.id] = baseline
        self.baseline = self.best = baseline
        self._emit(BaselineEvaluated(self.run_id, baseline))
        if baseline.verdict is not Verdict.CORRECT or primary_value(baseline, self.metric) is None:
            message = (
                f"the starting kernel could not be measured ({baseline.verdict.value} on {tier.name}); "
                "Autocomp needs a correct, measured starting point. "
                + (baseline.feedback.strip()[:1500] or tier.note)
            )
            self._save_meta("failed", error=message)
            self._emit(RunFailed(self.run_id, message, baseline))
            return

        beam = [baseline]
        stale = 0
        reason = "completed"
        if self.reuse is not None:
            self._work = asyncio.create_task(self._reuse_phase(baseline))
            try:
                children = await self._work
            except asyncio.CancelledError:
                if not self._stopping:
                    raise
                children = []
            finally:
                self._flush_notices()
            beam = select_beam(beam, children, dict(self.candidates), self.config.beam, self.metric, self.lower_is_better, self.config.min_improvement)
            if beam[0].id != self.best.id and improves(beam[0], self.best, self.metric, self.lower_is_better):
                beam = await self._tune_new_best(0, beam)
            self._emit(BeamUpdated(self.run_id, 0, [self._entry(c) for c in beam]))
            if beam[0].id != self.best.id and improves(beam[0], self.best, self.metric, self.lower_is_better):
                self.best = beam[0]
            self._save_meta("running", best=self.best.id, speedup=self._speedup(self.best), iteration=0)
            if self._stopping:
                self._finish("cancelled")
                return
            if self.finish_reason:
                self._finish(self.finish_reason)
                return
        for iteration in range(1, self.config.iterations + 1):
            if self._stopping:  # stop() came before this iteration's work existed
                reason = "cancelled"
                break
            self._work = asyncio.create_task(self._iteration(iteration, beam))
            try:
                children = await self._work
            except asyncio.CancelledError:
                if not self._stopping:
                    raise
                reason = "cancelled"
                break
            finally:
                self._flush_notices()
            parents = {c.id: c for c in beam}
            beam = select_beam(beam, children, parents, self.config.beam, self.metric, self.lower_is_better, self.config.min_improvement)
            if beam[0].id != self.best.id and improves(beam[0], self.best, self.metric, self.lower_is_better):
                beam = await self._tune_new_best(iteration, beam)
            self._emit(BeamUpdated(self.run_id, iteration, [self._entry(c) for c in beam]))
            new_best = beam[0]
            improved = new_best.id != self.best.id and improves(new_best, self.best, self.metric, self.lower_is_better)
            if improved:
                self.best = new_best
            stale = 0 if improved else stale + 1
            self._emit(
                IterationFinished(
                    self.run_id,
                    iteration=iteration,
                    iterations=self.config.iterations,
                    evaluated_total=self.evaluated_total,
                    best_id=self.best.id,
                    best_speedup=self._speedup(self.best),
                    improved=improved,
                )
            )
            self._save_meta("running", best=self.best.id, speedup=self._speedup(self.best), iteration=iteration)
            if self.finish_reason:
                reason = self.finish_reason
                break
            if self._stopping:
                reason = "cancelled"
                break
            if self.config.early_stop and stale >= self.config.early_stop and iteration < self.config.iterations:
                reason = "early-stop"
                break
        self._finish(reason)

    def _begin_resume(self) -> None:
        """A resumed run writes its (replayed) events as a new log. Resuming a finished run
        leaves that run's record and log untouched until the resume itself finishes (a
        failed, killed or stopped resume changes nothing). LLM requests that were in flight
        when the run stopped are sent again; the count is reported."""
        assert self.store is not None
        previous = self.store.run_meta(self.run_id) or {}
        self._protected = previous.get("status") == "finished"
        self._events_gen = self.store.events_gen(self.run_id) + 1
        self.store.clear_events(self.run_id, self._events_gen)  # leftovers of an earlier failed resume
        leftover = self.store.inflight(self.run_id)
        self.pool.resend = set(leftover)
        if leftover:
            self._pending_notices.append(
                f"resuming: {len(leftover)} LLM request(s) were in flight when the run stopped; they are sent again"
            )

    def _finish(self, reason: str) -> None:
        assert self.best is not None and self.baseline is not None
        # The answer is the best correct candidate seen, including those of an iteration
        # that was stopped halfway (their evaluations are complete and verified).
        ranked = self.ranked()
        if ranked and improves(ranked[0], self.best, self.metric, self.lower_is_better):
            self.best = ranked[0]
        usage = {spec: Usage(**u.to_json()) for spec, u in self.pool.usage.items()}
        best_speedup = self._speedup(self.best)
        schedule = self.schedule()
        keep_record = self._protected and reason == "cancelled"  # a stopped resume of a finished run changes nothing
        if self.store is not None and not keep_record:
            self.store.save_schedule(self.run_id, schedule)
        if self.resumed and self.pool.resend is not None:
            self._emit(Notice(self.run_id, "info", f"resume: re-sent {self.pool.resent} LLM request(s) that were in flight when the run stopped"))
        self._save_meta(
            "finished",
            reason=reason,
            best=self.best.id,
            speedup=best_speedup,
            usage={k: v.to_json() for k, v in usage.items()},
            schedule={"plans": len(schedule["plans"]), "signature": schedule["signature"]},
            reuse=self.reuse_result,
            tuned_evaluations=self.tuned_evaluations,
        )
        self._emit(
            RunFinished(
                self.run_id,
                reason=reason,
                best=self.best,
                baseline=self.baseline,
                speedup=best_speedup,
                primary_metric=self.metric,
                confirmed=self.best.evaluation.confirmed,
                usage=usage,
                evaluated_total=self.evaluated_total,
                replay=self.pool.all_replay,
                reuse=self.reuse_result,
            )
        )

    def schedule(self) -> dict[str, object]:
        """This run's schedule: the plans on the best path, start first (none when nothing
        beat the starting code), with the kernel's signature and the speedup they reached."""
        assert self.best is not None
        path = self._path_to(self.best)[1:]
        return {
            "run_id": self.run_id,
            "target": self.problem.target,
            "kernel": self.problem.name,
            "signature": signature_of(self.problem).to_json(),
            "plans": [c.plan for c in path if c.plan and not c.id.endswith(TUNED_SUFFIX)],  # tuning is redone, not re-planned
            "path": [c.id for c in path],
            "speedup": self._speedup(self.best),
            "metric": self.metric,
        }

    # -- tuning a new best's constants ----------------------------------------------------
    async def _tune_new_best(self, iteration: int, beam: list[Candidate]) -> list[Candidate]:
        """The beam, with ``beam[0]`` (the new best)'s tuned variant in it when tuning found
        a faster one. Runs as the run's current work, so stop() cancels it."""
        if self.config.tune_evals <= 0 or self._tuning_should_stop():
            return beam
        best = beam[0]
        if best.id.endswith(TUNED_SUFFIX) or best.id + TUNED_SUFFIX in self.candidates:
            return beam
        self._work = asyncio.create_task(self._tune(iteration, best))
        try:
            tuned = await self._work
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            return beam
        if tuned is None:
            return beam
        parents = {c.id: c for c in beam}
        return select_beam(beam, [tuned], parents, self.config.beam, self.metric, self.lower_is_better, self.config.min_improvement)

    async def _tune(self, iteration: int, parent: Candidate) -> Candidate | None:
        """Tune ``parent``'s constants (at most ``tune_evals`` evaluations); the best
        configuration as a candidate when it is correct and faster, else None."""
        import zlib

        from autocomp.model import KernelSpan
        from autocomp.tuning.engine import TuneError, find_space
        from autocomp.tuning.engine import tune as run_tuning

        lines = parent.code.splitlines(keepends=True)
        span = self.problem.span
        local = Problem(
            self.problem.path,
            KernelSpan(span.name, span.target, span.start_line, span.start_line + len(lines)),
            self.problem.file_with(parent.code),
            dict(self.problem.options),
        )
        try:
            space = await find_space(self.backend, local)
            if not space.valid_configs():
                return None
        except TuneError:
            return None  # no tunables: nothing to tune, nothing to say
        except Exception as exc:  # noqa: BLE001 - a target's detection must never stop a search
            self._emit(Notice(self.run_id, "info", f"tuning {parent.id}: tunables not found ({type(exc).__name__}: {exc})"))
            return None
        seed = zlib.crc32(f"{self.config.seed}:{parent.id}".encode()) & 0x7FFFFFFF
        try:
            result = await run_tuning(
                local, self.backend, None, budget=self.config.tune_evals, strategy="tpe", seed=seed,
                space=space, evaluator=self.evaluator, oracle=self.problem, baseline=parent.evaluation,
                should_stop=self._tuning_should_stop, save=False, batch=TUNE_BATCH,
                run_id=f"{self.run_id}:{parent.id}",
            )
        except TuneError as exc:
            self._emit(Notice(self.run_id, "info", f"tuning {parent.id}: {exc}"))
            return None
        self.tuned_evaluations += len(result.trials)
        best = result.best
        tried = f"{len(result.trials)} configuration(s) of {', '.join(space.names)}"
        if best is None or best.config == space.baseline() or best.code == parent.code:
            self._emit(Notice(self.run_id, "info", f"tuned {parent.id}: {tried}; none beat its constants"))
            return None
        settings = ", ".join(f"{k}={v}" for k, v in best.config.items() if space.baseline().get(k) != v)
        tuned = Candidate(
            id=parent.id + TUNED_SUFFIX,
            code=best.code,
            plan=f"tuned from {parent.id}: {settings} (autotuned constants, {tried}, no LLM)",
            parent=parent.id,
            iteration=iteration,
            models=[TUNER_MODEL],
            evaluation=best.evaluation,
        )
        if not improves(tuned, parent, self.metric, self.lower_is_better, self.config.min_improvement):
            self._emit(Notice(self.run_id, "info", f"tuned {parent.id}: {tried}; none beat its constants"))
            return None
        self._record(iteration, tuned)
        self._emit(
            Notice(
                self.run_id,
                "info",
                f"tuned {parent.id}: {tried}; {settings} is faster ({self._speedup(tuned):.2f}x overall), "
                f"in the beam as {tuned.id}",
            )
        )
        return tuned

    # -- the reuse phase ---------------------------------------------------------------
    async def _reuse_phase(self, baseline: Candidate) -> list[Candidate]:
        """Re-implement each plan of the reused schedule on this kernel, in order (see the
        module docstring). Sequential by nature: step s is implemented on step s-1's best."""
        assert self.reuse is not None
        plans = list(self.reuse.plans)
        self.reuse_result = {"source": self.reuse.source, "plans": plans, "reused": 0, "kept": 0, "reason": self.reuse.reason}
        parent, found, kept = baseline, [], 0
        label = [f"(plan reused from run {self.reuse.source})"]
        for step, plan in enumerate(plans):
            if self.finish_reason or self._stopping:
                break
            self._emit(PlansProposed(self.run_id, 0, parent.id, [plan], label))
            pairs = await asyncio.gather(
                *(self._implement(0, 0, parent, step, k, plan, label, Usage()) for k in range(self.config.implementations))
            )
            children = [c for pair in pairs for c in pair]
            found += children
            if not children and self.finish_reason:
                break
            self.reuse_result["reused"] = step + 1
            better = [c for c in children if improves(c, parent, self.metric, self.lower_is_better, self.config.min_improvement)]
            if better:
                parent = min(better, key=lambda c: rank_key(c, self.metric, self.lower_is_better))
                kept += 1
                self.reuse_result["kept"] = kept
        self._emit(
            Notice(
                self.run_id,
                "info",
                f"schedule reuse: {self.reuse_result['reused']} of {len(plans)} plan(s) from run {self.reuse.source} "
                f"re-implemented, {kept} kept (beat their parent)"
                + (f"; best so far {self._speedup(parent):.2f}x" if parent is not baseline and self._speedup(parent) else ""),
            )
        )
        return found

    # -- one iteration ---------------------------------------------------------------
    async def _iteration(self, iteration: int, beam: list[Candidate]) -> list[Candidate]:
        branches = [
            self._plan_branch(iteration, b, parent, j)
            for b, parent in enumerate(beam)
            for j in range(self.config.plans)
        ]
        results = await asyncio.gather(*branches)
        return [child for branch in results for child in branch]

    async def _ask(self, request, slot: int, sample: int) -> LLMReply | str:
        """A reply, or the error text when the call failed for good."""
        try:
            return await self.pool.ask(request, slot, sample)
        except BudgetExhausted as exc:
            self.finish_reason = self.finish_reason or exc.which
            return f"not asked: {exc}"
        except LLMCallError as exc:
            self.pool.notices.append(str(exc))
            return str(exc)
        finally:
            self._flush_notices()

    async def _plan_branch(self, iteration: int, b: int, parent: Candidate, j: int) -> list[Candidate]:
        if self.finish_reason:
            return []
        slot = b * self.config.plans + j
        seeded = iteration == 1 and b == 0 and j < len(self.seed_plans)
        if seeded:
            plan, plan_models, plan_usage = self.seed_plans[j], ["(plan reused from an earlier run)"], Usage()
        else:
            menu = sample_menu(self.pieces.menu, self.config.keep, rng_for(self.config.seed, iteration, parent.id, j))
            explore = rng_for(self.config.seed, "explore", iteration, parent.id, j).random() < self.config.explore_rate
            request = plan_request(
                self.pieces,
                self.problem.name,
                parent,
                self._path_to(parent),
                menu,
                iteration,
                self.config.iterations,
                self.metric,
                self.backend.tier().name,
                tried=self._tried_on(parent, iteration),
                explore=explore,
                headroom=self._headroom(parent),
                tuning=self._tuning_note(),
            )
            reply = await self._ask(request, slot, sample=j)
            if isinstance(reply, str):
                return []
            plan, plan_models, plan_usage = plan_text(reply.text), [reply.model], reply.usage
            if not plan:
                self.pool.notices.append(f"{reply.model}: empty plan reply (iteration {iteration}); skipped")
                return []
        self._emit(PlansProposed(self.run_id, iteration, parent.id, [plan], plan_models))
        implementations = [
            self._implement(iteration, b, parent, j, k, plan, plan_models, plan_usage if k == 0 else Usage())
            for k in range(self.config.implementations)
        ]
        results = await asyncio.gather(*implementations)
        return [c for pair in results for c in pair]

    async def _implement(
        self,
        iteration: int,
        b: int,
        parent: Candidate,
        j: int,
        k: int,
        plan: str,
        plan_models: list[str],
        plan_usage: Usage,
    ) -> list[Candidate]:
        if self.finish_reason:
            return []
        slot = (b * self.config.plans + j) * self.config.implementations + k
        candidate_id = f"i{iteration}.b{b}.p{j}.k{k}"
        request = implement_request(self.pieces, self.problem.name, parent, plan)
        reply = await self._ask(request, slot, sample=k)
        candidate = Candidate(id=candidate_id, code="", plan=plan, parent=parent.id, iteration=iteration)
        candidate.usage.add(plan_usage)
        candidate.models = list(plan_models)
        if isinstance(reply, str):
            if self.finish_reason and reply.startswith("not asked"):
                return []
            candidate.evaluation = Evaluation(Verdict.LLM_ERROR, feedback=reply)
            self._record(iteration, candidate)
            return [candidate]
        candidate.models.append(reply.model)
        candidate.usage.add(reply.usage)
        candidate.llm_seconds = reply.seconds
        found = [candidate]
        await self._fill_and_evaluate(iteration, candidate, reply)
        if self.config.repair and candidate.verdict.repairable and not self.finish_reason:
            repaired = await self._repair(iteration, slot, candidate)
            if repaired is not None:
                found.append(repaired)
        return found

    async def _fill_and_evaluate(self, iteration: int, candidate: Candidate, reply: LLMReply) -> None:
        extraction = extract_code(reply.text, self.pieces.language, self.problem.name)
        if extraction.code is None:
            candidate.evaluation = Evaluation(Verdict.NO_CODE, feedback=extraction.problem)
        else:
            candidate.code = extraction.code
            candidate.evaluation = await self.evaluator.evaluate_one(self.problem, candidate.code)
        self._record(iteration, candidate)

    async def _repair(self, iteration: int, slot: int, failed: Candidate) -> Candidate | None:
        request = repair_request(self.pieces, self.problem.name, failed, self.candidates.get(failed.parent or ""))
        reply = await self._ask(request, slot, sample=0)
        if isinstance(reply, str):
            return None
        repaired = Candidate(
            id=failed.id + ".r",
            code="",
            plan=failed.plan,
            parent=failed.parent,
            iteration=iteration,
            models=failed.models + [reply.model],
            repaired_from=failed.id,
            usage=Usage(**reply.usage.to_json()),
            llm_seconds=reply.seconds,
        )
        await self._fill_and_evaluate(iteration, repaired, reply)
        return repaired

    # -- prompt material -------------------------------------------------------------
    def _tried_on(self, parent: Candidate, iteration: int) -> list[tuple[Candidate, str]]:
        """Children of ``parent`` from earlier iterations (and the reuse phase), with their
        outcome, in id order: what the plan prompt lists as already tried. Only finished
        iterations count, so the list never depends on the order concurrent work ends in."""
        children = sorted(
            (c for c in self.candidates.values() if c.parent == parent.id and c.iteration < iteration and c.plan),
            key=lambda c: (c.iteration, c.id),
        )
        return [(c, outcome(c, parent, self.metric, self.lower_is_better)) for c in children]

    def _tuning_should_stop(self) -> bool:
        """Before and between tuning batches: stop() was called, or the run's wall-time
        budget is spent (tuning asks no LLM, so only the time cap applies to it)."""
        if self._stopping or self.finish_reason == "budget-time":
            return True  # (a spent call or token budget leaves tuning, which asks no LLM, alone)
        budget = self.pool.budget
        if budget.seconds is not None and time.monotonic() - budget.started >= budget.seconds:
            self.finish_reason = self.finish_reason or "budget-time"
            return True
        return False

    def _tuning_note(self) -> str:
        """What the plan prompt says about automatic tuning: the target's
        ``prompts/<target>/tuning.md`` when tuning is on, nothing when it is off (so the
        prompts, and recorded sessions, are those of a run without tuning)."""
        if self.config.tune_evals <= 0:
            return ""
        from autocomp.prompts import read_text

        try:
            text = read_text(f"{self.problem.target}/tuning.md", required=False) or read_text("common/tuning.md", required=False)
        except Exception:  # noqa: BLE001 - a missing note must never stop a search
            return ""
        return text.replace("$tune_evals", str(self.config.tune_evals)).strip()

    def _headroom(self, candidate: Candidate) -> str:
        try:
            return self.backend.headroom(self.problem, candidate.evaluation)
        except Exception:  # noqa: BLE001 - a missing hint must never stop a search
            return ""

    # -- bookkeeping -----------------------------------------------------------------
    def _record(self, iteration: int, candidate: Candidate) -> None:
        self.candidates[candidate.id] = candidate
        self.evaluated_total += 1
        parent = self.candidates.get(candidate.parent or "")
        improving = parent is not None and improves(candidate, parent, self.metric, self.lower_is_better, self.config.min_improvement)
        self._emit(CandidateEvaluated(self.run_id, iteration, candidate, self._speedup(candidate), improving, self.evaluated_total))

    def _speedup(self, candidate: Candidate) -> float | None:
        if self.baseline is None or candidate.verdict is not Verdict.CORRECT:
            return None
        return speedup(self.baseline.metrics.get(self.metric), candidate.metrics.get(self.metric), self.lower_is_better)

    def _entry(self, candidate: Candidate) -> BeamEntry:
        return BeamEntry(candidate.id, candidate.plan_summary(), candidate.metrics.get(self.metric), self._speedup(candidate), candidate.iteration)

    def _path_to(self, candidate: Candidate) -> list[Candidate]:
        path = []
        node: Candidate | None = candidate
        while node is not None:
            path.append(node)
            node = self.candidates.get(node.parent or "")
        return list(reversed(path))

    def ranked(self) -> list[Candidate]:
        """Correct, measured candidates, best first (for reports and the editor)."""
        measured = [c for c in self.candidates.values() if c.verdict is Verdict.CORRECT and primary_value(c, self.metric) is not None]
        return sorted(measured, key=lambda c: rank_key(c, self.metric, self.lower_is_better))
