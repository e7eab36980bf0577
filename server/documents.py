"""Which kernels each open document holds, computed lazily and cached per document version.

Detection runs when a request needs it (a code lens, a code action, a hover), never on
each keystroke: rapid edits only invalidate the cache. Backends promise ``detect`` is cheap;
files above ``autocomp.maxFileBytes`` and files no enabled target claims by suffix are not
scanned at all, so a huge log or an unrelated language costs nothing.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from autocomp.backends.base import Backend, BackendError
from autocomp.model import KernelSpan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DetectedKernel:
    """One kernel in one document version, with the backend that claims it."""

    span: KernelSpan
    backend: Backend

    @property
    def name(self) -> str:
        return self.span.name

    @property
    def target(self) -> str:
        return self.span.target


def uri_to_path(uri: str) -> str:
    """Filesystem path of a ``file:`` URI; other schemes keep their path part (backends
    only look at the suffix for detection)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else unquote(parsed.path or uri)


class BackendCache:
    """One backend instance per target and settings; import failures remembered so a
    missing optional dependency is reported once, not on every request."""

    def __init__(self) -> None:
        self._backends: dict[tuple[str, str], Backend] = {}
        self.failures: dict[str, str] = {}

    def get(self, name: str, settings: dict[str, Any]) -> Backend | None:
        key = (name, repr(sorted(settings.items())))
        if key in self._backends:
            return self._backends[key]
        if name in self.failures:
            return None
        from autocomp.backends import get_backend

        try:
            backend = get_backend(name, settings)
        except BackendError as exc:
            self.failures[name] = str(exc)
            log.warning("target %s unavailable: %s", name, exc)
            return None
        except Exception as exc:  # a broken backend must not break the server
            self.failures[name] = f"target {name!r} failed to load: {exc}"
            log.exception("target %s failed to load", name)
            return None
        self._backends[key] = backend
        return backend


class DocumentIndex:
    """Kernel detection per open document, cached on (uri, version)."""

    def __init__(self, backends: BackendCache | None = None) -> None:
        self.backends = backends or BackendCache()
        self._cache: dict[str, tuple[int | None, int, list[DetectedKernel]]] = {}

    def invalidate(self, uri: str) -> None:
        self._cache.pop(uri, None)

    def clear(self) -> None:
        self._cache.clear()

    def kernels(
        self,
        uri: str,
        version: int | None,
        text: str,
        targets: list[str],
        target_settings: dict[str, dict[str, Any]],
        max_bytes: int,
    ) -> list[DetectedKernel]:
        """Kernels of this document version (empty for unknown languages, huge files and
        anything a backend chokes on)."""
        cached = self._cache.get(uri)
        text_id = hash(text)
        if cached is not None and cached[0] == version and cached[1] == text_id:
            return cached[2]
        found = self._detect(uri, text, targets, target_settings, max_bytes)
        self._cache[uri] = (version, text_id, found)
        return found

    def _detect(
        self,
        uri: str,
        text: str,
        targets: list[str],
        target_settings: dict[str, dict[str, Any]],
        max_bytes: int,
    ) -> list[DetectedKernel]:
        if len(text) > max_bytes:
            return []
        from autocomp.run import detect_kernels

        path = uri_to_path(uri)
        suffix = os.path.splitext(path)[1].lower()
        backends = []
        for name in targets:
            backend = self.backends.get(name, target_settings.get(name, {}))
            if backend is not None and (not backend.file_suffixes or suffix in backend.file_suffixes):
                backends.append((name, backend))
        return [DetectedKernel(span, backend) for span, backend in detect_kernels(path, text, backends, log)]


def kernel_at(kernels: list[DetectedKernel], line: int | None = None, name: str | None = None) -> DetectedKernel | None:
    """The kernel by name, else the one holding ``line``, else the only one."""
    if name:
        return next((k for k in kernels if k.name == name), None)
    if line is not None:
        return next((k for k in kernels if k.span.contains_line(line)), None)
    return kernels[0] if len(kernels) == 1 else None
