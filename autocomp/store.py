"""One persistent store for everything that costs money or time (DESIGN principle 6).

- LLM replies keyed by model + prompt + sample index: a cache hit costs no tokens.
- Evaluations keyed by code + problem + evaluator identity: nothing is evaluated twice.
- Runs: metadata (problem, settings, models) and the event log, so a run can be listed,
  shown and resumed exactly; and each finished run's schedule (the plans on its best path),
  which a later search on a similar kernel can start from.

Backed by diskcache with a JSON-only serializer: the cache folder is created owner-only
and anything that is not JSON is refused, so nobody who can write the folder can make
Autocomp unpickle code (CVE-2025-69872).
"""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import diskcache

from autocomp.errors import UserError
from autocomp.model import sha256


class StoreError(UserError):
    pass


class JSONDisk(diskcache.Disk):
    """A diskcache Disk that stores values as UTF-8 JSON and never unpickles."""

    def store(self, value: Any, read: bool, key: Any = diskcache.core.UNKNOWN):  # type: ignore[override]
        if read:
            raise StoreError("file-like values are not stored")
        # Insertion order is kept (no sort_keys): metric order reaches prompts, and a
        # cached evaluation must produce the very prompt a fresh one did.
        data = json.dumps(value, separators=(",", ":")).encode("utf-8")
        return super().store(data, False, key=key)

    def fetch(self, mode: int, filename: str, value: Any, read: bool):  # type: ignore[override]
        if mode == diskcache.core.MODE_PICKLE:
            raise StoreError("refusing to unpickle a store entry; the store folder may have been tampered with")
        data = super().fetch(mode, filename, value, read)
        if isinstance(data, (bytes, bytearray)):
            try:
                return json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise StoreError(f"a store entry is damaged ({exc}); the store folder may have been tampered with") from None
        return data

    def put(self, key: Any):  # type: ignore[override]
        if not isinstance(key, str):
            raise StoreError("store keys are strings")
        return super().put(key)

    def get(self, key: Any, raw: bool):  # type: ignore[override]
        if not raw:
            raise StoreError("refusing to unpickle a store key")
        return super().get(key, raw)


def default_home() -> Path:
    env = os.environ.get("AUTOCOMP_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "autocomp"


def build_cache_dir(name: str) -> Path:
    """Where build artifacts (the Spike extension, compiled objects) live:
    ``$AUTOCOMP_BUILD_CACHE/<name>``, else ``<home>/cache/<name>``. Separate from the store
    so tests can isolate stores while sharing one build of each tool."""
    env = os.environ.get("AUTOCOMP_BUILD_CACHE")
    base = Path(env).expanduser() if env else default_home() / "cache"
    return base / name


FIX = "move the folder away (or set AUTOCOMP_HOME / autocomp.store to another one) to start a new store"


def _fail(what: str, exc: BaseException | None = None) -> StoreError:
    detail = f" ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})" if exc is not None else ""
    return StoreError(f"{what}{detail}")


def _check_database(db: Path) -> None:
    """Refuse a store file that is empty or not ours, instead of reading it as empty."""
    if not db.exists():
        return
    if not db.is_file():
        raise StoreError(f"the store file {db} is not a regular file; {FIX}")
    if db.stat().st_size == 0:
        raise StoreError(f"the store file {db} is empty (zero bytes): it was truncated or damaged; {FIX}")
    try:
        with open(db, "rb") as handle:
            head = handle.read(16)
    except OSError as exc:
        raise _fail(f"the store file {db} cannot be read; check its permissions", exc) from None
    if head != b"SQLite format 3\x00":
        raise StoreError(f"the store file {db} is not an Autocomp store (not an SQLite database); {FIX}")
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=60)
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise _fail(f"the store file {db} is damaged; {FIX}", exc) from None
    if tables and not {"Cache", "Settings"} <= tables:
        raise StoreError(f"the store file {db} is an SQLite database of something else (tables {', '.join(sorted(tables))}); {FIX}")


