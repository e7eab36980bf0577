"""Information diagnostics on each kernel for its job's current beam.

Diagnostics reach every client (VS Code, Neovim, eglot), so they are where the ranked
candidates live; each one carries ``{jobId, candidateId}`` in ``data`` (and the candidate
id in ``code`` for clients that drop ``data``) so a code action can apply or diff it.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from autocomp.server import render
from autocomp.server.documents import DetectedKernel
from autocomp.server.jobs import Job
from autocomp.server.server import AutocompServer


def kernel_range(ls: AutocompServer, job: Job) -> lsp.Range:
    """Where the job's kernel is now: found by name in the current text, else where it
    was when the job started."""
    start, end = job.start_line, job.end_line
    for kernel in ls.kernels(job.uri):
        if kernel.name == job.kernel:
            start, end = kernel.span.start_line, kernel.span.end_line
            break
    return lsp.Range(start=lsp.Position(line=start, character=0), end=lsp.Position(line=max(start, end - 1), character=0))


def publish(ls: AutocompServer, uri: str) -> None:
    """Diagnostics for the newest job of each kernel in ``uri`` whose result is not
    applied yet (an applied rewrite makes the old beam meaningless)."""
    if ls.closing:
        return
    latest: dict[str, Job] = {}
    for job in ls.jobs.for_uri(uri):
        latest[job.kernel] = job
    out: list[lsp.Diagnostic] = []
    for job in latest.values():
        if job.applied or job.superseded:
            continue
        out += render.beam_diagnostics(job, kernel_range(ls, job))
    ls.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri=uri, diagnostics=out))


def register(server: AutocompServer) -> None:
    """Nothing to register: diagnostics are pushed by jobs (see runner and apply)."""


def _candidate_refs(ls: AutocompServer, uri: str, context: lsp.CodeActionContext) -> list[tuple[Job, str, lsp.Diagnostic | None]]:
    """(job, candidate id, diagnostic) for each of our diagnostics in the request."""
    refs: list[tuple[Job, str, lsp.Diagnostic | None]] = []
    for diag in context.diagnostics or []:
        if diag.source != "autocomp":
            continue
        data = diag.data if isinstance(diag.data, dict) else {}
        cand = data.get("candidateId") or (str(diag.code) if diag.code is not None else None)
        job = ls.jobs.get(str(data.get("jobId"))) if data.get("jobId") else None
        if job is None and cand:  # clients that drop ``data``: the newest job holding it
            job = next((j for j in reversed(ls.jobs.for_uri(uri)) if j.candidate(cand)), None)
        if job is not None and cand and job.candidate(cand) is not None:
            refs.append((job, cand, diag))
    return refs


def candidate_actions(
    ls: AutocompServer, uri: str, kernel: DetectedKernel | None, context: lsp.CodeActionContext
) -> list[lsp.CodeAction]:
    """"Apply this candidate (2.10x)" and "Show diff" for candidates under the cursor
    (from the request's diagnostics, else the best of the kernel's latest unapplied job)."""
    refs = _candidate_refs(ls, uri, context)
    if not refs and kernel is not None:
        job = ls.jobs.latest(uri, kernel.name)
        if job is not None and not job.applied and not job.superseded and job.ranked():
            refs = [(job, job.ranked()[0].candidate.id, None)]
    actions: list[lsp.CodeAction] = []
    seen: set[tuple[str, str]] = set()
    for job, cand, diag in refs:
        if (job.id, cand) in seen:
            continue
        seen.add((job.id, cand))
        info = job.candidate(cand)
        if info is None or info.candidate.parent is None:
            continue
        args = {"jobId": job.id, "candidateId": cand}
        summary = info.candidate.plan_summary()[:50]
        for title, command in (
            (f"Apply this candidate ({render.fmt_speedup(info.speedup)}): {summary}", "autocomp.applyCandidate"),
            (f"Show diff ({render.fmt_speedup(info.speedup)}): {summary}", "autocomp.showDiff"),
        ):
            actions.append(
                lsp.CodeAction(
                    title=title,
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[diag] if diag is not None else None,
                    command=lsp.Command(title=title, command=command, arguments=[args]),
                )
            )
    return actions
