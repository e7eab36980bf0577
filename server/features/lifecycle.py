"""Feature "lifecycle": initialization, settings, document open/change/close, shutdown and exit.

Closing a document ends its jobs; shutdown ends every job and background task (pygls
cancels none of them by itself) so no evaluator process outlives the server.
"""

from __future__ import annotations

import logging

from lsprotocol import types as lsp

from autocomp.server import textsync
from autocomp.server.documents import uri_to_path
from autocomp.server.jobs.worker import SearchWorker
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)


def workspace_roots(params: lsp.InitializeParams) -> list[str]:
    roots = [uri_to_path(f.uri) for f in (params.workspace_folders or [])]
    if not roots and params.root_uri:
        roots = [uri_to_path(params.root_uri)]
    if not roots and params.root_path:
        roots = [params.root_path]
    return roots


def load_workspace_config(ls: AutocompServer, params: lsp.InitializeParams) -> None:
    """Settings from ``autocomp.toml`` at a workspace folder's root (autocomp.schema), the
    same file and keys the CLI reads; a bad file is reported once, never fatal."""
    import os

    from autocomp.schema import CONFIG_FILE, SettingError, read_config_file

    for root in workspace_roots(params):
        path = os.path.join(root, CONFIG_FILE)
        if not os.path.isfile(path):
            continue
        try:
            section = read_config_file(path)
        except SettingError as exc:
            ls.report_once(f"Autocomp: {exc}", lsp.MessageType.Warning)
            continue
        ls.update_settings({"autocomp": section})


def register(server: AutocompServer) -> None:
    @server.feature(lsp.INITIALIZE)
    def initialize(ls: AutocompServer, params: lsp.InitializeParams) -> None:
        textsync.install(ls.workspace)  # incremental changes spliced in, not re-joined line by line
        ls.client_name = params.client_info.name if params.client_info else ""
        load_workspace_config(ls, params)  # workspace autocomp.toml first; the client's settings on top
        if params.initialization_options is not None:
            ls.update_settings(params.initialization_options)

    @server.feature(lsp.INITIALIZED)
    async def initialized(ls: AutocompServer, params: lsp.InitializedParams) -> None:
        await ls.pull_configuration()

    @server.feature(lsp.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: AutocompServer, params: lsp.DidChangeConfigurationParams) -> None:
        settings = params.settings
        if isinstance(settings, dict) and settings:
            ls.update_settings(settings)
        await ls.pull_configuration()
        ls.refresh_lenses()

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: AutocompServer, params: lsp.DidOpenTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.documents.invalidate(uri)
        ls.sessions.open(uri, params.text_document.text)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: AutocompServer, params: lsp.DidChangeTextDocumentParams) -> None:
        # Detection is lazy: a change only marks (and, in big documents, shifts) what is
        # known, so typing costs nothing; see DocumentIndex.
        uri = params.text_document.uri
        ls.documents.changed(uri, list(params.content_changes))
        for hook in ls.hooks.changed:  # e.g. an undo that takes an applied candidate back out
            try:
                hook(uri)
            except Exception:
                log.exception("didChange hook failed")

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: AutocompServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        for job in ls.jobs.running(uri):
            ls.jobs.stop(job)
        ls.documents.invalidate(uri)
        ls.sessions.drop(uri)  # its saved text, pending save, measurements, notes, caches

    @server.feature(lsp.SHUTDOWN)
    async def shutdown(ls: AutocompServer, *args: object) -> None:
        ls.closing = True
        await ls.jobs.shutdown()
        await ls.documents.close()

    @server.feature(lsp.EXIT)
    def exit_(ls: AutocompServer, *args: object) -> None:
        exit_now(ls)


EXIT_GRACE = 0.6  # seconds the worker threads get to kill their evaluations on exit


def exit_now(ls: AutocompServer) -> None:
    """``exit`` (with or without ``shutdown`` first) ends the process within a second and
    quietly: every search's worker is cancelled (which kills its evaluator process
    groups), given ``EXIT_GRACE`` seconds, and the process leaves with ``os._exit``: no
    event-loop teardown cancelling dozens of tasks, so no tracebacks on stderr. The exit
    code is 0 after a shutdown, 1 without (as LSP asks)."""
    import os
    import sys
    import time

    ls.closing = True
    workers = []
    for job in list(ls.jobs.jobs.values()):
        if isinstance(job.search, SearchWorker) and (job.active or (job.task is not None and not job.task.done())):
            job.search.cancel()
            workers.append(job.search)
    ls.documents.kill()  # the detection process holds our stdout: it must not outlive us
    deadline = time.monotonic() + EXIT_GRACE
    for worker in workers:
        worker.join_now(max(0.0, deadline - time.monotonic()))
    code = 0 if getattr(ls.protocol, "_shutdown", False) else 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)
