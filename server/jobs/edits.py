"""Writing a kernel into a buffer, through ``workspace/applyEdit`` only.

The user's text is sacred (DESIGN principle 7): where the new code goes is decided by the
one re-anchoring rule (:mod:`autocomp.anchor`, shared with the CLI's ``--write``): the
kernel's old lines, else where that exact text moved to, else (the user edited inside the
kernel) a line-based merge that keeps the user's edit; when the edit and the candidate
touch the same lines nothing is touched and the message says which lines collide. The edit
carries the document version, so a client holding newer text refuses it rather than
overwriting a keystroke; one edit, so the editor's undo reverts it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lsprotocol import types as lsp

from autocomp.anchor import Conflict, find_moved, place
from autocomp.server.jobs.state import Job

if TYPE_CHECKING:
    from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Anchor:
    """Lines ``[start, end)`` of the current text that hold the job's original kernel."""

    start: int
    end: int


def locate(text: str, original: str, start: int, end: int) -> Anchor | None:
    """Rules 1–2 of the one re-anchoring rule (:mod:`autocomp.anchor`): the original
    kernel at its old lines, else at the whole-line occurrence nearest its old place."""
    at = find_moved(text, original, start)
    if at is None:
        return None
    return Anchor(at, at + len(original.splitlines(keepends=True)))


def _utf16_len(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def edit_for(text: str, anchor: Anchor, new_code: str) -> lsp.TextEdit:
    """A TextEdit replacing whole lines ``anchor`` with ``new_code``, keeping whether the
    replaced block ended with a newline (the last line of a file may not)."""
    lines = text.splitlines(keepends=True)
    old = "".join(lines[anchor.start : anchor.end])
    if old.endswith("\n") and not new_code.endswith("\n"):
        new_code += "\n"
    elif not old.endswith("\n") and new_code.endswith("\n"):
        new_code = new_code.rstrip("\r\n")
    if anchor.end < len(lines) or text.endswith("\n"):
        end = lsp.Position(line=anchor.end, character=0)
    else:
        last = lines[-1].rstrip("\r\n")
        end = lsp.Position(line=len(lines) - 1, character=_utf16_len(last))
    return lsp.TextEdit(range=lsp.Range(start=lsp.Position(line=anchor.start, character=0), end=end), new_text=new_code)


VERSION_WAIT = 2.0  # seconds to wait for the client's newer text after a version refusal


def _workspace_edit(ls: "AutocompServer", uri: str, version: int | None, edit: lsp.TextEdit) -> lsp.WorkspaceEdit:
    if ls.supports_document_changes:
        return lsp.WorkspaceEdit(
            document_changes=[
                lsp.TextDocumentEdit(
                    text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=[edit]
                )
            ]
        )
    return lsp.WorkspaceEdit(changes={uri: [edit]})


async def _newer_text(ls: "AutocompServer", uri: str, version: int | None) -> None:
    """After the client refused an edit for its version, wait (briefly) until its newer
    text has reached us: eglot, for one, answers the refusal before it sends the change."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + VERSION_WAIT
    while loop.time() < deadline:
        current = ls.document_text(uri)
        if current is None or current[1] != version:
            return
        await asyncio.sleep(0.05)


async def replace_kernel(
    ls: "AutocompServer", job: Job, original: str, start: int, new_code: str, label: str, merge: bool
) -> tuple[bool, str, Anchor | None, str, str]:
    """Write ``new_code`` where ``original`` was (line ``start`` of the job's document),
    placed by the one re-anchoring rule, as one versioned ``workspace/applyEdit``.

    Returns (applied, message, where it went, the text written, the text it replaced). When the client refuses
    the edit (its text moved on between our read and its apply: a version mismatch, as
    VS Code reports with ``applied: false`` and eglot with an error), the placement is
    recomputed against the client's current text and sent once more; a second refusal is
    reported."""
    reason = "refused by the editor"
    for _attempt in range(2):
        current = ls.document_text(job.uri)
        if current is None:
            return False, f"{job.uri} is not open; open it and try again", None, "", ""
        text, version = current
        current_kernel = next((k for k in ls.kernels(job.uri) if k.name == job.kernel), None) if merge else None
        try:
            placement = place(
                text, original, start, new_code,
                current=(current_kernel.span.start_line, current_kernel.span.end_line) if current_kernel else None,
                name=f"the kernel {job.kernel}",
            )
        except Conflict as exc:
            if not merge:
                return False, (
                    f"the kernel {job.kernel} was edited while Autocomp was optimizing it, so the buffer was not "
                    f"touched; use the code action 'Apply this candidate' to merge it with your edit"
                ), None, "", ""
            return False, f"{exc}, so the buffer was not touched; undo or reconcile your edit and apply again", None, "", ""
        anchor = Anchor(placement.start, placement.end)
        edit = edit_for(text, anchor, placement.text)
        params = lsp.ApplyWorkspaceEditParams(edit=_workspace_edit(ls, job.uri, version, edit), label=label)
        try:
            result = await ls.workspace_apply_edit_async(params)
        except Exception as exc:  # eglot answers a version mismatch with an error
            result, reason = None, str(exc) or type(exc).__name__
        else:
            if result is not None and result.applied:
                merged = "merged with your edit (the merged kernel was not evaluated; save to measure it)"
                old = "".join(text.splitlines(keepends=True)[anchor.start : anchor.end])
                return True, merged if placement.merged else "applied", anchor, edit.new_text, old
            reason = (result.failure_reason if result is not None else None) or "refused by the editor"
        log.info("applyEdit refused (%s); re-anchoring on the current text and retrying once", reason)
        await _newer_text(ls, job.uri, version)
    return False, f"the editor refused the edit ({reason})", None, "", ""


