"""``autocomp optimize``: run the beam search on one kernel from the terminal."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from autocomp.backends import BackendError, get_backend
from autocomp.cli.common import EXIT_FAILED, EXIT_OK, CliError, load_problem, read_source, unified_diff
from autocomp.cli.render import JsonRenderer, ProgressRenderer
from autocomp.cli.rewrite import StaleKernel, rewrite_kernel
from autocomp.config import ConfigError, SearchConfig
from autocomp.events import RunFailed, RunFinished
from autocomp.evaluator import Evaluator
from autocomp.executor import EXECUTOR_HELP, ExecutorError, make_executor, validate_spec
from autocomp.llm import LLMConfigError, build_pool
from autocomp.model import Problem
from autocomp.prompts import PromptError
from autocomp.schedules import ReuseChoice, ReuseError, no_match_reason, resolve_reuse
from autocomp.search import BeamSearch
from autocomp.store import Store

SEARCH_FLAGS = ("iterations", "beam", "plans", "implementations", "keep", "seed", "budget_calls", "budget_tokens", "budget_seconds", "early_stop", "min_improvement")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("optimize", help="optimize one kernel with LLM beam search, verified on the target's evaluator")
    p.add_argument("file", nargs="?", help="source file holding the kernel (optional with --resume)")
    p.add_argument("--function", help="kernel name when the file has several")
    p.add_argument("--line", type=int, help="1-based line inside the kernel to optimize")
    p.add_argument("--target", default="auto", help="auto|gemmini|nki|cuda (default: detect)")
    p.add_argument("--llm", action="append", default=[], metavar="SPEC", help="openai:MODEL, anthropic:MODEL or replay:FILE; repeat for an ensemble")
    p.add_argument("--iterations", type=int)
    p.add_argument("--beam", type=int)
    p.add_argument("--plans", type=int)
    p.add_argument("--implementations", type=int)
    p.add_argument("--keep", type=float, help="probability each menu option is shown in a plan prompt")
    p.add_argument("--seed", type=int)
    p.add_argument("--min-improvement", dest="min_improvement", type=float)
    p.add_argument("--early-stop", dest="early_stop", type=int, help="stop after N iterations without a new best (0 = never)")
    p.add_argument("--no-repair", dest="repair", action="store_false", default=None, help="skip the repair attempt for build/run failures")
    p.add_argument("--budget-calls", dest="budget_calls", type=int)
    p.add_argument("--budget-tokens", dest="budget_tokens", type=int)
    p.add_argument("--budget-seconds", dest="budget_seconds", type=float)
    p.add_argument("--llm-timeout", dest="llm_timeout", type=float, help="seconds per LLM call, retries included")
    p.add_argument("--json", action="store_true", help="print events as JSON lines")
    p.add_argument("--write", action="store_true", help="rewrite FILE with the best kernel (only if the kernel is unchanged and the result is confirmed)")
    p.add_argument(
        "--accept-unconfirmed",
        dest="accept_unconfirmed",
        action="store_true",
        help="let --write use a result from a tier that cannot confirm it (an estimate or compile-only tier)",
    )
    p.add_argument("--record", metavar="FILE", help="record every prompt hash and reply to FILE (replay with --llm replay:FILE)")
    p.add_argument("--resume", metavar="RUN", help="continue a stopped run; nothing already paid for is asked or evaluated again")
    p.add_argument(
        "--executor",
        default=None,
        metavar="local|ray|ray://HOST:PORT",
        help=f"where evaluations run: {EXECUTOR_HELP}; default $AUTOCOMP_EXECUTOR or local",
    )
    p.add_argument(
        "--reuse",
        metavar="RUN|auto",
        help="start by adapting a finished run's schedule (its best path's plans) to this kernel; "
        "auto picks the most similar finished run of the same target and says which and why",
    )
    p.set_defaults(handler=run)


def default_llms(path: str) -> list[str]:
    """``AUTOCOMP_LLM`` (comma-separated specs), else the example's bundled session."""
    env = os.environ.get("AUTOCOMP_LLM", "").strip()
    if env:
        return [s.strip() for s in env.split(",") if s.strip()]
    session = Path(path).with_suffix(".session.jsonl")
    if session.is_file():
        return [f"replay:{session}"]
    raise CliError(
        "no LLM given: pass --llm openai:MODEL / anthropic:MODEL (keys from OPENAI_API_KEY / ANTHROPIC_API_KEY), "
        "--llm replay:SESSION.jsonl, or set AUTOCOMP_LLM"
    )


