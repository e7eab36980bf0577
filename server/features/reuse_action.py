"""Feature "Optimize like <kernel>": code actions: start a search by reusing the schedule of a
similar finished run (autocomp.schedules), one action per similar run, most similar first.

Before: a cursor in ``gemm`` of a 512x512 GEMM file, and a finished run on a 64x64 GEMM in
the store. After: the code actions offer, next to "Optimize kernel gemm (Autocomp)",
``Optimize like gemm (gemm_64.c, 4.44x, similarity 0.79)``; choosing it runs the command
``autocomp.optimizeLike {uri, kernel, line, run}``, which starts a job whose search first
re-implements that run's plans on this kernel and says which run it reuses and why.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from autocomp.backends.base import BackendError
from autocomp.server import params
from autocomp.server.documents import INLINE_BYTES, DetectedKernel
from autocomp.server.features import optimize_action
from autocomp.server.jobs import runner
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)

COMMAND = "autocomp.optimizeLike"
MAX_ACTIONS = 3
SIMILAR_TTL = 5.0  # code actions come with every cursor move: a big document's store scan is cached


def code_actions(ls: AutocompServer, params_: lsp.CodeActionParams, detected: DetectedKernel | None) -> list[lsp.CodeAction]:
    """One "Optimize like" action per similar finished run, while no job runs on the
    kernel (never raises)."""
    from autocomp.schedules import similar_runs

    uri, line = params_.text_document.uri, params_.range.start.line
    if detected is None or ls.jobs.current(uri, detected.name) is not None:
        return []
    try:
        problem = ls.documents.problem(uri, detected, ls.settings.target_settings(detected.target))
        if problem is None:  # a big document's is still being built, off the loop
            return []
        session = ls.sessions.kernel(uri, detected.name)
        cached = session.similar
        now = time.monotonic()
        big = len((ls.document_text(uri) or ("", None))[0]) > INLINE_BYTES
        if big and cached is not None and cached[0] is problem and now - cached[1] < SIMILAR_TTL:
            matches = cached[2]
        else:  # for a big document, the store is scanned at most every SIMILAR_TTL s
            matches = similar_runs(ls.store(), problem)[:MAX_ACTIONS]
            session.similar = (problem, now, matches)
    except Exception:  # an unreadable store or an odd kernel: no reuse actions, nothing else lost
        log.debug("similar runs unavailable", exc_info=True)
        return []
    actions = []
    for m in matches:
        gain = f", {m.speedup:.2f}x" if m.speedup else ""
        title = f"Optimize like {m.kernel} ({os.path.basename(m.path)}{gain}, similarity {m.score:.2f})"
        args = {"uri": uri, "kernel": detected.name, "line": line, "run": m.run_id}
        actions.append(
            lsp.CodeAction(
                title=title,
                kind=lsp.CodeActionKind.RefactorRewrite,
                command=lsp.Command(title=title, command=COMMAND, arguments=[args]),
            )
        )
    return actions


async def optimize_like(ls: AutocompServer, uri: str, line: int | None, kernel: str | None, run: str) -> dict[str, Any]:
    """Start a job that reuses run ``run``'s schedule. Building the problem (a parse of the
    whole file, in the detection process for a big one) and reading the store run off the
    event loop: on a 2 MB file they take longer than any request may wait."""
    from autocomp.schedules import ReuseError, resolve_reuse

    detected = optimize_action.find_kernel(ls, uri, line, kernel)
    running = ls.jobs.current(uri, detected.name)
    if running is not None:
        return {"jobId": running.id, "alreadyRunning": True}
    text, _version = ls.document_text(uri) or ("", None)  # a snapshot, taken on the loop
    store = ls.store()
    try:
        problem = await ls.documents.make_problem(uri, detected, text, ls.settings.target_settings(detected.target))
        choice = await asyncio.to_thread(resolve_reuse, store, problem, run)
    except (ReuseError, BackendError) as exc:
        raise JsonRpcInvalidParams(f"{COMMAND}: {exc}") from exc
    assert choice is not None
    if ls.jobs.current(uri, detected.name) is not None:  # started meanwhile from elsewhere
        return {"jobId": ls.jobs.current(uri, detected.name).id, "alreadyRunning": True}
    job = runner.start(ls, uri, detected, reuse=choice.to_json())
    ls.show(f"Autocomp: {choice.reason}", lsp.MessageType.Info)
    return {"jobId": job.id, "reuse": {"source": choice.source, "plans": len(choice.plans), "reason": choice.reason}}


def register(server: AutocompServer) -> None:
    server.hooks.code_actions.append((lsp.CodeActionKind.RefactorRewrite, code_actions))

    @server.command(COMMAND)
    async def command(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        obj = params.one_object(COMMAND, args, "{uri, run, line?, kernel?}")
        uri, run = obj.get("uri"), obj.get("run")
        if not isinstance(uri, str) or not uri:
            raise JsonRpcInvalidParams(f"{COMMAND}: 'uri' must be a non-empty string, got {uri!r}")
        if not isinstance(run, str) or not run:
            raise JsonRpcInvalidParams(f"{COMMAND}: 'run' must be a run id (see `autocomp runs`), got {run!r}")
        line = obj.get("line")
        if line is not None and (isinstance(line, bool) or not isinstance(line, int) or line < 0):
            raise JsonRpcInvalidParams(f"{COMMAND}: 'line' must be a 0-based line number, got {line!r}")
        kernel = obj.get("kernel") if isinstance(obj.get("kernel"), str) else None
        return await optimize_like(ls, uri, line, kernel, run)
