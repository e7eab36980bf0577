"""A bare JSON-RPC client over the server's stdio, for what a pygls client cannot send:
malformed parameters, and ``exit`` without ``shutdown``."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from typing import Any


class RawServer:
    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autocomp.server"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})},
        )
        self.messages: "queue.Queue[dict[str, Any]]" = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr = b""
        self._ids = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            headers: dict[str, str] = {}
            while True:
                line = out.readline()
                if not line:
                    return
                line = line.strip()
                if not line:
                    break
                key, _, value = line.decode().partition(":")
                headers[key.strip().lower()] = value.strip()
            body = out.read(int(headers.get("content-length", "0")))
            self.messages.put(json.loads(body))

    def _read_err(self) -> None:
        err = self.proc.stderr
        assert err is not None
        for chunk in iter(lambda: err.read(4096), b""):
            self.stderr += chunk

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def request(self, method: str, params: Any = None, timeout: float = 5.0, raw_params: bool = True) -> dict[str, Any]:
        """Send a request; its response (``result`` or ``error``), answering the server's
        own requests (configuration, progress) on the way. Raises TimeoutError on a hang."""
        self._ids += 1
        rid = self._ids
        msg: dict[str, Any] = {"id": rid, "method": method}
        if params is not None or not raw_params:
            msg["params"] = params
        self.send(msg)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                m = self.messages.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self.seen.append(m)
            if m.get("id") == rid and "method" not in m:
                return m
            if "method" in m and "id" in m:  # a request from the server
                result: Any = [None] if m["method"] == "workspace/configuration" else None
                self.send({"id": m["id"], "result": result})
        raise TimeoutError(f"no response to {method} {params!r} within {timeout} s")

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, "params": params})

    def initialize(self, settings: dict[str, Any], root: str) -> None:
        caps = {"window": {"workDoneProgress": True}, "workspace": {"workspaceEdit": {"documentChanges": True}}}
        self.request("initialize", {"processId": os.getpid(), "rootUri": "file://" + root, "capabilities": caps,
                                    "initializationOptions": settings})
        self.notify("initialized", {})

    def wait_exit(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
