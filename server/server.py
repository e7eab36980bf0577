"""The Autocomp language server: the pygls subclass and its shared state.

The server is layered. At the top, handlers: one module per user-facing feature under
``features/``, each registering its handlers through ``register(server)`` (wired in
:mod:`.app`). Below them, the jobs layer (``jobs/``: a job's state and its one writer, the
registry, the runner, the worker thread and evaluation process, publishing, edits), which
never imports a feature: features subscribe to :attr:`JobRegistry.hooks` and to the
server's :attr:`AutocompServer.hooks`. This module holds what they all share (settings, the
document index, per-document sessions, the job registry, client capability checks) and the
few helpers every feature uses to talk to the client.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from autocomp import sandbox
from autocomp.server.documents import DetectedKernel, DocumentIndex
from autocomp.server.jobs.registry import JobRegistry
from autocomp.server.session import Sessions
from autocomp.server.settings import Settings, parse_settings

log = logging.getLogger(__name__)

JOB_STATUS = "autocomp/jobStatus"


class _Malformed:
    """A request whose parameters could not be read (see :class:`AutocompProtocol`)."""

    def __init__(self, msg_id: Any, method: str, reason: str) -> None:
        self.id, self.method, self.reason = msg_id, method, reason


class AutocompProtocol(LanguageServerProtocol):
    """pygls logs a request whose parameters do not match the method's type and never
    answers it, so the client waits forever. Here every such request gets a JSON-RPC
    ``InvalidParams`` error naming the method, and nothing is logged as a traceback."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        if isinstance(data, dict) and "jsonrpc" in data and "id" in data and "method" in data:
            try:
                return self._converter.structure(data, self.get_message_type(data["method"]) or _request_type())
            except Exception as exc:
                return _Malformed(data["id"], str(data["method"]), _reason(exc))
        try:
            return super().structure_message(data)
        except JsonRpcException:
            if isinstance(data, dict) and "method" in data:  # a malformed notification: dropped
                log.warning("ignored malformed %s notification", data.get("method"))
                return None
            raise

    def handle_message(self, message: Any) -> None:
        if message is None:
            return
        if isinstance(message, _Malformed):
            error = JsonRpcInvalidParams(f"invalid params for {message.method}: {message.reason}"[:500])
            self._send_response(message.id, error=error.to_response_error())
            return
        super().handle_message(message)


