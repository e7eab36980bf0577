"""``autocomp eval``: evaluate one kernel, or a candidate file against a baseline file.

``eval FILE --against BASE`` compares whole files: BASE's kernel is the oracle and the
speedup reference, and FILE is evaluated as the program FILE is -- its own module-level
constants, helpers and imports -- not as FILE's kernel pasted into BASE. How: both files are
aligned so that their kernels start on the same line (blank lines are prepended to the
shorter prefix; nothing else changes), and the candidate is evaluated through a
:class:`CandidateFileProblem`, whose ``file_with(code)`` returns the aligned FILE. Every
backend that builds the candidate program through ``Problem.file_with`` (the protocol's way)
therefore builds FILE itself, with BASE's kernel as the reference. A backend may say where
the candidate code is in FILE with ``candidate_span(problem, path, text)`` (CUDA: a
KernelBench ``ModelNew``-only solution file is a candidate as a whole); otherwise FILE's
kernel of the same name is the candidate code.

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
from autocomp.model import CandidateFileProblem, Evaluation, KernelSpan, Problem
from autocomp.run import compare
from autocomp.schema import add_set_flag
from autocomp.store import Store


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a kernel (or a candidate against a baseline)")
    p.add_argument("file")
    p.add_argument("--function", help="kernel name when the file has several")
    p.add_argument("--target", default="auto")
    p.add_argument("--against", metavar="BASE_FILE", help="baseline file: its kernel is the oracle and the speedup reference")
    p.add_argument("--json", action="store_true")
    p.add_argument("--no-cache", action="store_true", help="evaluate even if this exact code was evaluated before")
    add_set_flag(p)
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
        "sandbox": evaluation.sandbox,
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


def _pad(text: str, lines: int) -> str:
    return "\n" * lines + text


def against_problems(problem: Problem, backend, path: str, text: str) -> tuple[Problem, CandidateFileProblem, str]:
    """(baseline problem, candidate problem, candidate code) for ``eval FILE --against BASE``:
    ``problem`` is BASE's; ``path``/``text`` are FILE's."""
    try:
        span = backend.candidate_span(problem, path, text)
    except BackendError as exc:
        raise CliError(f"{path}: {exc}") from None
    code = span.text_of(text)
    start = max(problem.span.start_line, span.start_line)
    base_text = _pad(problem.file_text, start - problem.span.start_line)
    cand_text = _pad(text, start - span.start_line)
    length = problem.span.end_line - problem.span.start_line
    base_span = KernelSpan(problem.span.name, problem.span.target, start, start + length)
    baseline = Problem(problem.path, base_span, base_text, dict(problem.options))
    candidate = CandidateFileProblem(problem.path, base_span, base_text, dict(problem.options), code, cand_text)
    return baseline, candidate, code


async def _evaluate(args: argparse.Namespace, store: Store | None) -> dict:
    """One kernel, or FILE against BASE through the engine's front door (autocomp.run.compare)."""
    if args.against:
        problem, backend = load_problem(args.against, args.function, args.target, args=args)
        candidate_text = read_source(args.file)
        baseline, candidate, code = against_problems(problem, backend, os.path.abspath(args.file), candidate_text)
        result = await compare(backend, baseline, code, store, candidate_problem=candidate)
        return result_json(result.candidate, result.primary_metric, result.speedup, problem.name, problem.target, result.baseline)
    problem, backend = load_problem(args.file, args.function, args.target, args=args)
    (cand_eval,) = await Evaluator(backend, store).evaluate(problem, [problem.code])
    return result_json(cand_eval, backend.primary_metric, None, problem.name, problem.target, None)


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
    if result.get("sandbox") == "off":
        print("  sandbox: OFF (AUTOCOMP_SANDBOX=off): this candidate ran without isolation")
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
