"""Tuning while editing: on save, measure the user's edit of a kernel against the version
saved before it, and restart a running search from the edited code.

The saved-before text is the oracle, so the lens says both whether the edit still computes
the same thing and how its speed compares ("your edit: 0.93x vs before"). The evaluation
runs as a tracked background task; its results land in the store's cache, which the
restarted search reuses.
"""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

from autocomp.model import Verdict
from autocomp.server import render
from autocomp.server.documents import DetectedKernel, uri_to_path
from autocomp.server.features import optimize_action
from autocomp.server.server import AutocompServer
from autocomp.server.worker import run_in_thread

log = logging.getLogger(__name__)


async def measure_edit(ls: AutocompServer, uri: str, kernel: DetectedKernel, before: str, new_code: str) -> None:
    """Compare the edited kernel with the saved-before one (the oracle), through the
    engine's front door (:func:`autocomp.run.compare`)."""
    from autocomp.run import compare

    key = (uri, kernel.name)
    ls.edit_notes[key] = "your edit: measuring…"
    ls.refresh_lenses()
    backend = kernel.backend
    try:
        backend = optimize_action.fresh_backend(ls, kernel)
        problem = backend.make_problem(uri_to_path(uri), before, function=kernel.name)
        store = ls.store()

        async def evaluate():
            return await compare(backend, problem, new_code, store)

        result = await run_in_thread(evaluate, f"autocomp measure {kernel.name}")
    except Exception as exc:  # the note says what went wrong; the server carries on
        log.info("tune on save failed for %s: %s", kernel.name, exc)
        ls.edit_notes[key] = f"your edit: not measured ({exc})"[:160]
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
            ls.measurements[key] = new_metric
    ls.edit_notes[key] = note
    ls.refresh_lenses()


def _as_candidate(evaluation):  # an Evaluation wrapped so render.primary can read it
    from autocomp.model import Candidate

    return Candidate(id="edit", code="", evaluation=evaluation)


def on_save(ls: AutocompServer, uri: str) -> None:
    current = ls.document_text(uri)
    if current is None:
        return
    text = current[0]
    before = ls.saved_texts.get(uri)
    ls.saved_texts[uri] = text
    if not ls.settings.tune_on_save or before is None or before == text:
        return
    path = uri_to_path(uri)
    for kernel in ls.kernels(uri):
        try:
            old_spans = {s.name: s for s in kernel.backend.detect(path, before)}
        except Exception:
            continue
        old = old_spans.get(kernel.name)
        if old is None:
            continue
        new_code = kernel.span.text_of(text)
        if old.text_of(before) == new_code:
            continue
        running = next((j for j in ls.jobs.running(uri, kernel.name) if not j.superseded), None)
        if running is not None:
            job = optimize_action.restart(ls, running, kernel)
            ls.show(f"Autocomp: restarted optimizing {kernel.name} from your edit ({job.id}), best plans so far first.")
        ls.jobs.spawn(measure_edit(ls, uri, kernel, before, new_code), f"measure edit {kernel.name}")


def register(server: AutocompServer) -> None:
    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE, lsp.SaveOptions(include_text=False))
    def did_save(ls: AutocompServer, params: lsp.DidSaveTextDocumentParams) -> None:
        try:
            on_save(ls, params.text_document.uri)
        except Exception:
            log.exception("didSave handling failed")