class _OneLineRefusals(logging.Filter):
    """A request refused with ``InvalidParams`` is the client's mistake, answered with an
    error: pygls logs it with a full traceback; keep it to one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, JsonRpcInvalidParams):
            record.exc_info = None
            record.exc_text = None
            record.msg, record.args = "refused a request: %s", (exc,)
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


logging.getLogger("pygls.protocol.json_rpc").addFilter(_OneLineRefusals())


def _request_type() -> Any:
    from pygls.protocol.json_rpc import JsonRPCRequestMessage

    return JsonRPCRequestMessage


def _reason(exc: BaseException) -> str:
    """The first line a person can act on from a cattrs error (nested exceptions)."""
    leaves: list[BaseException] = []

    def walk(e: BaseException) -> None:
        subs = getattr(e, "exceptions", None)
        if subs:
            for sub in subs:
                walk(sub)
        else:
            leaves.append(e)

    walk(exc)
    leaf = leaves[0] if leaves else exc
    return f"{type(leaf).__name__}: {leaf}"


CodeActionProvider = Callable[["AutocompServer", lsp.CodeActionParams, "DetectedKernel | None"], Any]


@dataclass
class ServerHooks:
    """What features subscribe to, so that no layer below them imports one:
    ``kernels_found(uri)`` after a background scan of a big document; ``changed(uri)``
    after the client changed a document; ``code_actions``: (kind, provider) pairs whose
    actions answer ``textDocument/codeAction`` (a provider may be async)."""

    kernels_found: list[Callable[[str], None]] = field(default_factory=list)
    changed: list[Callable[[str], Any]] = field(default_factory=list)
    code_actions: list[tuple[str, CodeActionProvider]] = field(default_factory=list)


class AutocompServer(LanguageServer):
    """Language server state shared by all features."""

    def __init__(self) -> None:
        super().__init__(
            "autocomp", "0.1.0", text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental, protocol_cls=AutocompProtocol
        )
        self.settings = Settings()
        self.documents = DocumentIndex(on_update=self._kernels_found)
        self.documents.source = self.document_text  # type: ignore[method-assign]
        self.jobs = JobRegistry()
        self.sessions = Sessions()  # per open document and kernel; dropped on didClose
        self.hooks = ServerHooks()
        self._reported: set[str] = set()
        self._store: tuple[str | None, Any] | None = None
        self.closing = False  # set on shutdown: nothing more is sent to the client
        self.client_name = ""  # from initialize's clientInfo, e.g. "Visual Studio Code"

    # -- settings ----------------------------------------------------------------------
    def update_settings(self, raw: Any) -> None:
        self.settings, problems = parse_settings(raw, self.settings)
        sandbox.configure(self.settings.sandbox)
        self.documents.clear()
        for problem in problems:
            self.report_once(problem, lsp.MessageType.Warning)

    async def pull_configuration(self) -> None:
        """Read ``autocomp`` from ``workspace/configuration`` where the client offers it."""
        ws = self.client_capabilities.workspace
        if ws is None or not ws.configuration:
            return
        try:
            result = await asyncio.wait_for(
                self.workspace_configuration_async(
                    lsp.ConfigurationParams(items=[lsp.ConfigurationItem(section="autocomp")])
                ),
                timeout=5.0,
            )
        except Exception as exc:  # a client that cannot answer keeps the initial settings
            log.info("workspace/configuration failed: %s", exc)
            return
        if result and isinstance(result[0], dict):
            self.update_settings({"autocomp": result[0]})

    def store(self) -> Any:
        """The engine's store for the configured folder, opened once per folder."""
        from autocomp.store import Store

        key = self.settings.store
        if self._store is None or self._store[0] != key:
            self._store = (key, Store.open(key))
        return self._store[1]

    # -- capabilities ------------------------------------------------------------------
    @property
    def supports_progress(self) -> bool:
        win = self.client_capabilities.window
        return bool(win and win.work_done_progress)

    @property
    def supports_lens_refresh(self) -> bool:
        ws = self.client_capabilities.workspace
        return bool(ws and ws.code_lens and ws.code_lens.refresh_support)

    @property
    def supports_document_changes(self) -> bool:
        ws = self.client_capabilities.workspace
        return bool(ws and ws.workspace_edit and ws.workspace_edit.document_changes)

    @property
    def supports_show_document(self) -> bool:
        win = self.client_capabilities.window
        return bool(win and win.show_document and win.show_document.support)

    # -- documents ---------------------------------------------------------------------
    def kernels(self, uri: str) -> list[DetectedKernel]:
        """Kernels in the open document (cached per version; empty when not open)."""
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return []
        s = self.settings
        return self.documents.kernels(uri, doc.version, doc.source, s.targets, s.target, s.max_file_bytes)

    def _kernels_found(self, uri: str) -> None:
        """A background scan of a big document finished: show what it found."""
        if self.closing:
            return
        for hook in self.hooks.kernels_found:
            hook(uri)
        self.refresh_lenses()

    def document_text(self, uri: str) -> tuple[str, int | None] | None:
        doc = self.workspace.text_documents.get(uri)
        if doc is None:
            return None
        return doc.source, doc.version

    # -- talking to the client ---------------------------------------------------------
    def show(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        if self.closing:
            return
        self.window_show_message(lsp.ShowMessageParams(type=kind, message=message))

    def report_once(self, message: str, kind: lsp.MessageType = lsp.MessageType.Warning) -> None:
        """Show a problem once per session: no error spam for a setting or a missing key."""
        if message in self._reported:
            return
        self._reported.add(message)
        self.show(message, kind)

    def refresh_lenses(self) -> None:
        """Ask for new lenses, only from clients that said they support it."""
        if not self.supports_lens_refresh or self.closing:
            return

        async def refresh() -> None:
            try:
                await asyncio.wait_for(self.workspace_code_lens_refresh_async(None), timeout=10.0)
            except Exception as exc:
                log.debug("codeLens/refresh failed: %s", exc)

        self.jobs.spawn(refresh(), "codeLens refresh")

    def notify_status(self, status: dict[str, Any]) -> None:
        if self.closing:
            return
        self.protocol.notify(JOB_STATUS, status)
