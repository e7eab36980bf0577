"""What the server remembers per open document and per kernel, and nothing after close.

A :class:`DocumentSession` is created when a document opens and dropped when it closes
(:meth:`Sessions.drop`, which also cancels its pending timers); its kernels' state
(:class:`KernelSession`: the last measured metric, the note on the user's last saved edit,
the queued edit measurement, the cached similar runs and tunables) lives inside it. Writes
for a document that is no longer open land in a detached session and are forgotten, so a
background task that ends after the close cannot bring its state back.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from autocomp.model import Metric


@dataclass
class KernelSession:
    """One kernel of one open document."""

    measurement: Metric | None = None  # the last primary metric measured for the kernel as it stands
    edit_note: str = ""  # "your edit: 0.93x vs before" after a save
    measure_chain: asyncio.Task[Any] | None = None  # the last queued edit measurement (tune on save)
    similar: tuple[Any, float, list[Any]] | None = None  # (problem, when, matches): "Optimize like"
    tunables: tuple[Any, Any, float] | None = None  # (problem, names or None while looked up, when): "Tune constants"
    tunable_names: list[str] | None = None  # the last names found (a big document's stand while it is edited)


@dataclass
class DocumentSession:
    """One open document."""

    uri: str
    saved_text: str | None = None  # as last opened or saved: the "before" of tuning on save
    save_timer: asyncio.TimerHandle | None = None  # the pending debounce of its latest save
    kernels: dict[str, KernelSession] = field(default_factory=dict)

    def kernel(self, name: str) -> KernelSession:
        if name not in self.kernels:
            self.kernels[name] = KernelSession()
        return self.kernels[name]

    def close(self) -> None:
        if self.save_timer is not None:
            self.save_timer.cancel()
            self.save_timer = None


class Sessions:
    """Every open document's session, keyed by uri."""

    def __init__(self) -> None:
        self.documents: dict[str, DocumentSession] = {}

    def open(self, uri: str, text: str | None = None) -> DocumentSession:
        doc = self.documents.get(uri)
        if doc is None:
            doc = self.documents[uri] = DocumentSession(uri)
        doc.saved_text = text
        return doc

    def get(self, uri: str) -> DocumentSession | None:
        return self.documents.get(uri)

    def document(self, uri: str) -> DocumentSession:
        """The document's session; a detached one (never stored) when it is not open."""
        return self.documents.get(uri) or DocumentSession(uri)

    def kernel(self, uri: str, name: str) -> KernelSession:
        """The kernel's session, for writing; detached when the document is not open."""
        return self.document(uri).kernel(name)

    def peek(self, uri: str, name: str) -> KernelSession | None:
        """The kernel's session, for reading (None when nothing is known)."""
        doc = self.documents.get(uri)
        return doc.kernels.get(name) if doc is not None else None

    def drop(self, uri: str) -> None:
        """The document closed: forget it, and cancel what it had pending."""
        doc = self.documents.pop(uri, None)
        if doc is not None:
            doc.close()

    def clear(self) -> None:
        for uri in list(self.documents):
            self.drop(uri)
