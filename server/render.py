"""Engine events → job state → the words and shapes the editor shows.

The engine knows nothing of editors (DESIGN principle 1); this module is the one place
that folds its events into a :class:`~autocomp.server.jobs.Job` and renders that job as a
status line, a progress message, hover Markdown and diagnostics. Pure functions of the job
so they are cheap to call from any request handler.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types as lsp

from autocomp.model import Candidate, Metric
from autocomp.server.jobs import CANCELLED, FAILED, FINISHED, RUNNING, CandidateInfo, Job


def primary(candidate: Candidate, name: str) -> Metric | None:
    """The candidate's primary metric (the first metric when the name is unknown)."""
    metrics = candidate.metrics
    if name and name in metrics:
        return metrics[name]
    return next(iter(metrics.values()), None)


def fmt_speedup(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def published(job: Job) -> dict[str, Any]:
    """The progress snapshot last sent to the client (taken now if none was)."""
    return job.progress or job.snapshot()


def status_line(job: Job) -> str:
    """The lens/status text, e.g. ``Autocomp: iteration 3/8 · 41 candidates · best 2.10x``:
    for a running job, the very text of the last ``autocomp/jobStatus`` and ``$/progress``."""
    replay = " (replay)" if job.replay else ""
    if job.state == RUNNING:
        return f"Autocomp{replay}: {published(job)['text']}"
    if job.state == FAILED:
        return f"Autocomp{replay}: failed: {job.message[:80]}"
    best = fmt_speedup(job.best_speedup) if job.best_speedup else "—"
    if job.applied:
        verb = "applied"
    elif offered(job) is not None:
        verb = "candidate available"
    else:
        verb = "cancelled" if job.state == CANCELLED else "done"
    return f"Autocomp{replay}: {verb} · {job.evaluated} candidates · best {best}"


def progress_message(job: Job) -> str:
    return published(job)["text"]


def progress_percentage(job: Job) -> int:
    return int(published(job)["percentage"])


def offered(job: Job) -> CandidateInfo | None:
    """The candidate a finished, unapplied job offers (its best correct one that beats the
    starting kernel), else None."""
    if job.active or job.applied or job.superseded or not job.best_candidate_id:
        return None
    info = job.candidate(job.best_candidate_id)
    if info is None or info.candidate.parent is None or info.speedup is None or info.speedup <= 1.0:
        return None
    if info.candidate.verdict.correct is False:
        return None
    return info


def candidate_line(info: CandidateInfo) -> str:
    """``plan summary: 196,000 cycles (gemmini timing model) · 2.10x``."""
    metric = info.metric.display() if info.metric else info.candidate.verdict.value
    return f"{info.candidate.plan_summary()}: {metric} · {fmt_speedup(info.speedup)}"


def beam_diagnostics(job: Job, rng: lsp.Range) -> list[lsp.Diagnostic]:
    """Information diagnostics for the current beam (the best candidates so far)."""
    out: list[lsp.Diagnostic] = []
    replay = " [replayed LLM session]" if job.replay else ""
    unconfirmed = "" if job.confirmed else " [estimate: not confirmed]"
    for info in job.ranked():
        if info.speedup is None or info.candidate.parent is None:
            continue
        out.append(
            lsp.Diagnostic(
                range=rng,
                message=f"Autocomp: {candidate_line(info)}{unconfirmed}{replay}",
                severity=lsp.DiagnosticSeverity.Information,
                source="autocomp",
                code=info.candidate.id,
                data={"jobId": job.id, "candidateId": info.candidate.id},
            )
        )
    return out


def hover_markdown(job: Job) -> str:
    """Plans so far with their numbers, as Markdown every client can show."""
    lines = [f"**{status_line(job)}**", ""]
    applied = job.candidate(job.applied_candidate_id) if job.applied and job.applied_candidate_id else None
    if applied is not None:
        lines.append(f"Applied: {fmt_speedup(applied.speedup)} ({applied.candidate.plan_summary()[:80]}). "
                     "Revert (lens) or undo puts the original kernel back.")
        lines.append("")
    elif offered(job) is not None:
        info = offered(job)
        assert info is not None
        lines.append(f"Candidate available: {fmt_speedup(info.speedup)} ({info.candidate.plan_summary()[:80]}), "
                     f"not applied. Apply it with the lens 'Apply {fmt_speedup(info.speedup)}' or the code action "
                     "'Apply this candidate'.")
        lines.append("")
    if job.baseline is not None and job.baseline.metric is not None:
        lines.append(f"Starting kernel: {job.baseline.metric.display()}")
        lines.append("")
    infos = sorted(job.candidates.values(), key=lambda i: (i.candidate.iteration, -(i.speedup or 0.0)))
    if not infos:
        lines.append("_No candidates evaluated yet._")
    else:
        lines.append("| it | plan | verdict | metric | speedup |")
        lines.append("|---|---|---|---|---|")
        for info in infos[-40:]:
            c = info.candidate
            metric = info.metric.display() if info.metric else "—"
            plan = c.plan_summary().replace("|", "\\|")[:90]
            mark = " ★" if c.id == job.best_candidate_id else ""
            lines.append(f"| {c.iteration} | {plan}{mark} | {c.verdict.value} | {metric} | {fmt_speedup(info.speedup)} |")
    if not job.confirmed:
        lines.append("")
        lines.append(f"_Numbers from `{job.tier or 'this evaluator'}` cannot confirm a speedup; nothing is applied automatically._")
    return "\n".join(lines)


def run_report(job: Job) -> dict[str, Any]:
    """The ``autocomp/run`` response."""
    cands = []
    if job.baseline is not None:
        cands.append(job.baseline.to_json())
    cands += [info.to_json() for info in job.candidates.values()]
    return {"job": job.status(), "candidates": cands, "bestSpeedupPerIteration": list(job.best_per_iteration)}


__all__ = [
    "beam_diagnostics",
    "candidate_line",
    "hover_markdown",
    "progress_message",
    "run_report",
    "status_line",
    "FINISHED",
]
