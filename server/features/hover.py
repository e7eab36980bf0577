"""Feature "hover previews": hover on a kernel: the plans tried so far with their verified numbers.

Markdown in a hover works in every client, so this is the inline plan preview that does
not depend on any editor-specific UI.
"""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

from autocomp.server import render
from autocomp.server.documents import kernel_at
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)


def hover_text(ls: AutocompServer, uri: str, line: int) -> str | None:
    kernel = kernel_at(ls.kernels(uri), line=line)
    if kernel is None:
        return None
    job = ls.jobs.latest(uri, kernel.name)
    if job is not None:
        return render.hover_markdown(job)
    lines = [f"**Autocomp** · {kernel.target} kernel `{kernel.name}`"]
    session = ls.sessions.peek(uri, kernel.name)
    if session is not None and session.measurement is not None:
        lines.append(f"Last measured: {session.measurement.display()}")
    if session is not None and session.edit_note:
        lines.append(session.edit_note)
    lines.append("Use the code action *Optimize kernel* to start a search.")
    return "\n\n".join(lines)


def register(server: AutocompServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def hover(ls: AutocompServer, params: lsp.HoverParams) -> lsp.Hover | None:
        try:
            text = hover_text(ls, params.text_document.uri, params.position.line)
        except Exception:
            log.exception("hover failed")
            return None
        if text is None:
            return None
        return lsp.Hover(contents=lsp.MarkupContent(kind=_markup_kind(ls), value=text))


def _markup_kind(ls: AutocompServer) -> lsp.MarkupKind:
    """Markdown where the client renders it (VS Code, Neovim), else plain text (eglot
    without markdown-mode): the table reads well either way."""
    td = ls.client_capabilities.text_document
    formats = td.hover.content_format if td and td.hover and td.hover.content_format else None
    if formats is None or lsp.MarkupKind.Markdown in formats:
        return lsp.MarkupKind.Markdown
    return lsp.MarkupKind.PlainText
