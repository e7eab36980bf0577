"""Which kernels each open document holds, computed lazily and cached per document version.

Detection runs when a request needs it (a code lens, a code action, a hover), never on
each keystroke: rapid edits only invalidate the cache (or, for big documents, shift what
is known). Big documents are scanned off the event loop, in a separate process. Backends promise ``detect`` is cheap;
files above ``autocomp.maxFileBytes`` and files no enabled target claims by suffix are not
scanned at all, so a huge log or an unrelated language costs nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
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


INLINE_BYTES = 200_000  # texts up to this size are scanned on the spot (a few ms at most)
DETECT_DEBOUNCE = 0.25  # seconds of quiet typing before a big document is scanned again


def _detect_in_child(path: str, text: str, targets: list[tuple[str, dict[str, Any]]]) -> list[tuple[dict[str, Any], str]]:
    """Runs in the detection process: the one detection loop over the given targets."""
    from autocomp.backends import get_backend
    from autocomp.run import detect_kernels

    backends = []
    for name, settings in targets:
        try:
            backends.append((name, get_backend(name, settings)))
        except Exception:
            continue
    names = {id(b): n for n, b in backends}
    return [(span.to_json(), names[id(backend)]) for span, backend in detect_kernels(path, text, backends)]


def _shift(kernels: list[DetectedKernel], changes: list[Any]) -> tuple[list[DetectedKernel], bool]:
    """Kernels moved by the line deltas of ``changes``; False when a change may have
    changed what a scan would find (it touched a kernel, added or removed lines, or
    replaced the whole text)."""
    exact = True
    for change in changes:
        rng = getattr(change, "range", None)
        if rng is None:  # the whole text replaced: nothing to shift from
            exact = False
            continue
        delta = change.text.count("\n") - (rng.end.line - rng.start.line)
        if delta == 0 and not any(k.span.start_line <= rng.end.line and rng.start.line < k.span.end_line for k in kernels):
            continue  # inside one line, outside every kernel: positions unchanged
        exact = False
        if delta == 0:
            continue
        moved = []
        for k in kernels:
            span = k.span
            before = rng.end.line < span.start_line or (rng.end.line == span.start_line and rng.end.character == 0)
            if before:
                span = dataclasses.replace(span, start_line=span.start_line + delta, end_line=span.end_line + delta)
            elif span.start_line <= rng.start.line < span.end_line:
                span = dataclasses.replace(span, end_line=max(span.start_line + 1, span.end_line + delta))
            moved.append(DetectedKernel(span, k.backend))
        kernels = moved
    return kernels, exact


def _problem_in_child(target: str, settings: dict[str, Any], path: str, text: str, function: str) -> Any:
    """Runs in the detection process: a backend's Problem for one kernel of a big text."""
    from autocomp.backends import get_backend

    return get_backend(target, settings).make_problem(path, text, function=function)


@dataclass
class _Entry:
    """What is known of one document: kernels found on some version, shifted since by the
    line deltas of the edits that followed (``exact`` once they match the current text)."""

    version: int | None
    text_id: int
    kernels: list[DetectedKernel]
    exact: bool = True
    pending: Any = None  # the scheduled or running background scan
    scanning: bool = False
    log: list[Any] = dataclasses.field(default_factory=list)  # edits since the running scan read the text


