"""``autocomp tune``: tune a kernel's integer constants (tile sizes, unroll factors, launch
shapes) with the evaluator alone, no LLM (see :mod:`autocomp.tuning`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from autocomp.cli.common import EXIT_FAILED, EXIT_OK, CliError, load_problem, read_source
from autocomp.cli.render import fmt_speedup
from autocomp.executor import ExecutorError, make_executor, validate_spec
from autocomp.run import unified_diff
from autocomp.schema import add_set_flag, cli_settings
from autocomp.store import Store
from autocomp.tuning.engine import STRATEGIES, Trial, TuneResult, tune


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tune", help="tune a kernel's integer constants on the evaluator (no LLM)")
    p.add_argument("file", help="source file holding the kernel")
    p.add_argument("--function", help="kernel name when the file has several")
    from autocomp.backends import target_help

    p.add_argument("--target", default="auto", help=target_help())
    p.add_argument("--budget-evals", dest="budget_evals", type=int, metavar="N",
                   help="configurations to evaluate at most (default 30; grid: every valid one)")
    p.add_argument("--strategy", choices=STRATEGIES, default="tpe", help="Optuna sampler: tpe (default), grid or random")
    p.add_argument("--seed", type=int, default=0, help="sampler seed: the same seed asks the same configurations")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("--write", action="store_true",
                   help="set the constants in FILE to the best configuration (only a confirmed result, file unchanged)")
    p.add_argument("--accept-unconfirmed", action="store_true",
                   help="let --write use a result from a tier that cannot confirm it (NKI estimate, CUDA compile check)")
    p.add_argument("--executor", help="local|ray|ray://HOST:PORT (default: the setting autocomp.executor)")
    add_set_flag(p)
    p.set_defaults(handler=run)


def _fmt_config(config: dict[str, int]) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


def _metric_text(trial_or_eval, primary: str) -> str:
    ev = trial_or_eval.evaluation if isinstance(trial_or_eval, Trial) else trial_or_eval
    m = ev.metrics.get(primary)
    return m.display() if m else "—"


def render_table(result: TuneResult) -> str:
    p = result.primary_metric
    rows = [("#", "configuration", "verdict", p, "speedup")]
    rows.append(("base", _fmt_config(result.space.baseline()), result.baseline.verdict.value, _metric_text(result.baseline, p), "1.00x"))
    for t in result.trials:
        mark = " *" if result.best is t else ""
        rows.append((str(t.number), _fmt_config(t.config), t.verdict.value + (" (cached)" if t.cached else ""),
                     _metric_text(t, p), fmt_speedup(t.speedup) + mark))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def run(args: argparse.Namespace) -> int:
    problem, backend = load_problem(args.file, args.function, args.target, args=args)
    try:
        executor_spec = validate_spec(args.executor or cli_settings(args).get("executor") or os.environ.get("AUTOCOMP_EXECUTOR") or "local")
        executor = make_executor(executor_spec)
    except ExecutorError as exc:
        raise CliError(str(exc)) from None
    store = Store.open()
    try:
        live = not args.json and sys.stderr.isatty()

        def progress(trial: Trial, result: TuneResult) -> None:
            if live:
                sys.stderr.write(f"\r\x1b[2K  {trial.number}/{result.budget} configurations · best {fmt_speedup(result.speedup)}")
                sys.stderr.flush()

        if not args.json:
            print(f"autocomp: tuning {problem.name} ({problem.target}) in {args.file} — {backend.tier().name}"
                  f"{'' if backend.tier().confirms else ' (estimate / unconfirmed tier)'}; no LLM is used", file=sys.stderr)
        result = asyncio.run(tune(problem, backend, store, budget=args.budget_evals, strategy=args.strategy, seed=args.seed,
                                  executor=executor, on_trial=progress))
        if live:
            sys.stderr.write("\r\x1b[2K")
        out = result.to_json()
        written = False
        message = ""
        if args.write and result.improved:
            if not result.confirmed and not args.accept_unconfirmed:
                message = (f"not written: the best configuration's {result.primary_metric} comes from a tier that cannot "
                           f"confirm a speedup ({result.best.evaluation.tier}); pass --accept-unconfirmed to write it anyway")
            else:
                current = read_source(problem.path)
                try:
                    new_text = result.space.file_for(result.best.config, current)
                except ValueError:
                    raise CliError(f"{problem.path} changed while tuning; nothing written (run `autocomp tune` again)") from None
                Path(problem.path).write_text(new_text, encoding="utf-8")
                written = True
                message = f"wrote {_fmt_config(result.best.config)} ({fmt_speedup(result.speedup)}) to {problem.path}"
        elif args.write:
            message = "not written: no configuration beat the constants as written"
        out["written"] = written
        if args.json:
            print(json.dumps(out))
        else:
            space = result.space
            print(f"  tunables: " + "; ".join(f"{t.name} in {t.values} ({t.source})" for t in space.tunables), file=sys.stderr)
            print(f"  space: {space.size()} configurations, {out['valid_configs']} valid after "
                  f"{len(space.constraints)} rule(s); strategy {result.strategy}, seed {result.seed}", file=sys.stderr)
            print(render_table(result))
            print(f"autocomp: tune {result.run_id}: {len(result.trials)} configurations tried "
                  f"({result.evaluated} evaluated, {result.cache_hits} from the cache, {result.pruned} pruned by the rules)")
            if result.improved:
                print(f"  best: {_fmt_config(result.best.config)} — {_metric_text(result.baseline, result.primary_metric)} → "
                      f"{_metric_text(result.best, result.primary_metric)} ({fmt_speedup(result.speedup)})")
            else:
                print("  no configuration beat the constants as written")
            if not result.confirmed:
                print("  note: these figures come from a tier that cannot confirm a speedup; verify before relying on them")
            if message:
                print(f"autocomp: {message}")
            elif result.improved and not args.write:
                print(unified_diff(problem.file_text, result.space.file_for(result.best.config), os.path.basename(problem.path)), end="")
        if message.startswith("not written") and result.improved:
            if args.json:
                print(f"autocomp: {message}", file=sys.stderr)
            return EXIT_FAILED
        return EXIT_OK
    finally:
        store.close()
