"""Schedule reuse, measured: for pairs of similar kernels, the best speedup a search reaches
at a fixed LLM-call budget with and without reusing the schedule found on the other kernel.

Pairs (Gemmini, evaluated on Spike with Autocomp's timing model, in the sandbox):

* GEMM: a run on ``examples/gemmini/gemm_512.c`` (512^3) -> ``bench/reuse/gemm_256.c`` (256^3);
* conv: a run on ``examples/gemmini/conv.c`` (3x3, 64 input channels) ->
  ``bench/reuse/conv_32ch.c`` (32 input channels).

For each pair: the source kernel is optimized (its schedule is the plans on its best path);
then, for each budget, the target is optimized twice from scratch: an ordinary search, and a
search started with ``--reuse SOURCE_RUN``. Both spend the same number of LLM calls.

LLM replies: with a key (``--llm openai:MODEL`` / ``anthropic:MODEL`` or ``AUTOCOMP_LLM``)
every call goes to that live model and the budget is the engine's ``budget_calls``.
Without one the bench REPLAYS RECORDED SESSIONS and says so: ``bench/reuse/<source>.session.jsonl``
for the source kernels and, for the targets, ``bench/reuse/<target>.session.jsonl`` (ordinary
search) and ``bench/reuse/<target>.reuse.session.jsonl`` (reusing search). All were authored
(``--author``): the plans and code of the source kernel's authored reply book
(``examples/gemmini/<source>.script.json``) served by the loopback fake LLM to the real
engine and evaluator, on the source kernel and on the target kernel. A session replays by
prompt hash and prompts quote the evaluator's figures, so after a change to the Gemmini
timing model the bench reports replay misses and asks for ``--author`` to be rerun. Both arms draw on the same reply book, so the
difference measures what reuse changes (which plans are tried first), not better replies.
A replayed reply counts as one call against the budget, as a live one would.

    python bench/schedule_reuse.py                 # replay, budgets 4 6 8 12
    python bench/schedule_reuse.py --budgets 6 10  # other budgets
    python bench/schedule_reuse.py --llm openai:gpt-4o
    python bench/schedule_reuse.py --author        # re-record the target sessions
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from autocomp.backends import get_backend  # noqa: E402
from autocomp.config import SearchConfig  # noqa: E402
from autocomp.events import Notice, RunFailed, RunFinished  # noqa: E402
from autocomp.llm import build_pool  # noqa: E402
from autocomp.llm.base import BudgetExhausted  # noqa: E402
from autocomp.schedules import ReuseError, resolve_reuse  # noqa: E402
from autocomp.search import BeamSearch  # noqa: E402
from autocomp.store import Store  # noqa: E402


@dataclass
class Pair:
    name: str
    source: str  # examples/gemmini/<source>.c, with <source>.session.jsonl and .script.json
    target: str  # bench/reuse/<target>.c


PAIRS = [
    Pair("GEMM 512^3 -> 256^3", "examples/gemmini/gemm_512.c", "bench/reuse/gemm_256.c"),
    Pair("conv 3x3 64ch -> 32ch", "examples/gemmini/conv.c", "bench/reuse/conv_32ch.c"),
]
# The configuration the sessions were recorded with (as examples/gemmini/record_sessions.sh).
CONFIG = dict(iterations=3, beam=2, plans=2, implementations=1, seed=0)
MISSES: dict[str, int] = {}  # kernel -> replayed prompts the session had no reply for


def _path(rel: str) -> str:
    return os.path.join(ROOT, rel)


def _session(rel_c: str, kind: str = "") -> str:
    """bench/reuse/<kernel>[.<kind>].session.jsonl (source and target kernels alike)."""
    name = os.path.basename(rel_c)[: -len(".c")]
    return _path(os.path.join("bench", "reuse", name + (f".{kind}" if kind else "") + ".session.jsonl"))


def _problem(rel: str):
    path = _path(rel)
    text = open(path, encoding="utf-8").read()
    backend = get_backend("gemmini")
    return backend, backend.make_problem(path, text)


def _limit_calls(pool, budget: int | None) -> None:
    """A call budget that also counts replayed replies (the engine's ``budget_calls``
    counts only paid calls, and a replay costs nothing)."""
    if budget is None:
        return
    spent = {"calls": 0}
    ask_once = pool._ask_once

    async def counted(client, request, sample):
        if spent["calls"] >= budget:
            raise BudgetExhausted("budget-calls")
        spent["calls"] += 1
        return await ask_once(client, request, sample)

    pool._ask_once = counted


async def _search(store: Store, rel: str, specs: list[str], budget: int | None, reuse=None, record: str | None = None, live: bool = False):
    backend, problem = _problem(rel)
    config = SearchConfig(**CONFIG, budget_calls=budget if live else None, early_stop=0)
    pool = build_pool(specs, store, record=record, concurrency=config.llm_concurrency, timeout=config.llm_timeout)
    if not live:
        _limit_calls(pool, budget)
    search = BeamSearch(problem, backend, pool, config, store, reuse=reuse)
    final = None
    try:
        async for event in search.run():
            if isinstance(event, (RunFinished, RunFailed)):
                final = event
            elif isinstance(event, Notice) and "has no reply" in event.message:
                MISSES[rel] = MISSES.get(rel, 0) + 1
    finally:
        await pool.close()
    if not isinstance(final, RunFinished):
        raise SystemExit(f"{rel}: the run failed: {getattr(final, 'error', final)}")
    calls = sum(u.calls for u in final.usage.values())
    return search, final, calls


def _fmt(final: RunFinished) -> str:
    m = final.best.metrics.get(final.primary_metric)
    return f"{final.speedup or 1.0:5.2f}x ({int(m.value):>7,} {m.unit})"


async def author() -> None:
    """Record the target sessions from the source kernels' authored reply books."""
    from autocomp.testing.author_session import _mark_authored
    from autocomp.testing.fake_llm import FakeLLMServer, load_rules

    for pair in PAIRS:
        script = _path(pair.source[: -len(".c")] + ".script.json")
        with tempfile.TemporaryDirectory(prefix="reuse-author-") as home:
            store = Store.open(home)
            server = FakeLLMServer(load_rules(script)).start()
            saved = {k: os.environ.get(k) for k in server.env()}
            os.environ.update(server.env())
            try:
                out = _session(pair.source)
                if os.path.exists(out):
                    os.remove(out)
                source, final, calls = await _search(store, pair.source, ["openai:authored-session"], None, record=out, live=True)
                _mark_authored(out)
                print(f"recorded {os.path.relpath(out, ROOT)}: {calls} calls, best {_fmt(final)}")
                _, target_problem = _problem(pair.target)
                choice = resolve_reuse(store, target_problem, source.run_id)
                for kind, reuse in (("", None), ("reuse", choice)):
                    out = _session(pair.target, kind)
                    if os.path.exists(out):
                        os.remove(out)
                    # A fresh store per recording, holding only the source run: every reply is
                    # asked (and recorded), none comes from a cache.
                    with tempfile.TemporaryDirectory(prefix="reuse-record-") as fresh:
                        rec_store = Store.open(fresh)
                        _, final, calls = await _search(rec_store, pair.target, ["openai:authored-session"], None, reuse=reuse, record=out, live=True)
                        rec_store.close()
                    _mark_authored(out)
                    print(f"recorded {os.path.relpath(out, ROOT)}: {calls} calls, best {_fmt(final)}")
            finally:
                server.stop()
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
            store.close()


