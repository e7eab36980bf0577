"""``autocomp runs`` and ``autocomp show RUN``: what the store remembers of past runs: beam
searches (``autocomp optimize``, the editor) and tunings (``autocomp tune``, stored under
``tune:<run id>`` and listed with that id, marked as tune runs)."""

from __future__ import annotations

import argparse
import json
import os

from autocomp.cli.common import EXIT_OK, CliError, unified_diff
from autocomp.cli.render import fmt_speedup
from autocomp.model import Candidate, Problem
from autocomp.schedules import Signature
from autocomp.store import Store


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list runs in the store (searches and `autocomp tune` runs), with each finished run's schedule")
    p.add_argument("--json", action="store_true")
    p.add_argument("--schedules", action="store_true", help="print each finished run's schedule (the plans on its best path)")
    p.set_defaults(handler=list_runs)
    s = sub.add_parser("show", help="summary, best diff and usage of one run (or tune:RUN, a tuning)")
    s.add_argument("run")
    s.add_argument("--json", action="store_true")
    s.set_defaults(handler=show_run)


def tune_row(record: dict) -> dict:
    """A tune record (``tune:<run id>``) as a row of ``autocomp runs``: id ``tune:<run id>``,
    ``kind`` ``tune``."""
    row = {k: v for k, v in record.items() if k not in ("type", "configs", "space", "baseline")}
    row.update({
        "run_id": f"tune:{record.get('run_id')}", "kind": "tune", "status": "finished",
        "models": [f"no LLM ({record.get('strategy', '?')} tuner)"], "configs_tried": len(record.get("configs") or []),
    })
    return row


def _tune_cell(row: dict) -> str:
    best = row.get("best_config") if row.get("improved") else None
    text = f"tune · {row.get('configs_tried', 0)} configs"
    if best:
        text += " · " + ",".join(f"{k}={v}" for k, v in best.items())
    return text[:34]


def list_runs(args: argparse.Namespace) -> int:
    from autocomp.tuning.engine import tune_records

    store = Store.open()
    try:
        rows = [store.run_meta(r) or {"run_id": r} for r in store.run_ids()]
        schedules = {r.get("run_id"): store.schedule(str(r.get("run_id"))) for r in rows}
        tunes = [tune_row(t) for t in tune_records(store)]
    finally:
        store.close()
    for r in rows:
        r.setdefault("kind", "search")
    # searches and tunings together, oldest first (a stable sort keeps each kind's own order)
    rows = sorted(rows + tunes, key=lambda r: str(r.get("created") or ""))
    if args.json:
        out = []
        for r in rows:
            row = {k: v for k, v in r.items() if k != "problem"}
            if r.get("kind") != "tune":
                row["schedule"] = schedules.get(r.get("run_id"))
            out.append(row)
        print(json.dumps(out, indent=2))
        return EXIT_OK
    if not rows:
        print(f"no runs yet in {store.home}")
        return EXIT_OK
    print(f"{'RUN':40} {'STATUS':9} {'TARGET':8} {'KERNEL':20} {'BEST':>7}  {'SCHEDULE':34} MODELS")
    for r in rows:
        if r.get("kind") == "tune":
            print(
                f"{r.get('run_id', '?'):40} {'tune':9} {r.get('target', '?'):8} {str(r.get('kernel', '?'))[:20]:20} "
                f"{fmt_speedup(r.get('speedup')):>7}  {_tune_cell(r):34} {', '.join(r.get('models', []))}"
            )
            continue
        print(
            f"{r.get('run_id', '?'):40} {r.get('status', '?'):9} {r.get('target', '?'):8} {str(r.get('kernel', '?'))[:20]:20} "
            f"{fmt_speedup(r.get('speedup')):>7}  {_schedule_cell(schedules.get(r.get('run_id')), r):34} {', '.join(r.get('models', []))}"
        )
        schedule = schedules.get(r.get("run_id"))
        if args.schedules and schedule and schedule.get("plans"):
            for i, plan in enumerate(schedule["plans"], 1):
                print(f"    {i}. {Candidate(id='', code='', plan=plan, parent='x').plan_summary()}")
    return EXIT_OK


def _schedule_cell(schedule: dict | None, meta: dict) -> str:
    """``3 plans · matmul [64x64, …]``; ``reused 2/3 from RUN`` is shown by ``show``."""
    if not schedule:
        return "—"
    plans = len(schedule.get("plans") or [])
    sig = Signature.from_json(schedule.get("signature"))
    shapes = ",".join("x".join(str(d) for d in s) for s in sig.shapes)
    text = f"{plans} plan{'s' if plans != 1 else ''} · {sig.op} [{shapes}]"
    if meta.get("reuse"):
        text = "↻ " + text
    return text[:34]


