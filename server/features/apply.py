"""Putting a candidate into the buffer, through ``workspace/applyEdit`` only.

The user's text is sacred (DESIGN principle 7): where the candidate goes is decided by the
one re-anchoring rule (:mod:`autocomp.anchor`, shared with the CLI's ``--write``): the
kernel's old lines, else where that exact text moved to, else (the user edited inside the
kernel) a line-based merge that keeps the user's edit; when the edit and the candidate touch
the same lines nothing is touched and the message says which lines collide. The edit carries the document version, so a client holding newer text
refuses it rather than overwriting a keystroke; one edit, so the editor's undo reverts it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from lsprotocol import types as lsp

from autocomp import events as ev
from autocomp.anchor import Conflict, find_moved, place
from autocomp.model import Verdict
from autocomp.server import render
from autocomp.server.features import diagnostics
from autocomp.server.jobs import CandidateInfo, Job
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


def _workspace_edit(ls: AutocompServer, uri: str, version: int | None, edit: lsp.TextEdit) -> lsp.WorkspaceEdit:
    if ls.supports_document_changes:
        return lsp.WorkspaceEdit(
            document_changes=[
                lsp.TextDocumentEdit(
                    text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=[edit]
                )
            ]
        )
    return lsp.WorkspaceEdit(changes={uri: [edit]})


async def _newer_text(ls: AutocompServer, uri: str, version: int | None) -> None:
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
    ls: AutocompServer, job: Job, original: str, start: int, new_code: str, label: str, merge: bool
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


async def apply_candidate(ls: AutocompServer, job: Job, info: CandidateInfo, merge: bool = True) -> tuple[bool, str]:
    """Send the edit for ``info``; (applied, message). ``merge=False`` (the automatic
    apply) writes only the exact code that was evaluated: never a merge with the user's
    own edits inside the kernel."""
    sync_applied(ls, job.uri)  # an undo since the last apply puts the old kernel back as the anchor
    label = f"Autocomp: {info.candidate.plan_summary()[:60]} ({render.fmt_speedup(info.speedup)})"
    applied, message, anchor, written, replaced = await replace_kernel(
        ls, job, job.original_code, job.start_line, info.candidate.code, label, merge
    )
    if applied and anchor is not None:
        # Re-anchor the job on the text now in the buffer, so a later apply of another
        # candidate of this job replaces this one, and Revert/undo can be recognised.
        if not job.applied:  # a second candidate over the first: Revert still goes to the original
            job.pre_apply_code = replaced
        job.original_code = written
        job.start_line = anchor.start
        job.end_line = anchor.start + len(written.splitlines(keepends=True))
        job.applied_candidate_id = info.candidate.id
    return applied, message


def sync_applied(ls: AutocompServer, uri: str) -> list[Job]:
    """Notice an undo (or any edit) that took an applied candidate back out of the buffer:
    when the text it replaced stands where it was, the job offers the candidate again
    ("candidate available"). Returns the jobs that changed state."""
    changed: list[Job] = []
    for job in ls.jobs.for_uri(uri):
        if not job.applied or not job.pre_apply_code:
            continue
        current = ls.document_text(uri)
        if current is None:
            continue
        text = current[0]
        if find_moved(text, job.original_code, job.start_line) is not None:
            continue  # the candidate is still there
        at = find_moved(text, job.pre_apply_code, job.start_line)
        if at is None:
            continue  # edited by the user: it stays "applied", and Revert names the conflict
        _un_apply(job, at)
        if job.baseline is not None and job.baseline.metric is not None:
            ls.measurements[job.key] = job.baseline.metric
        changed.append(job)
    return changed


def _un_apply(job: Job, at: int) -> None:
    job.applied = False
    job.original_code = job.pre_apply_code
    job.start_line = at
    job.end_line = at + len(job.pre_apply_code.splitlines(keepends=True))
    job.pre_apply_code = ""
    job.applied_candidate_id = None


async def revert(ls: AutocompServer, job: Job) -> dict[str, object]:
    """``autocomp.revert``: put back the kernel an apply replaced (re-anchored like any
    apply); the job then offers its candidate again."""
    sync_applied(ls, job.uri)
    if not job.applied or not job.pre_apply_code:
        return {"reverted": False, "message": f"nothing of {job.id} is applied in {job.kernel}; nothing to revert"}
    label = f"Autocomp: revert {job.kernel}"
    applied, message, anchor, written, _replaced = await replace_kernel(
        ls, job, job.original_code, job.start_line, job.pre_apply_code, label, merge=True
    )
    if not applied or anchor is None:
        message = message.replace("apply again", "revert again")
        ls.show(f"Autocomp: could not revert {job.kernel}: {message}", lsp.MessageType.Warning)
        return {"reverted": False, "message": message}
    job.pre_apply_code = written
    _un_apply(job, anchor.start)
    if job.baseline is not None and job.baseline.metric is not None:
        ls.measurements[job.key] = job.baseline.metric
    published_changes(ls, job)
    info = job.candidate(job.best_candidate_id or "")
    speed = render.fmt_speedup(info.speedup) if info else ""
    message = f"Autocomp: reverted {job.kernel} to the original kernel; the {speed} candidate is still available."
    ls.show(message)
    return {"reverted": True, "message": message}


def published_changes(ls: AutocompServer, job: Job) -> None:
    """Tell the client a job's apply state changed: diagnostics, status, lenses."""
    diagnostics.publish(ls, job.uri)
    ls.notify_status(job.status())
    ls.refresh_lenses()


