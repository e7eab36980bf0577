"""Feature "Tune constants": the code action and the command ``autocomp.tune`` that tune a
kernel's constants (tile sizes, unroll factors, launch shapes: whatever the target's
``tunables()`` finds) with the evaluator alone, no LLM.

A tuning is a job of kind ``tune`` (:mod:`autocomp.server.jobs.runner`): the same
progress, status lens, candidate diagnostics, and the same apply step as "Optimize
kernel": a confirmed faster configuration is applied under ``autocomp.autoApply:
"always"``, offered as "Apply 1.31x · Diff" under ``"preview"`` and ``"never"``, and an
unconfirmed one (an estimate) is only offered.

Before: a cursor in ``gemm`` whose file has ``#define TI 2`` and ``#define TJ 2``. The
code actions offer "Tune constants of gemm: TI, TJ (Autocomp)"; choosing it runs
``autocomp.tune {uri, line, kernel}``, which returns the job id at once; the lens counts
"tuning: 4/9 configurations · best 1.31x" and, when the job ends, the best configuration
is applied or offered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams

from autocomp.server import params
from autocomp.server.documents import INLINE_BYTES, DetectedKernel
from autocomp.server.features.optimize_action import find_kernel, restart
from autocomp.server.jobs import runner
from autocomp.server.jobs.state import TUNE
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)

COMMAND = "autocomp.tune"
TUNE_KIND = lsp.CodeActionKind.RefactorRewrite
STRATEGIES = ("tpe", "grid", "random")
TUNABLES_TTL = 5.0  # seconds between lookups of a big document's tunables while it is edited


async def _names(backend: Any, problem: Any) -> list[str]:
    """The kernel's tunable constants (empty when it has none or they cannot be read)."""
    from autocomp.tuning.engine import find_space

    try:
        space = await find_space(backend, problem)
    except Exception:
        return []
    return list(space.names)


def _names_in_child(target: str, settings: dict[str, Any], problem: Any) -> list[str]:
    """Runs in the detection process, for a big document (a backend parses the file)."""
    from autocomp.backends import get_backend

    return asyncio.run(_names(get_backend(target, settings), problem))


async def tunable_names(ls: AutocompServer, uri: str, detected: DetectedKernel) -> list[str] | None:
    """The kernel's tunables for its current text, cached per problem; None while a big
    document's are still being found (off the event loop)."""
    settings = ls.settings.target_settings(detected.target)
    problem = ls.documents.problem(uri, detected, settings)
    if problem is None:
        return None
    session = ls.sessions.kernel(uri, detected.name)
    cached = session.tunables  # (problem, names or None while looked up, when)
    if cached is not None and cached[0] is problem:
        return cached[1]
    if len(problem.file_text) <= INLINE_BYTES:
        names = await _names(detected.backend, problem)
        session.tunables = (problem, names, time.monotonic())
        return names
    # A big document: looked up in the detection process, at most one lookup at a time
    # and one every TUNABLES_TTL seconds while it is being edited (the last answer stands).
    if cached is not None and (cached[1] is None or time.monotonic() - cached[2] < TUNABLES_TTL):
        return cached[1] if cached[1] is not None else (session.tunable_names or None)
    session.tunables = (problem, None, time.monotonic())

    async def look_up() -> None:
        try:
            names = await ls.documents.in_process(_names_in_child, detected.target, settings, problem)
        except Exception:
            log.debug("tunables of %s unavailable", detected.name, exc_info=True)
            names = []
        session.tunables = (problem, names, time.monotonic())
        session.tunable_names = names

    ls.jobs.spawn(look_up(), f"tunables {detected.name}")
    return session.tunable_names or None


async def code_actions(ls: AutocompServer, params_: lsp.CodeActionParams, detected: DetectedKernel | None) -> list[lsp.CodeAction]:
    """"Tune constants of <kernel>: TI, TJ (Autocomp)" on a kernel with tunables while no
    job runs on it."""
    if detected is None:
        return []
    uri = params_.text_document.uri
    if ls.jobs.current(uri, detected.name) is not None:
        return []
    names = await tunable_names(ls, uri, detected)
    if not names:
        return []
    shown = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
    title = f"Tune constants of {detected.name}: {shown} (Autocomp)"
    args = {"uri": uri, "line": params_.range.start.line, "kernel": detected.name}
    return [lsp.CodeAction(title=title, kind=TUNE_KIND, command=lsp.Command(title=title, command=COMMAND, arguments=[args]))]


def tune(ls: AutocompServer, obj: dict[str, Any]) -> dict[str, Any]:
    """``autocomp.tune {uri, line?, kernel?, restart?, budget?, strategy?, seed?}``: start a
    tuning job (or report, or restart, the job running on the kernel)."""
    uri = params.string(obj, "uri", COMMAND) or ""
    line = params.line(obj, COMMAND)
    kernel = params.string(obj, "kernel", COMMAND, required=False)
    options: dict[str, Any] = {}
    budget = obj.get("budget")
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
            raise JsonRpcInvalidParams(f"{COMMAND}: 'budget' must be a positive number of evaluations, got {budget!r}")
        options["budget"] = budget
    strategy = obj.get("strategy")
    if strategy is not None:
        if strategy not in STRATEGIES:
            raise JsonRpcInvalidParams(f"{COMMAND}: 'strategy' must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
        options["strategy"] = strategy
    seed = obj.get("seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise JsonRpcInvalidParams(f"{COMMAND}: 'seed' must be an integer, got {seed!r}")
        options["seed"] = seed
    detected = find_kernel(ls, uri, line, kernel)
    running = ls.jobs.current(uri, detected.name)
    if running is not None:
        if obj.get("restart"):
            return {"jobId": restart(ls, running, detected, options).id}
        return {"jobId": running.id, "alreadyRunning": True}
    return {"jobId": runner.start(ls, uri, detected, kind=TUNE, options=options).id}


def register(server: AutocompServer) -> None:
    server.hooks.code_actions.append((TUNE_KIND, code_actions))

    @server.command(COMMAND)
    def tune_command(ls: AutocompServer, *args: Any) -> dict[str, Any]:
        return tune(ls, params.one_object(COMMAND, args, "{uri, line?, kernel?, restart?, budget?, strategy?, seed?}"))
