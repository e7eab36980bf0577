"""Wiring: a server with every feature registered.

Each feature module under ``features/`` registers its own handlers and hooks; the one LSP
method several features answer, ``textDocument/codeAction``, is answered here from the
providers they registered (:attr:`AutocompServer.hooks`).
"""

from __future__ import annotations

import inspect
import logging

from lsprotocol import types as lsp

from autocomp.server.documents import kernel_at
from autocomp.server.features import (
    apply,
    diagnostics,
    hover,
    lenses,
    lifecycle,
    optimize_action,
    queries,
    reuse_action,
    tune_action,
    tune_on_save,
)
from autocomp.server.server import AutocompServer

log = logging.getLogger(__name__)

FEATURES = (lifecycle, lenses, optimize_action, reuse_action, tune_action, apply, diagnostics, hover, tune_on_save, queries)


def _wants(context: lsp.CodeActionContext, kind: str) -> bool:
    only = context.only
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


def build_server() -> AutocompServer:
    """A server with every feature registered."""
    server = AutocompServer()
    for module in FEATURES:
        module.register(server)
    kinds = sorted({kind for kind, _provider in server.hooks.code_actions})

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION, lsp.CodeActionOptions(code_action_kinds=kinds, resolve_provider=False))
    async def code_action(ls: AutocompServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        detected = None
        try:
            detected = kernel_at(ls.kernels(params.text_document.uri), line=params.range.start.line)
        except Exception:
            log.exception("codeAction: kernel detection failed")
        actions: list[lsp.CodeAction] = []
        for kind, provider in ls.hooks.code_actions:
            if not _wants(params.context, kind):
                continue
            try:  # a code action must never fail loudly on odd input
                found = provider(ls, params, detected)
                if inspect.isawaitable(found):
                    found = await found
                actions += found or []
            except Exception:
                log.exception("codeAction provider %s failed", getattr(provider, "__qualname__", provider))
        return actions

    return server
