"""``autocomp optimize``: run the beam search on one kernel from the terminal."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path

from autocomp.backends import Backend, get_backend, target_help
from autocomp.cli.common import EXIT_FAILED, EXIT_OK, CliError, load_problem, read_source, target_settings
from autocomp.cli.render import JsonRenderer, ProgressRenderer
from autocomp.cli.rewrite import StaleKernel, rewrite_kernel
from autocomp.events import RunFailed, RunFinished
from autocomp.executor import ExecutorError, validate_spec
from autocomp.model import Problem
from autocomp.run import Run, RunSpec, prepare_resume, resolve_llms, start, unified_diff
from autocomp.schedules import ReuseError, no_match_reason, resolve_reuse
from autocomp.schema import add_cli_flags, cli_overrides, cli_settings
from autocomp.store import Store

def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("optimize", help="optimize one kernel with LLM beam search, verified on the target's evaluator")
    p.add_argument("file", nargs="?", help="source file holding the kernel (optional with --resume)")
    p.add_argument("--function", help="kernel name when the file has several")
    p.add_argument("--line", type=int, help="1-based line inside the kernel to optimize")
    p.add_argument("--target", default="auto", help=target_help())
    add_cli_flags(p)  # every setting with a flag (autocomp.schema), plus --set KEY=VALUE
    p.add_argument("--json", action="store_true", help="print events as JSON lines")
    p.add_argument("--write", action="store_true", help="rewrite FILE with the best kernel (only if the kernel is unchanged and the result is confirmed)")
    p.add_argument("--record", metavar="FILE", help="record every prompt hash and reply to FILE (replay with --llm replay:FILE)")
    p.add_argument("--resume", metavar="RUN", help="continue a stopped run; nothing already paid for is asked or evaluated again")
    p.add_argument(
        "--reuse",
        metavar="RUN|auto",
        help="start by adapting a finished run's schedule (its best path's plans) to this kernel; "
        "auto picks the most similar finished run of the same target and says which and why",
    )
    p.set_defaults(handler=run)


def default_llms(path: str) -> list[str]:
    """``AUTOCOMP_LLM`` (comma-separated specs), else the example's bundled session."""
    return resolve_llms(None, path)


def _setup(args: argparse.Namespace, store: Store) -> tuple[Run, Problem, Backend]:
    """Everything through the engine's front door (autocomp.run)."""
    try:
        executor_spec = validate_spec(args.executor or cli_settings(args).get("executor") or os.environ.get("AUTOCOMP_EXECUTOR") or "local")
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    overrides = cli_overrides(args)  # autocomp.toml < flags < --set
    if args.resume:
        if args.reuse:
            raise CliError("--reuse cannot change a resumed run; it reuses what the run started with")
        problem, backend, spec = prepare_resume(store, args.resume, lambda target: get_backend(target, target_settings(args, target)))
        if args.llm:
            spec.llm = list(args.llm)
        kernel_path = None
    else:
        if not args.file:
            raise CliError("give a FILE to optimize (or --resume RUN)")
        problem, backend = load_problem(args.file, args.function, args.target, args.line - 1 if args.line else None, args=args)
        spec = RunSpec(llm=list(args.llm))
        kernel_path = args.file
        if args.reuse:
            try:
                spec.reuse = resolve_reuse(store, problem, args.reuse)
            except ReuseError as exc:
                raise CliError(str(exc)) from None
            if spec.reuse is None:  # (a match is announced with the run's start)
                print(f"autocomp: {no_match_reason(store, problem)}", file=sys.stderr)
    spec.overrides = overrides
    spec.record = args.record
    spec.executor = executor_spec
    return start(problem, backend, spec, store, kernel_path=kernel_path), problem, backend


async def _drive(search: Run, render) -> RunFinished | RunFailed | None:
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
        async for event in search.events():  # the run closes its pool when the stream ends
            render(event)
            if isinstance(event, (RunFinished, RunFailed)):
                final = event
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
    return final


def run(args: argparse.Namespace) -> int:
    store = Store.open()
    try:
        search, problem, backend = _setup(args, store)
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
                Path(problem.path).write_text(rewrite_kernel(current, problem, best.code, backend), encoding="utf-8")
            except StaleKernel as exc:
                raise CliError(str(exc)) from None
            if not args.json:
                print(f"autocomp: wrote the best kernel ({final.speedup and f'{final.speedup:.2f}x'}) to {problem.path}")
        elif not args.json:
            print(unified_diff(problem.code, best.code, os.path.basename(problem.path)), end="")
        return EXIT_OK
    finally:
        store.close()
