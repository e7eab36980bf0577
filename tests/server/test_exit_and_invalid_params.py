"""``exit`` without ``shutdown`` while a search runs: the process ends within a second,
with no traceback spam (a subprocess server driven over raw stdio)."""

from __future__ import annotations

import time

from lsp_harness import KERNEL, default_rules, server_settings
from raw_client import RawServer

from autocomp.testing.fake_llm import FakeLLMServer


def test_exit_without_shutdown_during_a_search_ends_fast_and_quietly(tmp_path):
    with FakeLLMServer(default_rules(), delay=0.3) as slow:
        settings = server_settings(str(tmp_path), search={"iterations": 20, "beam": 2, "plans": 2, "implementations": 1})
        server = RawServer({**slow.env(), "AUTOCOMP_HOME": str(tmp_path / "home")})
        try:
            server.initialize(settings, str(tmp_path))
            path = tmp_path / "k.kern"
            path.write_text(KERNEL)
            uri = "file://" + str(path)
            server.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "plaintext", "version": 1, "text": KERNEL}})
            started = server.request("workspace/executeCommand", {"command": "autocomp.optimize", "arguments": [{"uri": uri, "line": 2}]})
            assert "result" in started, started
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and slow.answered < 2:
                time.sleep(0.05)
            assert slow.answered >= 2, "the search never got going"
            t0 = time.monotonic()
            server.notify("exit")
            code = server.wait_exit(5)
            elapsed = time.monotonic() - t0
            assert code is not None, "the server did not exit"
            assert elapsed < 1.0, f"exit took {elapsed:.2f} s"
            time.sleep(0.2)
            err = server.stderr.decode(errors="replace")
            assert "Traceback" not in err, err[-3000:]
            assert len(server.stderr) < 20_000, len(server.stderr)
        finally:
            server.kill()


BAD_REQUESTS = [
    ("textDocument/codeLens", {}),
    ("textDocument/hover", {"textDocument": 5}),
    ("textDocument/hover", None),
    ("textDocument/codeAction", {"textDocument": {"uri": "file:///x.kern"}}),
    ("workspace/executeCommand", {}),
    ("workspace/executeCommand", {"command": 5}),
    ("workspace/executeCommand", {"command": "autocomp.optimize", "arguments": 7}),
    ("workspace/executeCommand", {"command": "autocomp.optimize", "arguments": [[1, 2]]}),
    ("workspace/executeCommand", {"command": "autocomp.revert", "arguments": [{"jobId": 3}]}),
    ("workspace/executeCommand", {"command": "autocomp.applyCandidate", "arguments": [{}]}),
    ("workspace/executeCommand", {"command": "autocomp.nope", "arguments": []}),
    ("autocomp/run", "job-1"),
    ("autocomp/run", {"jobId": 5}),
    ("autocomp/candidate", None),
    ("autocomp/candidate", {"jobId": []}),
    ("autocomp/nope", {}),
]


def test_invalid_params_to_any_request_get_an_error_response(tmp_path):
    """Standard requests whose params do not match the method's type, and the custom
    commands and autocomp/* requests, are answered with a JSON-RPC error (never a hang)."""
    server = RawServer({"AUTOCOMP_HOME": str(tmp_path / "home")})
    try:
        server.initialize(server_settings(str(tmp_path)), str(tmp_path))
        for method, params in BAD_REQUESTS:
            reply = server.request(method, params, timeout=5)
            assert "error" in reply, (method, params, reply)
            assert reply["error"]["code"] in (-32602, -32601), (method, params, reply)
        # Still healthy afterwards.
        assert server.request("autocomp/jobs", {})["result"] == {"jobs": []}
        server.request("shutdown")
        server.notify("exit")
        assert server.wait_exit(5) == 0
        assert "Traceback" not in server.stderr.decode(errors="replace")
    finally:
        server.kill()
