"""Feature "tuning on save": on save, measure the user's edit of a kernel against the version
saved before it. Saves are debounced (an autosave burst is measured once), saves that leave
a kernel's text unchanged measure nothing, and a save never cancels a running search: the
measurement is queued until the search ends (the user restarts from the edit explicitly).

The saved-before text is the oracle, so the lens says both whether the edit still computes
the same thing and how its speed compares ("your edit: 0.93x vs before"). The evaluation
runs as a tracked background task; its results land in the store's cache, which the
restarted search reuses.
"""

from __future__ import annotations

import asyncio
import logging
import threading

from lsprotocol import types as lsp

from autocomp.model import Verdict
from autocomp.server import render
from autocomp.server.documents import INLINE_BYTES, DetectedKernel
from autocomp.server.jobs.worker import EvaluationProcess, run_in_thread
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)


async def measure_edit(ls: AutocompServer, uri: str, kernel: DetectedKernel, before: str, new_code: str) -> None:
    """Compare the edited kernel with the saved-before one (the oracle), through the
    engine's front door (:func:`autocomp.run.compare`)."""
    from autocomp.run import compare

    session = ls.sessions.kernel(uri, kernel.name)  # detached once the document closes
    session.edit_note = "your edit: measuring…"
    ls.refresh_lenses()
    target_settings = ls.settings.target_settings(kernel.target)
    try:
        problem = await ls.documents.make_problem(uri, kernel, before, target_settings)
        store = ls.store()

        # A big document's evaluations run in an evaluation process: a backend's checks
        # parse the whole file, which would hold the server's interpreter for seconds.
        executor = EvaluationProcess() if len(before) > INLINE_BYTES and ls.settings.executor in ("", "local", None) else None

        async def evaluate():
            from autocomp.backends import get_backend

            # A backend of its own, built on the worker thread (it may hold loop-bound state).
            backend = get_backend(kernel.target, target_settings)
            return await compare(backend, problem, new_code, store, executor=executor)

        try:
            result = await run_in_thread(evaluate, f"autocomp measure {kernel.name}")
        finally:
            if executor is not None:
                threading.Thread(target=executor.close, daemon=True).start()
    except Exception as exc:  # the note says what went wrong; the server carries on
        log.info("tune on save failed for %s: %s", kernel.name, exc)
        session.edit_note = f"your edit: not measured ({exc})"[:160]
        ls.refresh_lenses()
        return
    new_eval = result.candidate
    new_metric = render.primary(_as_candidate(new_eval), result.primary_metric)
    if new_eval.verdict is not Verdict.CORRECT and new_eval.verdict is not Verdict.UNVERIFIED:
        note = f"your edit: {new_eval.verdict.value} vs before"
        if new_eval.verdict is Verdict.INCORRECT:
            note = "your edit: output differs from before"
    else:
        if result.speedup is None or new_metric is None:
            note = "your edit: not comparable"
        else:  # the source says whether this is a measurement or an estimate
            note = f"your edit: {render.fmt_speedup(result.speedup)} vs before ({new_metric.unit}, {new_metric.source})"
        if new_metric is not None:
            session.measurement = new_metric
    session.edit_note = note
    ls.refresh_lenses()


def _as_candidate(evaluation):  # an Evaluation wrapped so render.primary can read it
    from autocomp.model import Candidate

    return Candidate(id="edit", code="", evaluation=evaluation)


SAVE_DEBOUNCE = 0.4  # seconds: a burst of saves (autosave) is measured once, at its end



def on_save(ls: AutocompServer, uri: str) -> None:
    """Debounce: the save only (re)arms a timer; :func:`flush` runs when saves stop."""
    current = ls.document_text(uri)
    doc = ls.sessions.get(uri)
    if current is None or doc is None:
        return
    if not ls.settings.tune_on_save:
        doc.saved_text = current[0]
        return
    if doc.save_timer is not None:
        doc.save_timer.cancel()
    doc.save_timer = asyncio.get_running_loop().call_later(SAVE_DEBOUNCE, flush, ls, uri)


def flush(ls: AutocompServer, uri: str) -> None:
    """The end of a burst of saves: measure what changed (see :func:`measure_saved`)."""
    doc = ls.sessions.get(uri)
    if doc is None:
        return
    doc.save_timer = None
    ls.jobs.spawn(measure_saved(ls, uri), f"saved {uri}")


async def measure_saved(ls: AutocompServer, uri: str) -> None:
    """Measure each kernel whose text the saves changed (since the last measured save),
    one measurement at a time per kernel. A running search on that kernel is never
    cancelled: the measurement waits for it to end. Both versions are scanned off the
    event loop when the document is big."""
    current = ls.document_text(uri)
    doc = ls.sessions.get(uri)
    if current is None or doc is None:
        return
    text = current[0]
    before, doc.saved_text = doc.saved_text, text
    if before is None or before == text:
        return
    s = ls.settings
    try:
        old_spans = {k.name: k.span for k in await ls.documents.scan(uri, before, s.targets, s.target)}
        now = await ls.documents.scan(uri, text, s.targets, s.target)
    except Exception:
        log.exception("scanning the saved versions of %s failed", uri)
        return
    for kernel in now:
        old = old_spans.get(kernel.name)
        if old is None:
            continue
        new_code = kernel.span.text_of(text)
        if old.text_of(before) == new_code:
            continue  # a save that leaves this kernel's text unchanged measures nothing
        session = doc.kernel(kernel.name)
        running = ls.jobs.current(uri, kernel.name)
        if running is not None:
            session.edit_note = "your edit: queued (measured when the running search ends)"
            ls.refresh_lenses()
            ls.report_once(
                f"Autocomp: the search on {kernel.name} keeps running on the code it started from; your saved edit "
                f"is measured when it ends (code action 'Restart optimizing {kernel.name} from the current code' "
                "searches from your edit)."
            )
        task = ls.jobs.spawn(_queued(ls, uri, kernel, before, new_code, session.measure_chain), f"measure edit {kernel.name}")
        session.measure_chain = task


async def _queued(
    ls: AutocompServer, uri: str, kernel: DetectedKernel, before: str, new_code: str, previous: asyncio.Task | None
) -> None:
    """Wait for the measurement queued before this one and for a running search on the
    kernel (never cancelling either), then measure."""
    if previous is not None and not previous.done():
        await asyncio.wait({previous})
    while True:
        running = [j.task for j in ls.jobs.running(uri, kernel.name) if j.task is not None and not j.task.done()]
        if not running:
            break
        await asyncio.wait(set(running))
    await measure_edit(ls, uri, kernel, before, new_code)


def register(server: AutocompServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    def did_save(ls: AutocompServer, params: lsp.DidSaveTextDocumentParams) -> None:
        try:
            on_save(ls, params.text_document.uri)
        except Exception:
            log.exception("didSave handling failed")
