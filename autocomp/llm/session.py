"""Recorded sessions: ``--record FILE`` writes every prompt hash and reply of a run as JSON
lines; ``replay:FILE`` serves them back by prompt hash with no network.

A session file starts with a header line ``{"autocomp_session": 1, ...}`` -- with ``search``,
the search settings it was recorded with, which a replay uses unless the user overrides
them (sessions recorded before that field existed replay under the defaults); each later line is
``{"prompt_hash", "sample", "kind", "model", "reply", "usage", "prompt_head"}``. The prompt
head (its first lines) is kept so a missing reply can be explained to the user.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from autocomp.llm.base import LLMCallError, LLMClient, LLMConfigError, LLMReply, LLMRequest
from autocomp.model import Usage

FORMAT_VERSION = 1


def _prompt_head(request: LLMRequest) -> str:
    lines = [line for line in request.user.splitlines() if line.strip()]
    return " / ".join(lines[:2])[:200]


class SessionRecorder:
    """Appends one line per reply, flushed at once so a killed run keeps what it paid for."""

    def __init__(self, path: str, note: str = "", header: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._seen: set[tuple[str, int]] = set()
        fresh = not self.path.exists() or self.path.stat().st_size == 0
        if not fresh:
            for entry in _read_entries(self.path):
                self._seen.add((entry["prompt_hash"], int(entry.get("sample", 0))))
        self._file = open(self.path, "a", encoding="utf-8")
        if fresh:
            first = {"autocomp_session": FORMAT_VERSION, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "note": note}
            first.update(header or {})
            self._write(first)

    def _write(self, obj: dict[str, Any]) -> None:
        self._file.write(json.dumps(obj, sort_keys=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def record(self, request: LLMRequest, sample: int, reply: LLMReply) -> None:
        key = (request.prompt_hash, sample)
        if key in self._seen:
            return
        self._seen.add(key)
        self._write(
            {
                "prompt_hash": request.prompt_hash,
                "sample": sample,
                "kind": request.kind,
                "model": reply.model,
                "reply": reply.text,
                "usage": reply.usage.to_json(),
                "truncated": reply.truncated,
                "prompt_head": _prompt_head(request),
            }
        )

    def close(self) -> None:
        self._file.close()


def read_header(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The session's header line (``{}`` if it has none or it is not JSON)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                return {}
            return obj if isinstance(obj, dict) and "autocomp_session" in obj else {}
    return {}


def _read_entries(path: Path) -> list[dict[str, Any]]:
    entries = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LLMConfigError(f"{path}:{number}: not a recorded session line ({exc.msg})") from None
            if "autocomp_session" in obj:
                continue
            if not isinstance(obj, dict) or "prompt_hash" not in obj or "reply" not in obj:
                raise LLMConfigError(f"{path}:{number}: a session line needs prompt_hash and reply")
            entries.append(obj)
    return entries


class ReplayClient(LLMClient):
    """Serves a recorded session. It never touches the network and says which prompt it
    has no reply for (usually: the prompts, the seed or the search flags changed since
    the session was recorded)."""

    is_replay = True

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise LLMConfigError(f"replay:{path}: no such file (record one with `autocomp optimize ... --record FILE`)")
        self.spec = f"replay:{path}"
        self._replies: dict[str, dict[int, dict[str, Any]]] = {}
        for entry in _read_entries(self.path):
            self._replies.setdefault(entry["prompt_hash"], {})[int(entry.get("sample", 0))] = entry

    def __len__(self) -> int:
        return sum(len(v) for v in self._replies.values())

    async def complete(self, request: LLMRequest, sample: int) -> LLMReply:
        by_sample = self._replies.get(request.prompt_hash)
        if not by_sample:
            raise LLMCallError(
                f"replay:{self.path.name} has no reply for this {request.kind} prompt "
                f"(hash {request.prompt_hash[:12]}, starting “{_prompt_head(request)[:80]}”); the session was "
                "recorded with other prompts, seed or search flags — rerun with the flags it was recorded with, "
                "or record a new session",
                retryable=False,
            )
        entry = by_sample.get(sample)
        if entry is None:
            entry = by_sample[sorted(by_sample)[sample % len(by_sample)]]
        usage = Usage.from_json(entry.get("usage", {}))
        return LLMReply(
            text=str(entry["reply"]),
            model=f"{self.spec} (recorded from {entry.get('model', '?')})",
            usage=usage,
            replay=True,
            truncated=bool(entry.get("truncated", False)),
        )