def _after_apply(ls: AutocompServer, job: Job, info: CandidateInfo) -> None:
    """Record the new kernel as measured (its lens shows the new metric)."""
    job.applied = True
    if info.metric is not None:
        ls.measurements[job.key] = info.metric
    ls.edit_notes.pop(job.key, None)


def _applied_message(job: Job, info: CandidateInfo) -> str:
    base = job.baseline.metric if job.baseline else None
    new = info.metric
    numbers = f"{base.display()} → {new.display()}" if base and new else "metric unavailable"
    replay = " (LLM replies replayed from a recorded session)" if job.replay else ""
    return (
        f"Autocomp rewrote {job.kernel}: {render.fmt_speedup(info.speedup)} faster, {numbers}{replay}. "
        f"Undo in the editor, or the lens 'Revert', reverts it."
    )


async def finish(ls: AutocompServer, job: Job, event: ev.RunFinished) -> None:
    """Decide what a finished run does to the buffer, and tell the user."""
    if job.superseded:
        return
    best = job.candidate(job.best_candidate_id) if job.best_candidate_id else None
    min_speedup = ls.settings.min_speedup
    if best is None or best.candidate.parent is None or best.speedup is None:
        ls.show(f"Autocomp: no faster correct version of {job.kernel} found ({event.reason}).")
        return
    if best.candidate.verdict is not Verdict.CORRECT:
        ls.show(f"Autocomp: the best candidate for {job.kernel} is {best.candidate.verdict.value}; not applied.")
        return
    if best.speedup < min_speedup:
        ls.show(
            f"Autocomp: best candidate for {job.kernel} is {render.fmt_speedup(best.speedup)}, below "
            f"autocomp.minSpeedup {min_speedup:g}; not applied."
        )
        return
    offer = f"Use the code action 'Apply this candidate ({render.fmt_speedup(best.speedup)})' on {job.kernel} to apply it."
    if not event.confirmed and not ls.settings.accept_unconfirmed:
        ls.show(
            f"Autocomp: {render.fmt_speedup(best.speedup)} for {job.kernel} comes from "
            f"'{job.tier or 'an estimate'}', which cannot confirm a speedup on this machine, so nothing was applied "
            f"automatically (set autocomp.acceptUnconfirmed to allow it). {offer}",
            lsp.MessageType.Warning,
        )
        return
    if event.reason == "cancelled":
        ls.show(f"Autocomp: stopped; best so far for {job.kernel} is {render.fmt_speedup(best.speedup)}. {offer}")
        return
    if ls.settings.auto_apply != "always":  # "preview" / "never": nothing changes until the user accepts
        ls.show(f"Autocomp: found {render.fmt_speedup(best.speedup)} for {job.kernel} (autocomp.autoApply is {ls.settings.auto_apply!r}). {offer}")
        return
    applied, message = await apply_candidate(ls, job, best, merge=False)
    if applied:
        _after_apply(ls, job, best)
        published_changes(ls, job)
        ls.show(_applied_message(job, best))
    else:
        ls.show(f"Autocomp: {render.fmt_speedup(best.speedup)} found for {job.kernel}, but {message}.", lsp.MessageType.Warning)


async def apply_command(ls: AutocompServer, job: Job, info: CandidateInfo) -> dict[str, object]:
    """``autocomp.applyCandidate``: apply a candidate the user picked."""
    verdict = info.candidate.verdict
    if verdict.correct is False:
        return {"applied": False, "message": f"candidate {info.candidate.id} is {verdict.value}; refusing to apply it"}
    if info.candidate.parent is None:
        return {"applied": False, "message": "that is the starting kernel; nothing to apply"}
    applied, message = await apply_candidate(ls, job, info)
    if not applied:
        ls.show(f"Autocomp: {message}", lsp.MessageType.Warning)
        return {"applied": False, "message": message}
    _after_apply(ls, job, info)
    published_changes(ls, job)
    merged = message.startswith("merged")
    message = _applied_message(job, info)
    if merged:
        message += " It was merged with your own edit of the kernel; the merged kernel was not evaluated (save to measure it)."
    if verdict is not Verdict.CORRECT or not job.confirmed:
        message += f" Note: correctness/speed here rest on '{job.tier or verdict.value}', not a confirming evaluator."
    ls.show(message)
    return {"applied": True, "message": message}


def register(server: AutocompServer) -> None:
    """Applying is reached through commands (see commands.py) and finished jobs."""