class DocumentIndex:
    """Kernel detection per open document, cached on (uri, version).

    Small documents are scanned when a request needs it. Big ones (over ``INLINE_BYTES``:
    a backend's scan of a 2 MB file takes seconds) are never scanned on the server's event
    loop: a request gets the kernels of the last scan, moved by the line deltas of the
    edits since (an edit above a kernel shifts it, one elsewhere leaves it), and the
    document is scanned again in a separate process once typing pauses; ``on_update``
    is then called so the client can be asked to refresh. An edit that touches no kernel
    and adds or removes no line changes nothing a request sees."""

    def __init__(self, backends: BackendCache | None = None, on_update: Any = None) -> None:
        self.backends = backends or BackendCache()
        self._cache: dict[str, _Entry] = {}
        self.on_update = on_update
        self._pool: Any = None
        self._problems: dict[tuple[str, str], tuple[int, Any]] = {}
        self._building: set[tuple[str, str]] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    def invalidate(self, uri: str) -> None:
        for key in [k for k in self._problems if k[0] == uri]:
            self._problems.pop(key, None)
        entry = self._cache.pop(uri, None)
        if entry is not None and entry.pending is not None:
            entry.pending.cancel()

    def clear(self) -> None:
        for uri in list(self._cache):
            self.invalidate(uri)

    def changed(self, uri: str, changes: list[Any]) -> None:
        """Follow an edit: shift what is known, and mark the document for a new scan."""
        entry = self._cache.get(uri)
        if entry is None:
            return
        if entry.scanning:
            entry.log += changes  # replayed on the scan's result (it read an older text)
        entry.kernels, exact = _shift(entry.kernels, changes)
        entry.exact = entry.exact and exact

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
        entry = self._cache.get(uri)
        text_id = hash(text)
        if entry is not None and entry.version == version and entry.text_id == text_id and entry.exact:
            return entry.kernels
        if len(text) > max_bytes:
            self._cache[uri] = _Entry(version, text_id, [])
            return []
        chosen = self._backends_for(uri, targets, target_settings)
        if len(text) <= INLINE_BYTES:
            found = self._detect(uri, text, chosen)
            self._cache[uri] = _Entry(version, text_id, found)
            return found
        if entry is None:
            entry = self._cache[uri] = _Entry(None, 0, [], exact=False)
        self._schedule(uri, entry, chosen, target_settings)
        return entry.kernels

    def _backends_for(self, uri: str, targets: list[str], target_settings: dict[str, dict[str, Any]]) -> list[tuple[str, Backend]]:
        suffix = os.path.splitext(uri_to_path(uri))[1].lower()
        chosen = []
        for name in targets:
            backend = self.backends.get(name, target_settings.get(name, {}))
            if backend is not None and (not backend.file_suffixes or suffix in backend.file_suffixes):
                chosen.append((name, backend))
        return chosen

    def _detect(self, uri: str, text: str, chosen: list[tuple[str, Backend]]) -> list[DetectedKernel]:
        from autocomp.run import detect_kernels

        return [DetectedKernel(span, backend) for span, backend in detect_kernels(uri_to_path(uri), text, chosen, log)]

    # -- big documents: scanned in a separate process ----------------------------------
    def _schedule(self, uri: str, entry: _Entry, chosen: list[tuple[str, Backend]], settings: dict[str, dict[str, Any]]) -> None:
        if entry.pending is not None and not entry.pending.done():
            return
        loop = asyncio.get_running_loop()
        entry.pending = loop.create_task(self._scan_later(uri, entry, chosen, settings), name=f"detect {uri}")

    async def _scan_later(self, uri: str, entry: _Entry, chosen: list[tuple[str, Backend]], settings: dict[str, dict[str, Any]]) -> None:
        await asyncio.sleep(DETECT_DEBOUNCE)
        source = self.source(uri)
        if source is None or not chosen:
            entry.kernels, entry.exact = [], True
            return
        text, version = source
        entry.scanning, entry.log = True, []
        by_name = dict(chosen)
        targets = [(name, settings.get(name, {})) for name, _b in chosen]
        try:
            found = await asyncio.get_running_loop().run_in_executor(self._executor(), _detect_in_child, uri_to_path(uri), text, targets)
        except Exception:
            log.exception("kernel detection failed for %s", uri)
            found = []
        finally:
            entry.scanning = False
        if self._cache.get(uri) is not entry:
            return  # closed or reset meanwhile
        current = self.source(uri)
        kernels = [DetectedKernel(KernelSpan.from_json(span), by_name[name]) for span, name in found if name in by_name]
        # Edits that arrived during the scan move its result as they moved the old one.
        entry.kernels, unchanged = _shift(kernels, entry.log)
        entry.log = []
        entry.version, entry.text_id = version, hash(text)
        entry.exact = unchanged and current is not None and current[1] == version
        if current is not None and current[1] != version:
            entry.version, entry.text_id = current[1], hash(current[0])
        entry.pending = None
        if self.on_update is not None:
            self.on_update(uri)

    async def scan(self, uri: str, text: str, targets: list[str], settings: dict[str, dict[str, Any]]) -> list[DetectedKernel]:
        """Kernels of any text of this document (e.g. the version saved before), found on
        the spot when small and in the detection process when big."""
        chosen = self._backends_for(uri, targets, settings)
        if len(text) <= INLINE_BYTES:
            return self._detect(uri, text, chosen)
        by_name = dict(chosen)
        found = await asyncio.get_running_loop().run_in_executor(
            self._executor(), _detect_in_child, uri_to_path(uri), text, [(n, settings.get(n, {})) for n, _b in chosen]
        )
        return [DetectedKernel(KernelSpan.from_json(span), by_name[name]) for span, name in found if name in by_name]

    async def make_problem(self, uri: str, kernel: DetectedKernel, text: str, settings: dict[str, Any]) -> Any:
        """The backend's Problem for ``kernel`` in ``text``: built on the spot for a small
        text, in the detection process for a big one (a backend parses the whole file)."""
        if len(text) <= INLINE_BYTES:
            return kernel.backend.make_problem(uri_to_path(uri), text, function=kernel.name)
        return await asyncio.get_running_loop().run_in_executor(
            self._executor(), _problem_in_child, kernel.target, settings, uri_to_path(uri), text, kernel.name
        )

    def problem(self, uri: str, kernel: DetectedKernel, settings: dict[str, Any]) -> Any:
        """The backend's Problem for a kernel of the current text, for features that only
        look at it (similar runs). A big document's is built in the detection process:
        until it is ready (or after an edit) this returns the last one, or None."""
        source = self.source(uri)
        if source is None:
            return None
        text, _version = source
        key = (uri, kernel.name)
        text_id = hash(text)
        cached = self._problems.get(key)
        if cached is not None and cached[0] == text_id:
            return cached[1]
        if len(text) <= INLINE_BYTES:
            problem = kernel.backend.make_problem(uri_to_path(uri), text, function=kernel.name)
            self._problems[key] = (text_id, problem)
            return problem
        if key not in self._building:
            self._building.add(key)
            loop = asyncio.get_running_loop()

            async def build() -> None:
                try:
                    await asyncio.sleep(DETECT_DEBOUNCE)  # built once typing pauses
                    now = self.source(uri)
                    if now is None:
                        return
                    problem = await loop.run_in_executor(
                        self._executor(), _problem_in_child, kernel.target, settings, uri_to_path(uri), now[0], kernel.name
                    )
                    self._problems[key] = (hash(now[0]), problem)
                except Exception:
                    log.debug("problem for %s failed", key, exc_info=True)
                finally:
                    self._building.discard(key)

            self._tasks.add(loop.create_task(build()))
            self._tasks = {t for t in self._tasks if not t.done()}
        return cached[1] if cached is not None else None

    async def in_process(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in the detection process (a module-level function): work on a big
        document that would hold the server's interpreter for too long."""
        return await asyncio.get_running_loop().run_in_executor(self._executor(), fn, *args)

    def source(self, uri: str) -> tuple[str, int | None] | None:
        """The document's current text and version (set by the server)."""
        return None

    def _executor(self) -> Any:
        if self._pool is None:
            import concurrent.futures
            import multiprocessing

            self._pool = concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    async def close(self) -> None:
        """End the detection process (waiting for it briefly, then killing it: a scan of a
        big document may take seconds, and an orphaned process would hold the server's
        stdout open, so the client would never see the server go)."""
        pool = self._pool
        if pool is not None:
            loop = asyncio.get_running_loop()
            try:
                await asyncio.wait_for(loop.run_in_executor(None, lambda: pool.shutdown(wait=True, cancel_futures=True)), 3.0)
            except Exception:
                log.debug("detection process did not end in time", exc_info=True)
        self.kill()

    def kill(self) -> None:
        """End the detection process now (``exit``)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for proc in list((getattr(pool, "_processes", None) or {}).values()):
            try:
                proc.kill()
            except Exception:
                pass
        try:
            pool.shutdown(wait=False, cancel_futures=True)
        except Exception:
            pass


def kernel_at(kernels: list[DetectedKernel], line: int | None = None, name: str | None = None) -> DetectedKernel | None:
    """The kernel by name, else the one holding ``line``, else the only one."""
    if name:
        return next((k for k in kernels if k.name == name), None)
    if line is not None:
        return next((k for k in kernels if k.span.contains_line(line)), None)
    return kernels[0] if len(kernels) == 1 else None
