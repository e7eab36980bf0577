"""Checks that `autocomp lsp` starts and answers `initialize` before the UI test opens a
browser, so a broken server fails in seconds with its own error instead of as a UI timeout.

    python3 lsp_ping.py AUTOCOMP_EXECUTABLE
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message(stream) -> dict:
    length = None
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the server closed its output")
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if length is None:
        raise ValueError("a message without Content-Length")
    return json.loads(stream.read(length))


def main() -> int:
    exe = sys.argv[1] if len(sys.argv) > 1 else "autocomp"
    started = time.monotonic()
    proc = subprocess.Popen([exe, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    try:
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                "params": {"processId": None, "rootUri": None, "capabilities": {},
                                           "clientInfo": {"name": "autocomp-uitest-ping"}}}))
        proc.stdin.flush()
        while True:
            msg = read_message(proc.stdout)
            if msg.get("id") == 1:
                break
        if "error" in msg:
            raise RuntimeError(f"initialize failed: {msg['error']}")
        caps = msg["result"]["capabilities"]
        commands = (caps.get("executeCommandProvider") or {}).get("commands", [])
        proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
        proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
        proc.stdin.flush()
        proc.wait(timeout=10)
    except Exception as exc:
        proc.kill()
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        print(f"uitest: `{exe} lsp` did not answer initialize: {exc}\n{err[-2000:]}", file=sys.stderr)
        return 1
    needed = {"autocomp.optimize", "autocomp.cancel", "autocomp.applyCandidate", "autocomp.showDiff"}
    missing = needed - set(commands)
    if missing:
        print(f"uitest: `{exe} lsp` does not offer {sorted(missing)}", file=sys.stderr)
        return 1
    print(f"[uitest] `{exe} lsp` answered initialize in {time.monotonic() - started:.1f} s with commands {sorted(commands)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
