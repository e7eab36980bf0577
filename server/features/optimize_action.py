"""Feature "Optimize kernel": the code actions (Optimize / Cancel / Restart), the commands
``autocomp.optimize`` and ``autocomp.cancel``, and restarting a running job.

The action only names a command; running it starts a background job (the jobs layer's
runner) and returns its id at once. One job per kernel: asking again while one runs offers
a restart (a message with buttons where the client has them), and ``restart: true``
restarts without asking.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from autocomp.server import params
from autocomp.server.documents import DetectedKernel, kernel_at
from autocomp.server.jobs import runner
from autocomp.server.jobs.publish import changed
from autocomp.server.jobs.state import OPTIMIZE, TUNE, Job
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)

OPTIMIZE_KIND = lsp.CodeActionKind.RefactorRewrite


def find_kernel(ls: AutocompServer, uri: str, line: int | None, kernel: str | None) -> DetectedKernel:
    """The kernel a request means, or an InvalidParams error saying what to do."""
    if ls.document_text(uri) is None:
        raise JsonRpcInvalidParams(f"{uri} is not open in the editor; open it first")
    kernels = ls.kernels(uri)
    if not kernels:
        raise JsonRpcInvalidParams(f"no kernel found in {uri} for the enabled targets ({', '.join(ls.settings.targets)})")
    found = kernel_at(kernels, line, kernel)
    if found is None:
        names = ", ".join(k.name for k in kernels)
        where = f"named {kernel!r}" if kernel else (f"at line {line + 1}" if line is not None else "chosen")
        raise JsonRpcInvalidParams(f"no kernel {where} in {uri}; kernels here: {names}")
    return found


def best_plans(job: Job, limit: int = 4) -> list[str]:
    """Plans of a job's best candidates, best first: what a restart tries first."""
    return [info.candidate.plan for info in job.ranked() if info.candidate.plan][:limit]


def restart(ls: AutocompServer, old: Job, detected: DetectedKernel, options: dict[str, Any] | None = None) -> Job:
    """Stop ``old`` (its result is not applied) and start again from the current text,
    trying the best plans found so far first (a tuning starts over, with the budget,
    strategy and seed it was started with unless ``options`` overrides them)."""
    old.supersede()
    ls.jobs.stop(old)
    changed(ls, old)
    seeds = best_plans(old) if old.kind == OPTIMIZE else []
    return runner.start(ls, old.uri, detected, kind=old.kind, seed_plans=seeds, previous=old,
                        options={**old.options, **(options or {})})


async def _ask_restart(ls: AutocompServer, job: Job) -> None:
    """Offer a restart of a running job (buttons where the client supports them)."""
    restart_title, keep_title = "Restart", "Keep running"
    try:
        choice = await asyncio.wait_for(
            ls.window_show_message_request_async(
                lsp.ShowMessageRequestParams(
                    type=lsp.MessageType.Info,
                    message=f"Autocomp is already {job.verb} {job.kernel} ({job.id}). Restart it from the current code?",
                    actions=[lsp.MessageActionItem(title=restart_title), lsp.MessageActionItem(title=keep_title)],
                )
            ),
            timeout=300.0,
        )
    except Exception as exc:  # clients without message requests: the lens/action offers restart
        log.info("showMessageRequest failed: %s", exc)
        return
    if choice is not None and getattr(choice, "title", None) == restart_title and job.active:
        detected = next((k for k in ls.kernels(job.uri) if k.name == job.kernel), None)
        if detected is not None:
            restart(ls, job, detected)


def optimize(ls: AutocompServer, uri: str, line: int | None, kernel: str | None, restart_: bool) -> dict[str, Any]:
    """``autocomp.optimize``: start, restart, or report the running job."""
    detected = find_kernel(ls, uri, line, kernel)
    running = ls.jobs.current(uri, detected.name)
    if running is not None:
        if restart_:
            return {"jobId": restart(ls, running, detected).id}
        ls.jobs.spawn(_ask_restart(ls, running), "ask restart")
        return {"jobId": running.id, "alreadyRunning": True}
    return {"jobId": runner.start(ls, uri, detected).id}


def cancel(ls: AutocompServer, obj: dict[str, Any]) -> dict[str, Any]:
    """``autocomp.cancel``: stop a job by id, the jobs of a document or kernel, or all."""
    if obj.get("jobId") is not None:
        job = ls.jobs.get(str(obj["jobId"]))
        jobs = [job] if job is not None else []
    elif obj.get("uri") is not None:
        jobs = ls.jobs.running(str(obj["uri"]), obj.get("kernel"))
    else:
        jobs = ls.jobs.running()
    cancelled = False
    for job in jobs:
        cancelled = ls.jobs.stop(job) or cancelled
        if cancelled:
            ls.notify_status(job.status())
    ls.refresh_lenses()
    return {"cancelled": cancelled}


def action(title: str, kind: str, command: str, args: dict[str, Any]) -> lsp.CodeAction:
    return lsp.CodeAction(title=title, kind=kind, command=lsp.Command(title=title, command=command, arguments=[args]))


def code_actions(ls: AutocompServer, params_: lsp.CodeActionParams, detected: DetectedKernel | None) -> list[lsp.CodeAction]:
    if detected is None:
        return []
    uri = params_.text_document.uri
    job = ls.jobs.current(uri, detected.name)
    if job is None:
        args = {"uri": uri, "line": params_.range.start.line, "kernel": detected.name}
        return [action(f"Optimize kernel {detected.name} (Autocomp)", OPTIMIZE_KIND, "autocomp.optimize", args)]
    verb = "tuning" if job.kind == TUNE else "optimizing"
    command = "autocomp.tune" if job.kind == TUNE else "autocomp.optimize"
    return [
        action(f"Cancel {verb} {detected.name}", OPTIMIZE_KIND, "autocomp.cancel", {"jobId": job.id}),
        action(f"Restart {verb} {detected.name} from the current code", OPTIMIZE_KIND, command,
               {"uri": uri, "kernel": detected.name, "restart": True}),
    ]


def register(server: AutocompServer) -> None:
    server.hooks.code_actions.append((OPTIMIZE_KIND, code_actions))

    @server.command("autocomp.optimize")
    def optimize_command(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = params.one_object("autocomp.optimize", args, "{uri, line?, kernel?, restart?}")
        uri = params.string(obj, "uri", "autocomp.optimize")
        line = params.line(obj, "autocomp.optimize")
        kernel = params.string(obj, "kernel", "autocomp.optimize", required=False)
        return optimize(ls, uri or "", line, kernel, bool(obj.get("restart", False)))

    @server.command("autocomp.cancel")
    def cancel_command(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        return cancel(ls, params.one_object("autocomp.cancel", args, "{jobId?} or {uri, kernel?}"))
