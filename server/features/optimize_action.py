"""The "Optimize kernel" code action and starting (or restarting) a job.

The action only names a command; running it starts a background job and returns its id at
once. One job per kernel: asking again while one runs offers a restart (a message with
buttons where the client has them), and ``restart: true`` restarts without asking.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from autocomp.backends.base import Backend, BackendError
from autocomp.server.documents import DetectedKernel, kernel_at, uri_to_path
from autocomp.server.features import diagnostics
from autocomp.server.jobs import Job
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


def fresh_backend(ls: AutocompServer, detected: DetectedKernel) -> Backend:
    """A backend instance of the job's own: it runs on the job's worker loop, and a
    backend may hold loop-bound state (semaphores, caches of tasks)."""
    from autocomp.backends import get_backend

    try:
        return get_backend(detected.target, ls.settings.target_settings(detected.target))
    except BackendError as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc


def best_plans(job: Job, limit: int = 4) -> list[str]:
    """Plans of a job's best candidates, best first: what a restart tries first."""
    return [info.candidate.plan for info in job.ranked() if info.candidate.plan][:limit]


def start_job(
    ls: AutocompServer,
    uri: str,
    detected: DetectedKernel,
    seed_plans: list[str] | None = None,
    previous: Job | None = None,
    reuse: dict[str, Any] | None = None,
) -> Job:
    """Start a job on ``detected`` in the current text of ``uri``."""
    from autocomp.server.runner import run_job

    text, _version = ls.document_text(uri) or ("", None)
    backend = fresh_backend(ls, detected)
    path = uri_to_path(uri)
    try:
        problem = backend.make_problem(path, text, function=detected.name)
    except BackendError as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc
    job = Job(
        uri=uri,
        kernel=detected.name,
        target=detected.target,
        path=path,
        original_code=problem.code,
        start_line=problem.span.start_line,
        end_line=problem.span.end_line,
        lower_is_better=backend.lower_is_better,
        seed_plans=list(seed_plans or []),
        reuse=reuse,
    )
    job.primary_metric = backend.primary_metric

    async def body(j: Job) -> None:
        if previous is not None:
            await ls.jobs.wait(previous)
        await run_job(ls, j, problem, backend)

    ls.jobs.start(job, body)
    return job


def restart(ls: AutocompServer, old: Job, detected: DetectedKernel) -> Job:
    """Stop ``old`` (its result is not applied) and start again from the current text,
    trying the best plans found so far first."""
    old.superseded = True
    ls.jobs.stop(old)
    diagnostics.publish(ls, old.uri)
    return start_job(ls, old.uri, detected, seed_plans=best_plans(old), previous=old)


async def _ask_restart(ls: AutocompServer, job: Job) -> None:
    """Offer a restart of a running job (buttons where the client supports them)."""
    restart_title, keep_title = "Restart", "Keep running"
    try:
        choice = await asyncio.wait_for(
            ls.window_show_message_request_async(
                lsp.ShowMessageRequestParams(
                    type=lsp.MessageType.Info,
                    message=f"Autocomp is already optimizing {job.kernel} ({job.id}). Restart it from the current code?",
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
    running = ls.jobs.running(uri, detected.name)
    running = [j for j in running if not j.superseded]
    if running:
        if restart_:
            return {"jobId": restart(ls, running[0], detected).id}
        ls.jobs.spawn(_ask_restart(ls, running[0]), "ask restart")
        return {"jobId": running[0].id, "alreadyRunning": True}
    return {"jobId": start_job(ls, uri, detected).id}


def _wants(context: lsp.CodeActionContext, kind: str) -> bool:
    only = context.only
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def code_actions(ls: AutocompServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
    uri = params.text_document.uri
    line = params.range.start.line
    kernels = ls.kernels(uri)
    detected = kernel_at(kernels, line=line)
    actions: list[lsp.CodeAction] = []
    if detected is not None and _wants(params.context, OPTIMIZE_KIND):
        job = next((j for j in ls.jobs.running(uri, detected.name) if not j.superseded), None)
        if job is None:
            args = {"uri": uri, "line": line, "kernel": detected.name}
            actions.append(_action(f"Optimize kernel {detected.name} (Autocomp)", OPTIMIZE_KIND, "autocomp.optimize", args))
            from autocomp.server.features import reuse_action

            actions += reuse_action.code_actions(ls, uri, detected, line)
        else:
            actions.append(_action(f"Cancel optimizing {detected.name}", OPTIMIZE_KIND, "autocomp.cancel", {"jobId": job.id}))
            args = {"uri": uri, "kernel": detected.name, "restart": True}
            actions.append(_action(f"Restart optimizing {detected.name} from the current code", OPTIMIZE_KIND, "autocomp.optimize", args))
    if _wants(params.context, lsp.CodeActionKind.QuickFix):
        actions += diagnostics.candidate_actions(ls, uri, detected, params.context)
    return actions


def _action(title: str, kind: str, command: str, args: dict[str, Any]) -> lsp.CodeAction:
    return lsp.CodeAction(title=title, kind=kind, command=lsp.Command(title=title, command=command, arguments=[args]))


def register(server: AutocompServer) -> None:
    @server.feature(
        lsp.TEXT_DOCUMENT_CODE_ACTION,
        lsp.CodeActionOptions(code_action_kinds=[OPTIMIZE_KIND, lsp.CodeActionKind.QuickFix], resolve_provider=False),
    )
    def code_action(ls: AutocompServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        try:
            return code_actions(ls, params)
        except Exception:  # a code action must never fail loudly on odd input
            log.exception("codeAction failed")
            return []