async def measure(budgets: list[int], live_specs: list[str] | None) -> None:
    live = bool(live_specs)
    print("schedule reuse: best speedup at a fixed LLM-call budget, with and without reuse")
    print(f"  evaluator: Spike + Autocomp's Gemmini timing model (cycles), sandboxed; search {CONFIG}")
    if live:
        print(f"  LLM: LIVE model(s) {', '.join(live_specs or [])}; budget = budget_calls")
    else:
        print("  LLM: REPLAY of recorded sessions (no live model is queried; no key given). All sessions were")
        print("       authored from the source kernels' reply books (see this file's docstring); a replayed reply")
        print("       counts as one call against the budget.")
    rows = []
    for pair in PAIRS:
        with tempfile.TemporaryDirectory(prefix="reuse-bench-") as home:
            store = Store.open(home)
            started = time.monotonic()
            specs = live_specs or [f"replay:{_session(pair.source)}"]
            source, sfinal, scalls = await _search(store, pair.source, specs, None if not live else 24, live=live)
            schedule = store.schedule(source.run_id)
            _, target_problem = _problem(pair.target)
            try:
                choice = resolve_reuse(store, target_problem, source.run_id)
            except ReuseError as exc:
                print(f"\n{pair.name}: no schedule to reuse ({exc}); replay misses: {MISSES or 'none'}.")
                print("  The recorded sessions no longer match this checkout's evaluator: run `python bench/schedule_reuse.py --author`.")
                store.close()
                continue
            print(f"\n{pair.name}: source {pair.source} reached {_fmt(sfinal)} in {scalls} calls; schedule:")
            for i, plan in enumerate(schedule["plans"], 1):
                print(f"    {i}. {plan.splitlines()[0][:100]}")
            print(f"  {choice.reason}")
            print(f"  {'budget':>8}  {'without reuse':>24}  {'with reuse':>24}  {'kept':>6}  gain")
            for budget in budgets:
                plain_specs = live_specs or [f"replay:{_session(pair.target)}"]
                reuse_specs = live_specs or [f"replay:{_session(pair.target, 'reuse')}"]
                _, plain, pcalls = await _search(store, pair.target, plain_specs, budget, live=live)
                _, reused, rcalls = await _search(store, pair.target, reuse_specs, budget, reuse=choice, live=live)
                a, b = plain.speedup or 1.0, reused.speedup or 1.0
                kept = f"{reused.reuse['kept']}/{reused.reuse['reused']}" if reused.reuse else "-"
                gain = (b / a - 1.0) * 100.0
                print(f"  {budget:>5} calls {_fmt(plain):>24}  {_fmt(reused):>24}  {kept:>6}  {gain:+.0f}%   (calls used: {pcalls} / {rcalls})")
                rows.append({"pair": pair.name, "budget": budget, "without": a, "with": b, "gain_percent": round(gain, 1), "kept": kept})
            print(f"  ({time.monotonic() - started:.0f} s for this pair)")
            store.close()
    if MISSES:
        print(f"\nWARNING: the sessions had no reply for {sum(MISSES.values())} prompt(s) ({MISSES}): they were recorded against")
        print("another version of the evaluator; rerun `python bench/schedule_reuse.py --author`, then this bench.")
    if not rows:
        return
    best = max(rows, key=lambda r: r["gain_percent"])
    print(f"\nlargest gain from reuse: {best['gain_percent']:+.0f}% ({best['pair']}, {best['budget']} calls); "
          f"paper: up to +24% at a fixed sample budget")
    print("json: " + json.dumps(rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[4, 6, 8, 12])
    parser.add_argument("--llm", action="append", default=[], help="live model spec (openai:MODEL, anthropic:MODEL)")
    parser.add_argument("--author", action="store_true", help="re-record the target sessions (no key needed)")
    args = parser.parse_args()
    os.environ.setdefault("AUTOCOMP_BUILD_CACHE", os.path.join(tempfile.gettempdir(), "autocomp-bench-build"))
    if args.author:
        asyncio.run(author())
        return 0
    live = args.llm or [s.strip() for s in os.environ.get("AUTOCOMP_LLM", "").split(",") if s.strip()]
    asyncio.run(measure(sorted(set(args.budgets)), live or None))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
