"""LLM-free autotuning of a kernel's constants (``autocomp tune``).

The target finds the tunables (:meth:`Backend.tunables`); an Optuna sampler (TPE by default,
grid or random; seeded) proposes configurations; configurations a rule rules out are pruned
without an evaluation; every other one becomes candidate code (:meth:`Space.code_for`) and
goes through the same :class:`~autocomp.evaluator.Evaluator` as the beam search: the same
sandbox, the same evaluation cache in the same store. A stopped tune therefore resumes for
free: run it again with the same seed and the sampler asks the same configurations, which
the cache answers without evaluating anything.

Each tuning numbers its trials, and the whole result is kept in the store under
``tune:<run id>`` (indexed under ``tunes:index``; ``autocomp runs`` lists them). The beam
search tunes each new best with the same function (``--tune-evals``; see
:mod:`autocomp.search`), against the run's own problem and evaluator, keeping no record.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from autocomp.errors import UserError
from autocomp.model import Evaluation, Metric, Problem, Verdict, speedup
from autocomp.tuning.space import Space

STRATEGIES = ("tpe", "grid", "random")
DEFAULT_BUDGET = 30


class TuneError(UserError):
    """Nothing to tune, or the tuning cannot start; the message says why and what to do."""


@dataclass
class Trial:
    """One configuration that was evaluated (pruned ones are only counted)."""

    number: int
    config: dict[str, int]
    evaluation: Evaluation
    code: str
    speedup: float | None
    cached: bool

    @property
    def verdict(self) -> Verdict:
        return self.evaluation.verdict

    def metric(self, name: str) -> Metric | None:
        return self.evaluation.metrics.get(name)

    def to_json(self, primary: str) -> dict[str, Any]:
        m = self.metric(primary)
        return {"trial": self.number, "config": dict(self.config), "verdict": self.verdict.value,
                "metric": m.to_json() if m else None, "speedup": self.speedup, "cached": self.cached,
                "confirmed": self.evaluation.confirmed, "feedback": self.evaluation.feedback[:400] if not self.verdict.correct else ""}


@dataclass
class TuneResult:
    run_id: str
    problem: Problem
    space: Space
    strategy: str
    seed: int
    budget: int
    baseline: Evaluation
    trials: list[Trial] = field(default_factory=list)
    best: Trial | None = None
    primary_metric: str = ""
    pruned: int = 0
    evaluated: int = 0  # real evaluations (cache misses)
    cache_hits: int = 0
    seconds: float = 0.0
    history: list[float | None] = field(default_factory=list)  # best speedup after each trial

    @property
    def speedup(self) -> float | None:
        return self.best.speedup if self.best else None

    @property
    def improved(self) -> bool:
        return self.best is not None and self.best.config != self.space.baseline() and (self.speedup or 0) > 1.0

    @property
    def confirmed(self) -> bool:
        return bool(self.best is not None and self.best.evaluation.confirmed and self.baseline.confirmed)

    def to_json(self) -> dict[str, Any]:
        p = self.primary_metric
        base_metric = self.baseline.metrics.get(p)
        best = self.best
        return {
            "type": "tune_finished",
            "run_id": self.run_id,
            "path": self.problem.path,
            "kernel": self.problem.name,
            "target": self.problem.target,
            "strategy": self.strategy,
            "seed": self.seed,
            "budget_evals": self.budget,
            "space": self.space.to_json(),
            "baseline": {"config": self.space.baseline(), "verdict": self.baseline.verdict.value,
                         "metrics": {k: m.to_json() for k, m in self.baseline.metrics.items()},
                         "metric": base_metric.to_json() if base_metric else None},
            "best": None if best is None else {
                "config": dict(best.config), "trial": best.number, "code": best.code, "verdict": best.verdict.value,
                "metrics": {k: m.to_json() for k, m in best.evaluation.metrics.items()},
                "metric": best.metric(p).to_json() if best.metric(p) else None, "tier": best.evaluation.tier,
                "sandbox": best.evaluation.sandbox,
            },
            "speedup": self.speedup,
            "improved": self.improved,
            "primary_metric": p,
            "confirmed": self.confirmed,
            "tier": self.baseline.tier,
            "configs": [t.to_json(p) for t in self.trials],
            "evaluated_total": len(self.trials),
            "evaluations_run": self.evaluated,
            "cache_hits": self.cache_hits,
            "pruned": self.pruned,
            "valid_configs": len(self.space.valid_configs()),
            "replay": False,
            "usage": {},
            "seconds": round(self.seconds, 3),
        }


async def find_space(backend: Any, problem: Problem) -> Space:
    """The problem's tunables, or TuneError with how to declare some."""
    space = await backend.tunables(problem) if _is_async(backend.tunables) else backend.tunables(problem)
    if space is None or not space.tunables:
        notes = "; ".join(space.notes) if space is not None and space.notes else ""
        raise TuneError(
            f"{problem.path}: no tunable constants found in `{problem.name}` ({problem.target}). Tunables are integer "
            "#defines / const integers the kernel uses (Python: module-level or default integer constants), not part "
            "of the problem's shapes; name one with a comment such as `// autocomp: tune TI in 4, 8, 16, 32` or "
            "`# autocomp: tune TILE_N in 128..512 step 128`" + (f" ({notes})" if notes else "")
        )
    if space.notes:
        bad = [n for n in space.notes if n.startswith("line ")]
        if bad:
            raise TuneError(f"{problem.path}: cannot read the `autocomp: tune` comment(s): " + "; ".join(bad))
    return space


