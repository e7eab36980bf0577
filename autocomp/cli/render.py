"""Terminal rendering of engine events: a live progress line on a terminal, plain lines
otherwise, or JSON lines with ``--json``. Numbers always carry unit and source; a replayed
session is labelled as such at the start and at the end."""

from __future__ import annotations

import json
import sys
from typing import TextIO

from autocomp.events import (
    BaselineEvaluated,
    CandidateEvaluated,
    Event,
    IterationFinished,
    Notice,
    PlansProposed,
    RunFailed,
    RunFinished,
    RunStarted,
)


def fmt_speedup(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


class JsonRenderer:
    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out if out is not None else sys.stdout  # looked up now, not at import

    def __call__(self, event: Event) -> None:
        self.out.write(json.dumps(event.to_json()) + "\n")
        self.out.flush()

    def close(self) -> None:
        return None


class ProgressRenderer:
    """Human output on stderr (stdout is kept for the diff)."""

    def __init__(self, out: TextIO | None = None) -> None:
        out = out if out is not None else sys.stderr  # looked up now, not at import
        self.out = out
        self.live = out.isatty()
        self.iterations = 0
        self.evaluated = 0
        self.iteration = 1
        self.best: float | None = None
        self.replay = False
        self._status_shown = False

    def _line(self, text: str) -> None:
        if self._status_shown:
            self.out.write("\r\x1b[2K")
            self._status_shown = False
        self.out.write(text + "\n")
        self.out.flush()

    def _status(self) -> None:
        if not self.live:
            return
        self.out.write(
            f"\r\x1b[2K  iteration {self.iteration}/{self.iterations} · {self.evaluated} candidates · best {fmt_speedup(self.best)}"
        )
        self.out.flush()
        self._status_shown = True

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted):
            self.iterations = int(event.config.get("iterations", 0))
            self.replay = event.replay
            verb = "resuming" if event.resumed else "optimizing"
            self._line(f"autocomp: {verb} {event.kernel} ({event.target}) in {event.path} — run {event.run_id}")
            self._line(f"  evaluator: {event.tier}{'' if event.confirms else ' (estimate / unconfirmed tier)'}")
            if event.replay:
                self._line("  LLM: REPLAY of a recorded session (no live model is queried): " + ", ".join(event.models))
            else:
                self._line("  LLM: " + ", ".join(event.models))
            if event.reuse:
                self._line(f"  schedule: {event.reuse.get('reason') or 'reusing run ' + str(event.reuse.get('source'))}")
        elif isinstance(event, BaselineEvaluated):
            c = event.candidate
            figures = ", ".join(f"{name} {m.display()}" for name, m in c.metrics.items()) or "no figures"
            self._line(f"  starting code: {c.verdict.value}; {figures}")
        elif isinstance(event, PlansProposed):
            self.iteration = event.iteration
            self._status()
        elif isinstance(event, CandidateEvaluated):
            self.evaluated = event.evaluated_total
            if event.speedup is not None and (self.best is None or event.speedup > self.best):
                self.best = event.speedup
            self._status()
        elif isinstance(event, IterationFinished):
            marker = "new best" if event.improved else "no improvement"
            self._line(
                f"  iteration {event.iteration}/{event.iterations}: {event.evaluated_total} candidates so far, "
                f"best {fmt_speedup(event.best_speedup)} ({marker})"
            )
        elif isinstance(event, Notice):
            self._line(f"  {event.level}: {event.message}")
        elif isinstance(event, RunFinished):
            best, base = event.best, event.baseline
            metric = event.primary_metric
            before = base.metrics.get(metric)
            after = best.metrics.get(metric)
            self._line(f"autocomp: run {event.run_id} {event.reason}; {event.evaluated_total} candidates evaluated")
            if before and after:
                self._line(f"  {metric}: {before.display()} → {after.display()}  ({fmt_speedup(event.speedup)})")
            if best.parent is not None:
                self._line(f"  best: {best.id} — {best.plan_summary()}")
            else:
                self._line("  no candidate beat the starting code")
            if event.reuse:
                self._line(
                    f"  schedule reuse: run {event.reuse.get('source')}: {event.reuse.get('reused', 0)} of "
                    f"{len(event.reuse.get('plans') or [])} plan(s) re-implemented, {event.reuse.get('kept', 0)} kept"
                )
            if not event.confirmed:
                self._line("  note: these figures come from a tier that cannot confirm a speedup; verify before relying on them")
            for spec, usage in event.usage.items():
                self._line(
                    f"  usage {spec}: {usage.calls} calls, {usage.input_tokens} in / {usage.output_tokens} out tokens, "
                    f"{usage.cached_calls} cache hits"
                )
            if event.replay:
                self._line("  (LLM replies were REPLAYED from a recorded session)")
        elif isinstance(event, RunFailed):
            self._line(f"autocomp: run {event.run_id} failed: {event.error}")

    def close(self) -> None:
        if self._status_shown:
            self.out.write("\n")
            self.out.flush()
