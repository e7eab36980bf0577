"""Feature "apply a candidate": everything that puts a job's candidate into the buffer,
shows it, or takes it back out.

- the quick-fix code actions "Apply this candidate (2.10x)" and "Show diff" on a kernel's
  candidate diagnostics (or its best candidate);
- the commands ``autocomp.applyCandidate``, ``autocomp.revert`` and ``autocomp.showDiff``;
- the automatic apply when a run finishes (``autocomp.autoApply``: ``always`` applies a
  confirmed faster kernel, ``preview`` and ``never`` only offer it);
- the result lenses "Applied 8.61x · Diff · Revert" / "Apply 8.61x · Diff";
- noticing an undo that takes an applied candidate back out (the job offers it again).

The edit itself goes through :func:`autocomp.server.jobs.edits.replace_kernel` (the one
re-anchoring rule, one versioned ``workspace/applyEdit``); what was applied is recorded in
the job by its one writer (:meth:`Job.record_apply`, :meth:`Job.un_apply`).

Before: a finished job on ``gemm`` with a 2.10x candidate, ``autoApply: "preview"``.
After the lens "Apply 2.10x": the kernel's lines hold the candidate (one undoable edit),
the lens reads "Applied 2.10x · Diff · Revert" and the kernel's metric lens the new number.
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from autocomp import events as ev
from autocomp.anchor import find_moved
from autocomp.model import Verdict
from autocomp.run import unified_diff
from autocomp.server import params, render
from autocomp.server.documents import DetectedKernel
from autocomp.server.jobs.edits import Anchor, edit_for, locate, replace_kernel
from autocomp.server.jobs.publish import changed
from autocomp.server.jobs.state import CandidateInfo, Job
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)

__all__ = ["Anchor", "edit_for", "locate", "apply_candidate", "apply_command", "finish", "revert", "sync_applied"]


# -- applying ------------------------------------------------------------------------------
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
        job.record_apply(anchor.start, written, replaced, info.candidate.id)
        session = ls.sessions.kernel(job.uri, job.kernel)
        if info.metric is not None:  # the kernel's lens shows the new metric
            session.measurement = info.metric
        session.edit_note = ""
    return applied, message


def sync_applied(ls: AutocompServer, uri: str) -> list[Job]:
    """Notice an undo (or any edit) that took an applied candidate back out of the buffer:
    when the text it replaced stands where it was, the job offers the candidate again
    ("candidate available"). Returns the jobs that changed state."""
    out: list[Job] = []
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
        job.un_apply(at)
        _measured_baseline(ls, job)
        out.append(job)
    return out


def _measured_baseline(ls: AutocompServer, job: Job) -> None:
    if job.baseline is not None and job.baseline.metric is not None:
        ls.sessions.kernel(job.uri, job.kernel).measurement = job.baseline.metric


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
    job.un_apply(anchor.start, restored=written)
    _measured_baseline(ls, job)
    changed(ls, job)
    info = job.candidate(job.best_candidate_id or "")
    speed = render.fmt_speedup(info.speedup) if info else ""
    message = f"Autocomp: reverted {job.kernel} to the original kernel; the {speed} candidate is still available."
    ls.show(message)
    return {"reverted": True, "message": message}


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
    """Decide what a finished run does to the buffer, and tell the user (a ``finished``
    hook of the jobs layer)."""
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
        changed(ls, job)
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
    changed(ls, job)
    merged = message.startswith("merged")
    message = _applied_message(job, info)
    if merged:
        message += " It was merged with your own edit of the kernel; the merged kernel was not evaluated (save to measure it)."
    if verdict is not Verdict.CORRECT or not job.confirmed:
        message += f" Note: correctness/speed here rest on '{job.tier or verdict.value}', not a confirming evaluator."
    ls.show(message)
    return {"applied": True, "message": message}


# -- diffs ---------------------------------------------------------------------------------
def diff(job: Job, info: CandidateInfo) -> dict[str, Any]:
    original = job.baseline.candidate.code if job.baseline else job.original_code
    candidate = info.candidate.code
    title = f"{job.kernel}: {info.candidate.plan_summary()[:60]} ({render.fmt_speedup(info.speedup)})"
    unified = unified_diff(original, candidate, f"{job.kernel} (original)", f"{job.kernel} ({info.candidate.id})")
    return {"title": title, "original": original, "candidate": candidate, "unifiedDiff": unified}


async def _show_diff_in_editor(ls: AutocompServer, result: dict[str, Any], job: Job, info: CandidateInfo) -> None:
    """For clients without a diff view: open the unified diff as a document where the
    client can show documents, else put it in a message. VS Code renders the returned
    texts in its own diff view, so it gets neither."""
    if "visual studio code" in ls.client_name.lower() or "code-server" in ls.client_name.lower():
        return
    text = f"# {result['title']}\n" + (result["unifiedDiff"] or "(no difference)\n")
    if ls.supports_show_document:
        folder = os.path.join(tempfile.gettempdir(), f"autocomp-diffs-{os.getuid()}")
        os.makedirs(folder, mode=0o700, exist_ok=True)
        path = os.path.join(folder, f"{job.id}-{info.candidate.id}.diff")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        uri = "file://" + path
        try:
            shown = await ls.window_show_document_async(lsp.ShowDocumentParams(uri=uri, take_focus=True))
            if shown is not None and shown.success:
                return
        except Exception as exc:
            log.info("showDocument failed: %s", exc)
    ls.show(text)


def job_and_candidate(ls: AutocompServer, obj: dict[str, Any], name: str) -> tuple[Job, CandidateInfo]:
    job_id = params.string(obj, "jobId", name)
    cand_id = params.string(obj, "candidateId", name)
    job = ls.jobs.get(job_id or "")
    if job is None:
        raise JsonRpcInvalidParams(f"{name}: no job {job_id!r} (see autocomp/jobs for the known ones)")
    info = job.candidate(cand_id or "")
    if info is None:
        raise JsonRpcInvalidParams(f"{name}: job {job_id} has no candidate {cand_id!r}")
    return job, info


# -- lenses and code actions ---------------------------------------------------------------
def result_lenses(job: Job, line: int) -> list[tuple[int, str, str, dict[str, Any]]]:
    """What a finished job left, as (line, title, command, arguments): "Applied 8.61x ·
    Diff · Revert" while its candidate is in the buffer; "Apply 8.61x · Diff" while one is
    available (autoApply "preview"/"never", a cancelled or unconfirmed run, or after an
    undo or Revert)."""
    if job.applied and job.applied_candidate_id:
        info = job.candidate(job.applied_candidate_id)
        args = {"jobId": job.id, "candidateId": job.applied_candidate_id}
        return [
            (line, f"Applied {render.fmt_speedup(info.speedup if info else None)}", "", {}),
            (line, "Diff", "autocomp.showDiff", args),
            (line, "Revert", "autocomp.revert", {"jobId": job.id}),
        ]
    info = render.offered(job)
    if info is None:
        return []
    args = {"jobId": job.id, "candidateId": info.candidate.id}
    return [
        (line, f"Apply {render.fmt_speedup(info.speedup)}", "autocomp.applyCandidate", args),
        (line, "Diff", "autocomp.showDiff", args),
    ]


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


def code_actions(ls: AutocompServer, params_: lsp.CodeActionParams, kernel: DetectedKernel | None) -> list[lsp.CodeAction]:
    """"Apply this candidate (2.10x)" and "Show diff" for candidates under the cursor
    (from the request's diagnostics, else the best of the kernel's latest unapplied job)."""
    uri = params_.text_document.uri
    refs = _candidate_refs(ls, uri, params_.context)
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


def _document_changed(ls: AutocompServer, uri: str) -> None:
    """An undo that takes an applied candidate back out: the job offers it again."""
    if any(j.applied for j in ls.jobs.for_uri(uri)):
        for job in sync_applied(ls, uri):
            changed(ls, job)


def register(server: AutocompServer) -> None:
    server.hooks.code_actions.append((lsp.CodeActionKind.QuickFix, code_actions))
    server.hooks.changed.append(lambda uri: _document_changed(server, uri))

    async def on_finished(job: Job, event: Any) -> None:
        await finish(server, job, event)

    server.jobs.hooks.finished.append(on_finished)

    @server.command("autocomp.applyCandidate")
    async def apply_candidate_command(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = params.one_object("autocomp.applyCandidate", args, "{jobId, candidateId}")
        job, info = job_and_candidate(ls, obj, "autocomp.applyCandidate")
        return await apply_command(ls, job, info)

    @server.command("autocomp.revert")
    async def revert_command(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = params.one_object("autocomp.revert", args, "{jobId}")
        job_id = params.string(obj, "jobId", "autocomp.revert")
        job = ls.jobs.get(job_id or "")
        if job is None:
            raise JsonRpcInvalidParams(f"autocomp.revert: no job {job_id!r} (see autocomp/jobs for the known ones)")
        return await revert(ls, job)

    @server.command("autocomp.showDiff")
    async def show_diff(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = params.one_object("autocomp.showDiff", args, "{jobId, candidateId}")
        job, info = job_and_candidate(ls, obj, "autocomp.showDiff")
        result = diff(job, info)
        ls.jobs.spawn(_show_diff_in_editor(ls, result, job, info), "show diff")
        return result