class Store:
    """Typed access to the cache. Safe across threads and processes (diskcache + SQLite);
    run ids and the run index are allocated under a file lock (``store.lock``), so two
    processes creating runs at once never share an id or lose an index entry. Every
    failure of the store itself is a :class:`StoreError` with one line saying what and how
    to fix it."""

    def __init__(self, cache: diskcache.Cache, home: Path) -> None:
        self._cache = cache
        self.home = home

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> "Store":
        home = Path(path).expanduser() if path else default_home()
        try:
            if home.exists() and not home.is_dir():
                raise StoreError(f"the store folder {home} is a file; {FIX}")
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                os.chmod(home, 0o700)
            except PermissionError:
                pass
            folder = home / "store"
            if folder.exists() and not folder.is_dir():
                raise StoreError(f"the store folder {folder} is a file, not a store; {FIX}")
            _check_database(folder / "cache.db")
            cache = diskcache.Cache(
                str(folder),
                disk=JSONDisk,
                eviction_policy="none",
                size_limit=2**62,
                timeout=60,
            )
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise _fail(f"the store at {home} cannot be opened; check that it is writable, or {FIX}", exc) from None
        try:
            os.chmod(home / "store", 0o700)
        except OSError:
            pass
        return cls(cache, home)

    def close(self) -> None:
        try:
            self._cache.close()
        except (sqlite3.Error, OSError):
            pass

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock across processes (fcntl on ``store.lock``) for read-modify-write
        of shared entries: run ids and the run index."""
        try:
            handle = open(self.home / "store.lock", "a+")
        except OSError as exc:
            raise _fail(f"the store at {self.home} cannot be locked; check that it is writable", exc) from None
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            yield
        finally:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
            finally:
                handle.close()

    # -- generic ---------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self._cache.get(key, default=default)
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise _fail(f"the store at {self.home} cannot be read; {FIX}", exc) from None

    def set(self, key: str, value: Any) -> None:
        try:
            self._cache.set(key, value)
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise _fail(f"the store at {self.home} cannot be written; check that it is writable and the disk has room", exc) from None

    def delete(self, key: str) -> bool:
        try:
            return bool(self._cache.delete(key))
        except (sqlite3.Error, OSError) as exc:
            raise _fail(f"the store at {self.home} cannot be written; check that it is writable", exc) from None

    # -- LLM replies -----------------------------------------------------------------
    @staticmethod
    def llm_key(model: str, prompt_hash: str, sample: int) -> str:
        return f"llm:{sha256(model)[:16]}:{prompt_hash}:{sample}"

    def get_reply(self, model: str, prompt_hash: str, sample: int) -> dict[str, Any] | None:
        return self.get(self.llm_key(model, prompt_hash, sample))

    def put_reply(self, model: str, prompt_hash: str, sample: int, reply: dict[str, Any]) -> None:
        self.set(self.llm_key(model, prompt_hash, sample), reply)

    # -- evaluations -----------------------------------------------------------------
    @staticmethod
    def eval_key(code: str, problem_hash: str, evaluator: str) -> str:
        return f"eval:{sha256(evaluator)[:16]}:{problem_hash[:32]}:{sha256(code)}"

    # -- runs ------------------------------------------------------------------------
    def new_run_id(self, problem_name: str) -> str:
        """A run id no other process has or will get: allocated and reserved under the lock."""
        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in problem_name)[:32]
        base = f"{stamp}-{safe}"
        with self._locked():
            run_id, n = base, 1
            while self.get(f"run:{run_id}:meta") is not None or self.get(f"run:{run_id}:reserved") is not None:
                n += 1
                run_id = f"{base}-{n}"
            self.set(f"run:{run_id}:reserved", True)
        return run_id

    def save_run_meta(self, run_id: str, meta: dict[str, Any]) -> None:
        self.set(f"run:{run_id}:meta", meta)
        if run_id in self.get("runs:index", []):
            return
        with self._locked():  # read-modify-write of the shared index
            index = self.get("runs:index", [])
            if run_id not in index:
                index.append(run_id)
                self.set("runs:index", index)

    def run_meta(self, run_id: str) -> dict[str, Any] | None:
        return self.get(f"run:{run_id}:meta")

    def run_ids(self) -> list[str]:
        return list(self.get("runs:index", []))

    @staticmethod
    def _event_key(run_id: str, seq: int, gen: int = 0) -> str:
        return f"run:{run_id}:event:{seq:08d}" if gen == 0 else f"run:{run_id}:g{gen}:event:{seq:08d}"

    def append_event(self, run_id: str, seq: int, event: dict[str, Any], gen: int = 0) -> None:
        """Events are stored one key each, so a kill mid-run loses at most the last one.
        ``gen`` > 0: a resumed run's own log, which becomes the run's log (``events_gen``
        in its metadata) only once it succeeds, so a failed resume never touches it."""
        self.set(self._event_key(run_id, seq, gen), event)

    def clear_events(self, run_id: str, gen: int = 0) -> None:
        seq = 0
        while self.delete(self._event_key(run_id, seq, gen)):
            seq += 1

    def events_gen(self, run_id: str) -> int:
        meta = self.run_meta(run_id) or {}
        try:
            return int(meta.get("events_gen", 0))
        except (TypeError, ValueError):
            return 0

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        gen = self.events_gen(run_id)
        seq = 0
        while True:
            event = self.get(self._event_key(run_id, seq, gen))
            if event is None:
                return
            yield event
            seq += 1

    # -- LLM requests in flight (what a resume sends again) ---------------------------
    def inflight(self, run_id: str) -> list[str]:
        return list(self.get(f"run:{run_id}:inflight", []) or [])

    def set_inflight(self, run_id: str, keys: list[str]) -> None:
        self.set(f"run:{run_id}:inflight", keys)

    # -- schedules -------------------------------------------------------------------
    def save_schedule(self, run_id: str, schedule: dict[str, Any]) -> None:
        """A finished run's schedule: the plans on its best path, in order, with the
        kernel's signature (what reuse judges similarity on). See autocomp.schedules."""
        self.set(f"run:{run_id}:schedule", schedule)

    def schedule(self, run_id: str) -> dict[str, Any] | None:
        return self.get(f"run:{run_id}:schedule")
