"""Prompt quality with a live model: for each example of each target, N plan + implement
calls on the starting kernel, every candidate checked on the real evaluator. Prints, per
example, how many candidates were extracted, built, ran, were correct, and the best
speedup, so models and prompt versions can be compared in one run.

    python bench/prompt_quality.py --llm openai:gpt-5 [--n 4] [--target nki] [--only gemm]
    python bench/prompt_quality.py --llm anthropic:claude-sonnet-4-5 --explore-rate 0.5

Without a live model (``--llm`` with an ``openai:``/``anthropic:`` spec and its key, or
``AUTOCOMP_LLM``) it says what it needs and exits 0: recorded sessions are authored and
would measure nothing about the prompts. Each run uses its own fresh store (no cached
replies), the prompts of ``autocomp/prompting.py`` exactly as the search renders them
(menu dropout, explore rate, headroom line), and ``--seed`` for the menu samples.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from autocomp.backends import BackendError, get_backend  # noqa: E402
from autocomp.evaluator import Evaluator  # noqa: E402
from autocomp.extract import extract_code, plan_text  # noqa: E402
from autocomp.llm import LLMConfigError, build_pool  # noqa: E402
from autocomp.llm.base import LLMCallError  # noqa: E402
from autocomp.menu import rng_for, sample_menu  # noqa: E402
from autocomp.model import Candidate, Verdict, speedup  # noqa: E402
from autocomp.prompting import implement_request, plan_request  # noqa: E402
from autocomp.prompts import pieces_for_problem  # noqa: E402
from autocomp.store import Store  # noqa: E402

EXAMPLES = {
    "gemmini": "examples/gemmini/*.c",
    "nki": "examples/nki/*.py",
    "cuda": "examples/cuda/*.py",
}
BUILD_FAILURES = {Verdict.NO_CODE, Verdict.LLM_ERROR, Verdict.COMPILE_ERROR, Verdict.REJECTED}
RUN_FAILURES = BUILD_FAILURES | {Verdict.RUNTIME_ERROR, Verdict.TIMEOUT}


def live_specs(given: list[str]) -> list[str]:
    specs = list(given) or [s.strip() for s in os.environ.get("AUTOCOMP_LLM", "").split(",") if s.strip()]
    return [s for s in specs if s.split(":", 1)[0] in ("openai", "anthropic")]


async def one_example(target: str, path: str, specs: list[str], n: int, keep: float, explore_rate: float,
                      seed: int, store: Store) -> dict[str, object]:
    backend = get_backend(target, {"gpu": "auto"} if target == "cuda" else {})
    text = open(path, encoding="utf-8").read()
    problem = backend.make_problem(path, text)
    pieces = pieces_for_problem(backend.prompt_pieces(), path, backend.prompt_context(problem))
    evaluator = Evaluator(backend, store)
    start = Candidate(id="start", code=problem.code)
    start.evaluation = await evaluator.evaluate_one(problem, problem.code)
    row: dict[str, object] = {"example": os.path.relpath(path, ROOT), "target": target, "n": n, "tier": backend.tier().name}
    if start.verdict not in (Verdict.CORRECT, Verdict.UNVERIFIED):
        row["error"] = f"starting kernel is {start.verdict.value}"
        return row
    pool = build_pool(specs, store)
    metric = backend.primary_metric

    async def attempt(i: int) -> Candidate:
        menu = sample_menu(pieces.menu, keep, rng_for(seed, "quality", i))
        explore = rng_for(seed, "explore", i).random() < explore_rate
        request = plan_request(pieces, problem.name, start, [start], menu, 1, 1, metric, backend.tier().name,
                               explore=explore, headroom=backend.headroom(problem, start.evaluation))
        child = Candidate(id=f"q{i}", code="", parent="start", iteration=1)
        try:
            plan = plan_text((await pool.ask(request, i, i)).text)
            child.plan = plan
            reply = await pool.ask(implement_request(pieces, problem.name, start, plan), i, i)
        except LLMCallError as exc:
            from autocomp.model import Evaluation

            child.evaluation = Evaluation(Verdict.LLM_ERROR, feedback=str(exc))
            return child
        extraction = extract_code(reply.text, pieces.language, problem.name)
        if extraction.code is None:
            from autocomp.model import Evaluation

            child.evaluation = Evaluation(Verdict.NO_CODE, feedback=extraction.problem)
            return child
        child.code = extraction.code
        child.evaluation = await evaluator.evaluate_one(problem, child.code)
        return child

    started = time.monotonic()
    children = await asyncio.gather(*(attempt(i) for i in range(n)))
    verdicts = [c.verdict for c in children]
    speedups = [speedup(start.metrics.get(metric), c.metrics.get(metric), backend.lower_is_better)
                for c in children if c.verdict is Verdict.CORRECT]
    speedups = [s for s in speedups if s]
    row.update(
        built=sum(v not in BUILD_FAILURES for v in verdicts),
        ran=sum(v not in RUN_FAILURES for v in verdicts),
        correct=sum(v in (Verdict.CORRECT, Verdict.UNVERIFIED) for v in verdicts),
        best=max(speedups) if speedups else None,
        faster=sum(s > 1.0 for s in speedups),
        verdicts={v.value: verdicts.count(v) for v in set(verdicts)},
        seconds=round(time.monotonic() - started, 1),
    )
    return row


async def run(args: argparse.Namespace, specs: list[str]) -> list[dict[str, object]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="prompt-quality-") as home:
        store = Store.open(home)
        for target in args.target or list(EXAMPLES):
            for path in sorted(glob.glob(os.path.join(ROOT, EXAMPLES[target]))):
                if args.only and not any(o in os.path.basename(path) for o in args.only):
                    continue
                try:
                    row = await one_example(target, path, specs, args.n, args.keep, args.explore_rate, args.seed, store)
                except (BackendError, LLMConfigError) as exc:
                    row = {"example": os.path.relpath(path, ROOT), "target": target, "error": str(exc)}
                rows.append(row)
                _print_row(row)
    return rows


def _print_row(row: dict[str, object]) -> None:
    if "error" in row:
        print(f"{row['example']:<34} skipped: {row['error']}")
        return
    n = int(row["n"])
    best = f"{row['best']:.2f}x" if row.get("best") else "-"
    print(f"{row['example']:<34} built {row['built']}/{n}  ran {row['ran']}/{n}  correct {row['correct']}/{n}  "
          f"faster {row['faster']}/{n}  best {best:>7}  ({row['tier']}; {row['seconds']} s; {row['verdicts']})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", action="append", default=[], help="openai:MODEL or anthropic:MODEL (repeat for an ensemble)")
    parser.add_argument("--n", type=int, default=4, help="plan + implement calls per example (default 4)")
    parser.add_argument("--target", action="append", choices=sorted(EXAMPLES), help="only this target (repeatable)")
    parser.add_argument("--only", action="append", help="only examples whose file name contains this (repeatable)")
    parser.add_argument("--keep", type=float, default=0.3, help="menu dropout keep probability (default 0.3)")
    parser.add_argument("--explore-rate", dest="explore_rate", type=float, default=0.15, help="share of explore prompts (default 0.15)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    specs = live_specs(args.llm)
    if not specs:
        print("prompt_quality: needs a live model: pass --llm openai:MODEL or --llm anthropic:MODEL (or set AUTOCOMP_LLM) "
              "with OPENAI_API_KEY / ANTHROPIC_API_KEY in the environment. Recorded sessions are authored and say "
              "nothing about prompt quality, so nothing was measured.")
        return 0
    if not any(os.environ.get(k) for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")):
        print("prompt_quality: needs OPENAI_API_KEY or ANTHROPIC_API_KEY in the environment for " + ", ".join(specs)
              + "; nothing was measured.")
        return 0
    print(f"prompt_quality: {args.n} plan+implement calls per example with {', '.join(specs)} "
          f"(keep {args.keep}, explore rate {args.explore_rate}, seed {args.seed})")
    rows = asyncio.run(run(args, specs))
    done = [r for r in rows if "error" not in r]
    if done:
        total = sum(int(r["n"]) for r in done)
        print(f"\nall: built {sum(int(r['built']) for r in done)}/{total}, ran {sum(int(r['ran']) for r in done)}/{total}, "
              f"correct {sum(int(r['correct']) for r in done)}/{total}, faster {sum(int(r['faster']) for r in done)}/{total}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