def _setup(args: argparse.Namespace, store: Store) -> tuple[BeamSearch, Problem]:
    try:
        executor_spec = validate_spec(args.executor or os.environ.get("AUTOCOMP_EXECUTOR") or "local")
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    overrides = {name: getattr(args, name) for name in SEARCH_FLAGS}
    overrides["repair"] = args.repair
    overrides["llm_timeout"] = args.llm_timeout
    if args.resume:
        meta = store.run_meta(args.resume)
        if meta is None:
            raise CliError(f"no run {args.resume!r} in {store.home} (list them with `autocomp runs`)")
        problem = Problem.from_json(meta["problem"])
        config = SearchConfig.from_json(meta["config"])
        specs = args.llm or list(meta["models"])
        try:
            backend = get_backend(problem.target)
        except BackendError as exc:
            raise CliError(str(exc)) from None
        run_id, resumed, seed_plans = args.resume, True, meta.get("seed_plans") or []
        reuse = ReuseChoice.from_json(meta["reuse"]) if meta.get("reuse") else None
        if args.reuse:
            raise CliError("--reuse cannot change a resumed run; it reuses what the run started with")
    else:
        if not args.file:
            raise CliError("give a FILE to optimize (or --resume RUN)")
        problem, backend = load_problem(args.file, args.function, args.target, args.line - 1 if args.line else None)
        config = SearchConfig()
        specs = args.llm or default_llms(args.file)
        run_id, resumed, seed_plans = None, False, []
        reuse = None
        if args.reuse:
            try:
                reuse = resolve_reuse(store, problem, args.reuse)
            except ReuseError as exc:
                raise CliError(str(exc)) from None
            if reuse is None:  # (a match is announced with the run's start)
                print(f"autocomp: {no_match_reason(store, problem)}", file=sys.stderr)
    try:
        config = config.with_overrides(**overrides)
    except (ConfigError, TypeError) as exc:
        raise CliError(str(exc)) from None
    try:
        pool = build_pool(specs, store, record=args.record, concurrency=config.llm_concurrency, timeout=config.llm_timeout, retries=config.llm_retries)
    except LLMConfigError as exc:
        raise CliError(str(exc)) from None
    try:
        executor = make_executor(executor_spec)
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    evaluator = Evaluator(backend, store, executor=executor)
    try:
        search = BeamSearch(
            problem, backend, pool, config, store, run_id=run_id, resumed=resumed, seed_plans=seed_plans, evaluator=evaluator, reuse=reuse
        )
    except PromptError as exc:
        raise CliError(str(exc)) from None
    return search, problem


async def _drive(search: BeamSearch, render) -> RunFinished | RunFailed | None:
    final = None
    loop = asyncio.get_running_loop()
    # Ctrl-C ends the run cleanly with its best so far; a second one aborts.
    stops = {"count": 0}

    def on_interrupt() -> None:
        stops["count"] += 1
        if stops["count"] == 1:
            search.stop()
        else:
            raise KeyboardInterrupt

    try:
        loop.add_signal_handler(signal.SIGINT, on_interrupt)
    except (NotImplementedError, RuntimeError):
        pass
    try:
        async for event in search.run():
            render(event)
            if isinstance(event, (RunFinished, RunFailed)):
                final = event
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
        await search.pool.close()
    return final


def run(args: argparse.Namespace) -> int:
    store = Store.open()
    try:
        search, problem = _setup(args, store)
        render = JsonRenderer() if args.json else ProgressRenderer()
        try:
            final = asyncio.run(_drive(search, render))
        finally:
            render.close()
        if not isinstance(final, RunFinished):
            return EXIT_FAILED
        best = final.best
        if best.parent is None:
            return EXIT_OK
        if args.write and not final.confirmed and not args.accept_unconfirmed:
            print(
                f"autocomp: not written: the best kernel's {final.primary_metric} comes from a tier that cannot confirm "
                f"a speedup ({final.best.evaluation.tier if final.best.evaluation else 'unknown tier'}). Check it on "
                f"the confirming evaluator, or pass --accept-unconfirmed to write it anyway.",
                file=sys.stderr,
            )
            if not args.json:
                print(unified_diff(problem.code, best.code, os.path.basename(problem.path)), end="")
            return EXIT_FAILED
        if args.write:
            current = read_source(problem.path)
            try:
                Path(problem.path).write_text(rewrite_kernel(current, problem, best.code), encoding="utf-8")
            except StaleKernel as exc:
                raise CliError(str(exc)) from None
            if not args.json:
                print(f"autocomp: wrote the best kernel ({final.speedup and f'{final.speedup:.2f}x'}) to {problem.path}")
        elif not args.json:
            print(unified_diff(problem.code, best.code, os.path.basename(problem.path)), end="")
        return EXIT_OK
    finally:
        store.close()