def show_tune(run: str) -> int:
    """``autocomp show tune:RUN``: a tuning's summary (its table: ``autocomp tune`` again,
    which the evaluation cache answers)."""
    store = Store.open()
    try:
        record = store.get(run)
    finally:
        store.close()
    if not isinstance(record, dict):
        raise CliError(f"no tune run {run!r} in {store.home} (list them with `autocomp runs`)")
    print(f"tune run {record.get('run_id')}: {record.get('strategy')} (seed {record.get('seed')}), "
          f"{len(record.get('configs') or [])} configurations tried, {record.get('pruned', 0)} pruned; no LLM")
    print(f"  kernel {record.get('kernel')} ({record.get('target')}) in {record.get('path')}")
    best = record.get("best_config")
    if record.get("improved") and best:
        print(f"  best: {', '.join(f'{k}={v}' for k, v in best.items())} ({fmt_speedup(record.get('speedup'))})")
    else:
        print("  no configuration beat the constants as written")
    return EXIT_OK


def show_run(args: argparse.Namespace) -> int:
    if str(args.run).startswith("tune:"):
        if args.json:
            store = Store.open()
            try:
                record = store.get(args.run)
            finally:
                store.close()
            if not isinstance(record, dict):
                raise CliError(f"no tune run {args.run!r} in {store.home} (list them with `autocomp runs`)")
            print(json.dumps(record, indent=2))
            return EXIT_OK
        return show_tune(args.run)
    store = Store.open()
    try:
        meta = store.run_meta(args.run)
        if meta is None:
            raise CliError(f"no run {args.run!r} in {store.home} (list them with `autocomp runs`)")
        events = list(store.events(args.run))
        schedule = store.schedule(args.run)
    finally:
        store.close()
    candidates = {e["candidate"]["id"]: e["candidate"] for e in events if e.get("type") in ("candidate_evaluated", "baseline_evaluated")}
    finished = next((e for e in reversed(events) if e.get("type") in ("run_finished", "run_failed")), None)
    if args.json:
        print(
            json.dumps(
                {"meta": {k: v for k, v in meta.items() if k != "problem"}, "candidates": list(candidates.values()), "final": finished, "schedule": schedule},
                indent=2,
            )
        )
        return EXIT_OK
    problem = Problem.from_json(meta["problem"])
    print(f"run {meta['run_id']}: {meta.get('status')} ({meta.get('reason', '')})")
    print(f"  kernel {problem.name} ({problem.target}) in {problem.path}")
    print(f"  models: {', '.join(meta.get('models', []))}")
    print("  settings: " + ", ".join(f"{k}={v}" for k, v in meta.get("config", {}).items() if v is not None))
    print(f"  candidates: {len(candidates) - 1 if candidates else 0} evaluated")
    for spec, usage in (meta.get("usage") or {}).items():
        print(f"  usage {spec}: {usage.get('calls', 0)} calls, {usage.get('input_tokens', 0)} in / {usage.get('output_tokens', 0)} out tokens")
    reuse = meta.get("reuse")
    if reuse:
        print(
            f"  reused: run {reuse.get('source')}: {reuse.get('reused', 0)} of {len(reuse.get('plans') or [])} plan(s) "
            f"re-implemented, {reuse.get('kept', 0)} kept"
        )
    if schedule and schedule.get("plans"):
        print(f"  schedule ({len(schedule['plans'])} plan(s) on the best path; reuse with --reuse {meta['run_id']}):")
        for i, plan in enumerate(schedule["plans"], 1):
            print(f"    {i}. {Candidate(id='', code='', plan=plan, parent='x').plan_summary()}")
    if finished and finished.get("type") == "run_failed":
        print(f"  error: {finished.get('error')}")
    best_id = meta.get("best")
    if best_id and best_id in candidates and best_id != "start":
        best = Candidate.from_json(candidates[best_id])
        print(f"  best: {best.id} ({fmt_speedup(meta.get('speedup'))}) — {best.plan_summary()}")
        for name, m in best.metrics.items():
            print(f"    {name}: {m.display()}")
        print()
        print(unified_diff(problem.code, best.code, os.path.basename(problem.path)), end="")
    else:
        print("  no candidate beat the starting code")
    return EXIT_OK