def _is_async(fn: Any) -> bool:
    import inspect

    return inspect.iscoroutinefunction(fn)


def _make_sampler(strategy: str, seed: int, space: Space):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if strategy == "tpe":
        startup = max(4, min(10, space.size() // 10))
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True)
    if strategy == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if strategy == "grid":
        class AskTellGrid(optuna.samplers.GridSampler):
            """GridSampler stops the study when the grid is done, which only works inside
            study.optimize; with ask/tell the loop ends on its own (is_exhausted)."""

            def after_trial(self, study, trial, state, values) -> None:  # noqa: ANN001
                return None

        return AskTellGrid({t.name: list(range(len(t.values))) for t in space.tunables}, seed=seed)
    raise TuneError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")


async def tune(
    problem: Problem,
    backend: Any,
    store: Any,
    *,
    budget: int | None = None,
    strategy: str = "tpe",
    seed: int = 0,
    executor: Any = None,
    space: Space | None = None,
    evaluator: Any = None,
    on_trial: Callable[[Trial, TuneResult], None] | None = None,
    run_id: str | None = None,
    oracle: Problem | None = None,
    baseline: Evaluation | None = None,
    should_stop: Callable[[], bool] | None = None,
    save: bool = True,
    batch: int | None = None,
) -> TuneResult:
    """Tune ``problem``'s constants with at most ``budget`` evaluated configurations (default:
    30; grid: every valid configuration). The baseline (the constants as written) is
    evaluated first and is the speedup reference; it counts as a trial when the sampler
    proposes it.

    Inside the beam search (:mod:`autocomp.search`), ``problem`` is a candidate's code in
    the file, ``oracle`` the run's own problem that every configuration is evaluated
    against (so the evaluation cache is the search's), ``baseline`` the candidate's known
    evaluation (not evaluated again), ``should_stop`` ends the tuning between batches, and
    ``save=False`` keeps it out of the store's tune records. ``batch``: configurations asked
    before their results are told (default: the executor's concurrency; a fixed number makes
    the configurations tried the same on every machine)."""
    try:
        import optuna
        from optuna.distributions import IntDistribution
        from optuna.trial import TrialState
    except ImportError:
        raise TuneError("autocomp tune needs Optuna: pip install 'autocomp[tune]' (or run .ci/install-tune.sh)") from None
    from autocomp.evaluator import Evaluator

    if strategy not in STRATEGIES:
        raise TuneError(f"--strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    started = time.monotonic()
    space = space or await find_space(backend, problem)
    if evaluator is None:
        evaluator = Evaluator(backend, store, executor=executor) if executor is not None else Evaluator(backend, store)
    valid = space.valid_configs()
    if not valid:
        raise TuneError(f"{problem.path}: every configuration of {', '.join(space.names)} breaks a rule: "
                        + "; ".join(c.description for c in space.constraints))
    if budget is None:
        budget = len(valid) if strategy == "grid" else min(DEFAULT_BUDGET, len(valid))
    if budget < 1:
        raise TuneError("--budget-evals must be at least 1")
    budget = min(budget, len(valid))
    if store is not None and run_id is None:
        run_id = store.new_run_id(problem.name)
    run_id = run_id or "tune"
    primary = backend.primary_metric
    lower = backend.lower_is_better
    target = oracle or problem
    if baseline is None:
        baseline = await evaluator.evaluate_one(target, problem.code)
    if baseline.verdict not in (Verdict.CORRECT, Verdict.UNVERIFIED):
        raise TuneError(f"{problem.path}: the kernel as written does not evaluate ({baseline.verdict.value}): "
                        f"{baseline.feedback[:600]}")
    result = TuneResult(run_id, problem, space, strategy, seed, budget, baseline, primary_metric=primary)
    base_metric = baseline.metrics.get(primary)

    sampler = _make_sampler(strategy, seed, space)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    dists = {t.name: IntDistribution(0, len(t.values) - 1) for t in space.tunables}
    seen: dict[tuple, float] = {}
    batch = max(1, int(batch or getattr(evaluator.executor, "concurrency", 1) or 1))
    attempts = 0
    max_attempts = max(200, 50 * space.size()) if strategy != "grid" else space.size() + 1
    penalty_scale = 1e6

    def objective(ev: Evaluation) -> float:
        m = ev.metrics.get(primary)
        if ev.verdict is not Verdict.CORRECT and not (ev.verdict is Verdict.UNVERIFIED and m is not None):
            return penalty_scale
        if m is None or m.value <= 0:
            return penalty_scale
        return math.log(m.value) if lower else -math.log(m.value)

    best_value = math.inf
    while len(result.trials) < budget and attempts < max_attempts and len(seen) < len(valid):
        if should_stop is not None and should_stop():
            break
        # Ask a batch of distinct, valid, new configurations; the rest are told at once.
        asked: list[tuple[Any, dict[str, int]]] = []
        while len(asked) < min(batch, budget - len(result.trials)) and attempts < max_attempts:
            attempts += 1
            trial = study.ask(dists)
            config = {t.name: t.values[trial.params[t.name]] for t in space.tunables}
            key = tuple(config[n] for n in space.names)
            if key in seen:
                study.tell(trial, seen[key])
                continue
            if any(key == tuple(c[n] for n in space.names) for _t, c in asked):
                study.tell(trial, state=TrialState.PRUNED)
                continue
            if space.why_invalid(config) is not None:
                result.pruned += 1
                study.tell(trial, state=TrialState.PRUNED)
                continue
            asked.append((trial, config))
            if strategy == "grid" and getattr(sampler, "is_exhausted", None) and sampler.is_exhausted(study):
                break
        if not asked:
            break
        codes = [space.code_for(c) for _t, c in asked]
        before = evaluator.evaluated
        hits = [evaluator.cached(target, code) is not None for code in codes]
        evaluations = await asyncio.gather(*(evaluator.evaluate_one(target, code) for code in codes))
        result.evaluated += evaluator.evaluated - before
        for (trial, config), code, ev, hit in zip(asked, codes, evaluations, hits):
            value = objective(ev)
            key = tuple(config[n] for n in space.names)
            seen[key] = value
            study.tell(trial, value)
            ratio = None
            if ev.verdict is Verdict.CORRECT or (ev.verdict is Verdict.UNVERIFIED and ev.metrics.get(primary)):
                ratio = speedup(base_metric, ev.metrics.get(primary), lower)
            t = Trial(len(result.trials) + 1, config, ev, code, ratio, cached=hit)
            result.trials.append(t)
            if value < best_value and value < penalty_scale:
                best_value = value
                result.best = t
            result.history.append(result.best.speedup if result.best else None)
            if on_trial is not None:
                on_trial(t, result)
    result.cache_hits = sum(1 for t in result.trials if t.cached)
    result.seconds = time.monotonic() - started
    if store is not None and save:
        try:
            record = {k: v for k, v in result.to_json().items() if k != "best"} | {
                "best_config": result.best.config if result.best else None,
                "created": time.strftime("%Y-%m-%d %H:%M:%S"), "kind": "tune"}
            store.set(f"tune:{run_id}", record)
            _index_tune(store, run_id)
        except Exception:
            pass
    return result


TUNE_INDEX = "tunes:index"


def _index_tune(store: Any, run_id: str) -> None:
    """Add ``run_id`` to the store's list of tune records (``autocomp runs`` lists them)."""
    if run_id in (store.get(TUNE_INDEX, []) or []):
        return
    locked = getattr(store, "_locked", None)
    if locked is None:
        store.set(TUNE_INDEX, list(store.get(TUNE_INDEX, []) or []) + [run_id])
        return
    with locked():  # read-modify-write of a shared entry, as the run index is
        index = list(store.get(TUNE_INDEX, []) or [])
        if run_id not in index:
            index.append(run_id)
            store.set(TUNE_INDEX, index)


def tune_records(store: Any) -> list[dict[str, Any]]:
    """The store's tune records (``tune:<run id>``), oldest first."""
    out = []
    for run_id in store.get(TUNE_INDEX, []) or []:
        record = store.get(f"tune:{run_id}")
        if isinstance(record, dict):
            out.append(record)
    return out


def evaluations_to_reach(history: list[float | None], target: float | None, tol: float = 1e-9) -> int | None:
    """How many trials a run needed before its best speedup reached ``target``."""
    if target is None:
        return None
    for i, value in enumerate(history, 1):
        if value is not None and value >= target * (1 - tol):
            return i
    return None
