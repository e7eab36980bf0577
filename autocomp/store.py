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

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

import diskcache

from autocomp.model import sha256


class StoreError(Exception):
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
            return json.loads(data.decode("utf-8"))
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


class Store:
    """Typed access to the cache. Safe across threads and processes (diskcache + SQLite)."""

    def __init__(self, cache: diskcache.Cache, home: Path) -> None:
        self._cache = cache
        self.home = home

    @classmethod
    def open(cls, path: str | os.PathLike[str] | None = None) -> "Store":
        home = Path(path).expanduser() if path else default_home()
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.chmod(home, 0o700)
        except PermissionError:
            pass
        cache = diskcache.Cache(
            str(home / "store"),
            disk=JSONDisk,
            eviction_policy="none",
            size_limit=2**62,
            timeout=60,
        )
        try:
            os.chmod(home / "store", 0o700)
        except OSError:
            pass
        return cls(cache, home)

    def close(self) -> None:
        self._cache.close()

    # -- generic ---------------------------------------------------------------------
    def get(self, key: str, default: Any = None) -> Any:
        return self._cache.get(key, default=default)

    def set(self, key: str, value: Any) -> None:
        self._cache.set(key, value)

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
        stamp = time.strftime("%Y%m%d-%H%M%S")
        safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in problem_name)[:32]
        base = f"{stamp}-{safe}"
        run_id, n = base, 1
        while self.get(f"run:{run_id}:meta") is not None:
            n += 1
            run_id = f"{base}-{n}"
        return run_id

    def save_run_meta(self, run_id: str, meta: dict[str, Any]) -> None:
        self.set(f"run:{run_id}:meta", meta)
        index = self.get("runs:index", [])
        if run_id not in index:
            index.append(run_id)
            self.set("runs:index", index)

    def run_meta(self, run_id: str) -> dict[str, Any] | None:
        return self.get(f"run:{run_id}:meta")

    def run_ids(self) -> list[str]:
        return list(self.get("runs:index", []))

    def append_event(self, run_id: str, seq: int, event: dict[str, Any]) -> None:
        """Events are stored one key each, so a kill mid-run loses at most the last one."""
        self.set(f"run:{run_id}:event:{seq:08d}", event)

    def clear_events(self, run_id: str) -> None:
        """A resumed run writes its (replayed) events anew from the first one."""
        seq = 0
        while self._cache.delete(f"run:{run_id}:event:{seq:08d}"):
            seq += 1

    def events(self, run_id: str) -> Iterator[dict[str, Any]]:
        seq = 0
        while True:
            event = self.get(f"run:{run_id}:event:{seq:08d}")
            if event is None:
                return
            yield event
            seq += 1

    # -- schedules -------------------------------------------------------------------
    def save_schedule(self, run_id: str, schedule: dict[str, Any]) -> None:
        """A finished run's schedule: the plans on its best path, in order, with the
        kernel's signature (what reuse judges similarity on). See autocomp.schedules."""
        self.set(f"run:{run_id}:schedule", schedule)

    def schedule(self, run_id: str) -> dict[str, Any] | None:
        return self.get(f"run:{run_id}:schedule")
