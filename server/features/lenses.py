"""Feature "status lenses": code lenses on each kernel: "Optimize kernel", its measured metric, the running job's
status line with "Cancel", and the effect of the user's last saved edit.

Lenses are computed from cached detection and job state only, so they stay cheap while
searches run. Clients that support ``workspace/codeLens/refresh`` are asked to re-request
them as jobs progress; others (Neovim, eglot) see them on their next request, and the
``autocomp/jobStatus`` notification lets their configs refresh on their own.
"""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types as lsp

from autocomp.server import render
from autocomp.server.features import apply
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)

NOOP = "autocomp.noop"


def _lens(line: int, title: str, command: str = NOOP, args: dict[str, Any] | None = None) -> lsp.CodeLens:
    rng = lsp.Range(start=lsp.Position(line=line, character=0), end=lsp.Position(line=line, character=0))
    return lsp.CodeLens(range=rng, command=lsp.Command(title=title, command=command, arguments=[args or {}]))


def code_lenses(ls: AutocompServer, uri: str) -> list[lsp.CodeLens]:
    out: list[lsp.CodeLens] = []
    for kernel in ls.kernels(uri):
        line = kernel.span.start_line
        session = ls.sessions.peek(uri, kernel.name)
        job = ls.jobs.latest(uri, kernel.name)
        if job is not None and job.active:
            out.append(_lens(line, render.status_line(job)))
            out.append(_lens(line, "Cancel", "autocomp.cancel", {"jobId": job.id}))
        else:
            out.append(_lens(line, "Optimize kernel", "autocomp.optimize", {"uri": uri, "kernel": kernel.name}))
            if job is not None and not job.superseded:
                out.append(_lens(line, render.status_line(job)))
                out += [_lens(at, title, command or NOOP, args) for at, title, command, args in apply.result_lenses(job, line)]
        if session is not None and session.measurement is not None:
            out.append(_lens(line, session.measurement.display()))
        if session is not None and session.edit_note:
            out.append(_lens(line, session.edit_note))
    return out


def register(server: AutocompServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_CODE_LENS, lsp.CodeLensOptions(resolve_provider=False))
    def code_lens(ls: AutocompServer, params: lsp.CodeLensParams) -> list[lsp.CodeLens]:
        try:
            return code_lenses(ls, params.text_document.uri)
        except Exception:
            log.exception("codeLens failed")
            return []

    @server.command(NOOP)
    def noop(ls: AutocompServer, *args: Any) -> None:
        """Lenses that only show a number still need a command in some clients."""
        return None
