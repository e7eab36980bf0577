"""pytest-lsp harness for the Autocomp language server.

The server runs as a real subprocess (``python -m autocomp.server``) talking to a
pytest-lsp client that presents the capabilities of VS Code, Neovim 0.7 or Emacs. LLM
calls go through the real OpenAI SDK to the loopback FakeLLMServer (a test double), and
kernels are evaluated by the ScriptedBackend double (`.kern` files); real backends are
exercised by the end-to-end editor tests in tests/e2e.

The client here behaves like an editor: it keeps the text of the documents it opened,
applies ``workspace/applyEdit`` to them (refusing stale versions) and tells the server
about the change, and answers ``workspace/codeLens/refresh``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from lsprotocol import types as lsp
from pytest_lsp import LanguageClient, client_capabilities, make_test_lsp_client

from autocomp.testing.fake_llm import FakeLLMServer

CLIENTS = ["visual-studio-code", "neovim@0.7", "emacs"]

KERNEL = """\
// a scripted kernel (test double target)
kernel scale {
  result = 42
  cost = 1000
}
"""


def kernel_reply(cost: int, result: int = 42, extra: str = "") -> str:
    return f"Here is the kernel.\n```kern\nkernel scale {{\n  result = {result}\n{extra}  cost = {cost}\n}}\n```\n"


def default_rules() -> list[dict[str, Any]]:
    return [
        {"role": "plan", "replies": ["Unroll the inner loop by four.", "Tile for the scratchpad.", "Fuse the two passes."]},
        {"role": "implement", "replies": [kernel_reply(c) for c in (800, 600, 450, 300, 250, 200)]},
        {"role": "repair", "reply": kernel_reply(900)},
    ]


@dataclass
class Doc:
    uri: str
    text: str
    version: int = 1


@dataclass
class Editor:
    """The editor side of a session: documents, statuses, applied edits."""

    client: LanguageClient
    capabilities: str
    root: str
    fake: FakeLLMServer
    docs: dict[str, Doc] = field(default_factory=dict)
    statuses: list[dict[str, Any]] = field(default_factory=list)
    applied_edits: list[lsp.ApplyWorkspaceEditParams] = field(default_factory=list)
    refused_edits: int = 0
    lens_refreshes: int = 0
    requests_seen: list[str] = field(default_factory=list)
    # Simulate typing between the server's read and the client's apply: the next
    # applyEdit first appends this to the document (a newer version).
    type_before_apply: str | None = None
    # How a stale edit is refused: "result" (applied: false, as VS Code) or "error" (an
    # error response, as eglot without the shipped config)
    refuse_with: str = "result"
    always_stale: bool = False  # every applyEdit finds newer text (typing never stops)

    # -- documents ---------------------------------------------------------------------
    def open(self, name: str, text: str) -> Doc:
        path = os.path.join(self.root, name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        uri = "file://" + path
        doc = Doc(uri, text)
        self.docs[uri] = doc
        lang = "plaintext"
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id=lang, version=1, text=text))
        )
        return doc

    def replace(self, doc: Doc, text: str) -> None:
        doc.text = text
        doc.version += 1
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version),
                content_changes=[lsp.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def insert(self, doc: Doc, line: int, text: str) -> None:
        """An incremental change, as editors send while typing: ``text`` at ``line``."""
        lines = doc.text.splitlines(keepends=True)
        doc.text = "".join(lines[:line]) + text + "".join(lines[line:])
        doc.version += 1
        pos = lsp.Position(line, 0)
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=doc.uri, version=doc.version),
                content_changes=[lsp.TextDocumentContentChangePartial(range=lsp.Range(pos, pos), text=text)],
            )
        )

    def save(self, doc: Doc) -> None:
        with open(doc.uri[len("file://") :], "w", encoding="utf-8") as fh:
            fh.write(doc.text)
        self.client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(doc.uri)))

    # -- requests ----------------------------------------------------------------------
    async def command(self, name: str, args: dict[str, Any]) -> Any:
        return _plain(await self.client.workspace_execute_command_async(lsp.ExecuteCommandParams(command=name, arguments=[args])))

    async def code_actions(self, doc: Doc, line: int, diagnostics: list[lsp.Diagnostic] | None = None) -> list[lsp.CodeAction]:
        rng = lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0))
        result = await self.client.text_document_code_action_async(
            lsp.CodeActionParams(
                text_document=lsp.TextDocumentIdentifier(doc.uri),
                range=rng,
                context=lsp.CodeActionContext(diagnostics=diagnostics or []),
            )
        )
        return list(result or [])

    async def lenses(self, doc: Doc) -> list[lsp.CodeLens]:
        return list(await self.client.text_document_code_lens_async(lsp.CodeLensParams(lsp.TextDocumentIdentifier(doc.uri))) or [])

    async def hover(self, doc: Doc, line: int) -> lsp.Hover | None:
        return await self.client.text_document_hover_async(
            lsp.HoverParams(lsp.TextDocumentIdentifier(doc.uri), lsp.Position(line, 2))
        )

    async def custom(self, method: str, params: dict[str, Any]) -> Any:
        return _plain(await self.client.protocol.send_request_async(method, params))

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; statuses: {self.statuses[-3:]}")

    async def wait_state(self, job_id: str, states: tuple[str, ...] = ("finished", "cancelled", "failed"), timeout: float = 60.0) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            return next((s for s in reversed(self.statuses) if s["jobId"] == job_id and s["state"] in states), None)

        return await self.wait_for(done, timeout, f"job {job_id} in {states}")

    def messages(self) -> list[str]:
        return [m.message for m in self.client.messages]


def _apply_text_edits(text: str, edits: list[lsp.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(pos: lsp.Position) -> int:
        if pos.line >= len(lines):
            return len(text)
        return offsets[pos.line] + pos.character  # test texts are ASCII

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


def _structure_hooks(client: LanguageClient) -> None:
    """pytest-lsp's converter turns a CodeAction carrying a command into a bare Command;
    tell it how to tell them apart (a Command's ``command`` is a string)."""
    conv = client.protocol._converter

    def structure(obj: Any, _type: Any) -> Any:
        if isinstance(obj, dict) and isinstance(obj.get("command"), str):
            return conv.structure(obj, lsp.Command)
        return conv.structure(obj, lsp.CodeAction)

    conv.register_structure_hook(Union[lsp.Command, lsp.CodeAction], structure)


def make_editor(capabilities: str, root: str, fake: FakeLLMServer) -> Editor:
    client = make_test_lsp_client()
    _structure_hooks(client)
    editor = Editor(client, capabilities, root, fake)

    @client.feature(lsp.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: lsp.ApplyWorkspaceEditParams) -> lsp.ApplyWorkspaceEditResult:
        edit = params.edit
        if editor.type_before_apply is not None:
            typed = editor.type_before_apply
            if not editor.always_stale:
                editor.type_before_apply = None
            for uri in [c.text_document.uri for c in edit.document_changes or []] + list(edit.changes or {}):
                doc = editor.docs[uri]
                editor.replace(doc, doc.text + typed)
        if edit.document_changes:
            for change in edit.document_changes:
                doc = editor.docs[change.text_document.uri]
                if change.text_document.version is not None and change.text_document.version != doc.version:
                    editor.refused_edits += 1
                    if editor.refuse_with == "error":
                        raise RuntimeError(f"Edits on {doc.uri} require version {change.text_document.version}, you have {doc.version}")
                    return lsp.ApplyWorkspaceEditResult(applied=False, failure_reason="stale version")
                editor.replace(doc, _apply_text_edits(doc.text, list(change.edits)))
        else:
            for uri, edits in (edit.changes or {}).items():
                doc = editor.docs[uri]
                editor.replace(doc, _apply_text_edits(doc.text, list(edits)))
        editor.applied_edits.append(params)
        return lsp.ApplyWorkspaceEditResult(applied=True)

    @client.feature(lsp.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params: None) -> None:
        editor.lens_refreshes += 1

    @client.feature("autocomp/jobStatus")
    def job_status(params: Any) -> None:
        editor.statuses.append(_plain(params))

    return editor


def _plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return {k: _plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def server_settings(home: str, **overrides: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "llm": ["openai:fake"],
        "targets": ["scripted"],
        "search": {"iterations": 2, "beam": 2, "plans": 2, "implementations": 1},
        "store": os.path.join(home, "store"),
    }
    settings.update(overrides)
    return {"autocomp": settings}


async def start_editor(
    capabilities: str, root: str, fake: FakeLLMServer, settings: dict[str, Any], env: dict[str, str] | None = None
) -> Editor:
    editor = make_editor(capabilities, root, fake)
    server_env = dict(os.environ)
    server_env.update(fake.env())
    server_env["AUTOCOMP_HOME"] = os.path.join(root, "home")
    server_env.update(env or {})
    await editor.client.start_io(sys.executable, "-m", "autocomp.server", env=server_env)
    await editor.client.initialize_session(
        lsp.InitializeParams(
            capabilities=client_capabilities(capabilities),
            root_uri="file://" + root,
            initialization_options=settings,
            client_info=lsp.ClientInfo(name=capabilities),
        )
    )
    return editor


