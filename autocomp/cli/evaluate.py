"""``autocomp eval``: evaluate one kernel, or a candidate file against a baseline file.

The JSON object is a public contract: ``verdict``, ``correct``, ``metrics`` (name → value,
unit, source), ``primary_metric``, ``speedup`` (baseline ÷ candidate, null unless both are
correct), plus ``tier``, ``confirmed``, ``feedback`` and the kernel's identity.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os

from autocomp.backends import BackendError
from autocomp.cli.common import EXIT_FAILED, EXIT_OK, CliError, load_problem, read_source
from autocomp.evaluator import Evaluator
from autocomp.model import Evaluation, Verdict, speedup
from autocomp.store import Store


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a kernel (or a candidate against a baseline)")
    p.add_argument("file")
    p.add_argument("--function", help="kernel name when the file has several")
    p.add_argument("--target", default="auto")
    p.add_argument("--against", metavar="BASE_FILE", help="baseline file: its kernel is the oracle and the speedup reference")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-cache", action="store_true", help="evaluate even if this exact code was evaluated before")
    p.set_defaults(handler=run)


def result_json(evaluation: Evaluation, primary: str, ratio: float | None, kernel: str, target: str, baseline: Evaluation | None) -> dict:
    out = {
        "verdict": evaluation.verdict.value,
        "correct": evaluation.verdict.correct,
        "metrics": {k: m.to_json() for k, m in evaluation.metrics.items()},
        "primary_metric": primary,
        "speedup": ratio,
        "tier": evaluation.tier,
        "confirmed": evaluation.confirmed,
        "feedback": evaluation.feedback,
        "kernel": kernel,
        "target": target,
    }
    if baseline is not None:
        out["baseline"] = {
            "verdict": baseline.verdict.value,
            "metrics": {k: m.to_json() for k, m in baseline.metrics.items()},
        }
    return out


async def _evaluate(args: argparse.Namespace, store: Store | None) -> dict:
    if args.against:
        problem, backend = load_problem(args.against, args.function, args.target)
        candidate_text = read_source(args.file)
        try:
            candidate_problem = backend.make_problem(os.path.abspath(args.file), candidate_text, function=problem.name)
        except BackendError as exc:
            raise CliError(f"{args.file}: {exc}") from None
        code = candidate_problem.code
    else:
        problem, backend = load_problem(args.file, args.function, args.target)
        code = problem.code
    evaluator = Evaluator(backend, store)
    base_eval: Evaluation | None = None
    if args.against:
        base_eval, cand_eval = await evaluator.evaluate(problem, [problem.code, code])
    else:
        (cand_eval,) = await evaluator.evaluate(problem, [code])
    primary = backend.primary_metric
    ratio = None
    if base_eval is not None and base_eval.verdict is Verdict.CORRECT and cand_eval.verdict is Verdict.CORRECT:
        ratio = speedup(base_eval.metrics.get(primary), cand_eval.metrics.get(primary), backend.lower_is_better)
    return result_json(cand_eval, primary, ratio, problem.name, problem.target, base_eval)


def _print_human(result: dict) -> None:
    print(f"{result['kernel']} ({result['target']}): {result['verdict']}  [{result['tier']}]")
    for name, m in result["metrics"].items():
        value = m["value"]
        text = f"{int(value):,}" if float(value).is_integer() else f"{value:.4g}"
        print(f"  {name}: {text} {m['unit']} ({m['source']})")
    if result.get("baseline"):
        print(f"  baseline: {result['baseline']['verdict']}")
    if result["speedup"] is not None:
        print(f"  speedup vs baseline on {result['primary_metric']}: {result['speedup']:.3f}x")
    if not result["confirmed"] and result["verdict"] in ("correct", "unverified"):
        print("  note: this tier cannot confirm speed on real hardware")
    if result["feedback"]:
        print("  " + result["feedback"].strip().replace("\n", "\n  "))


def run(args: argparse.Namespace) -> int:
    store = None if args.no_cache else Store.open()
    try:
        result = asyncio.run(_evaluate(args, store))
    finally:
        if store is not None:
            store.close()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_human(result)
    return EXIT_OK if result["verdict"] in ("correct", "unverified") else EXIT_FAILED
