"""Feature "candidate diagnostics": Information diagnostics on each kernel for its job's
current beam (the code actions on them belong to the apply feature, :mod:`.apply`).

Diagnostics reach every client (VS Code, Neovim, eglot), so they are where the ranked
candidates live; each one carries ``{jobId, candidateId}`` in ``data`` (and the candidate
id in ``code`` for clients that drop ``data``) so a code action can apply or diff it.
"""

from __future__ import annotations

from lsprotocol import types as lsp

from autocomp.server import render
from autocomp.server.jobs.state import Job
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
    """Diagnostics follow the jobs (each published change) and the background scans of
    big documents (a kernel found or moved)."""
    server.jobs.hooks.changed.append(lambda job: publish(server, job.uri))
    server.hooks.kernels_found.append(lambda uri: publish(server, uri))
