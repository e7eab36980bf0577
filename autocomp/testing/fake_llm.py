"""FakeLLMServer — a loopback TEST DOUBLE that speaks OpenAI chat completions
(``POST /v1/chat/completions``) and Anthropic messages (``POST /v1/messages``) with scripted
replies, so tests exercise the real SDKs end to end (FACTS: their httpx2 transport is not
intercepted by httpx mocks).

Replies come from rules: ``{"role": "plan"|"implement"|"repair"|"any", "match": [substrings],
"reply": "..."}`` or ``"replies": [...]`` (cycled). The role of a request is read from the
prompt's request line (``OPTIMIZATION PLAN REQUEST`` / ``IMPLEMENTATION REQUEST`` /
``REPAIR REQUEST``). Faults are scripted per request in arrival order: ``"500"``, ``"429"``,
``"hang"``, ``"empty"``, ``"truncate"``, ``"ok"``. ``delay`` adds fixed latency;
``hang_after`` makes every request after the first N hang (to kill a client mid-run).

Run standalone for editor end-to-end tests::

    python -m autocomp.testing.fake_llm --script rules.json   # prints the base URL
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROLE_MARKERS = {
    "plan": "OPTIMIZATION PLAN REQUEST",
    "implement": "IMPLEMENTATION REQUEST",
    "repair": "REPAIR REQUEST",
}
NO_RULE_REPLY = "I have no scripted reply for this prompt."


def role_of(prompt: str) -> str:
    for role, marker in ROLE_MARKERS.items():
        if marker in prompt:
            return role
    return "any"


class FakeLLMServer:
    def __init__(
        self,
        rules: list[dict[str, Any]] | None = None,
        delay: float = 0.0,
        faults: list[str] | None = None,
        hang_after: int | None = None,
        hang_seconds: float = 3600.0,
    ) -> None:
        self.rules = list(rules or [])
        self.delay = delay
        self.faults = list(faults or [])
        self.hang_after = hang_after
        self.hang_seconds = hang_seconds
        self.requests = 0  # every request received
        self.answered = 0  # successful replies sent
        self.by_role: Counter[str] = Counter()
        self.prompts: list[str] = []
        self._rule_uses: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> "FakeLLMServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # keep test output clean
                return

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                status, payload, *extra = server._handle(self.path, body)
                headers = extra[0] if extra else {}
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    if status == 429 and "Retry-After" not in headers:
                        self.send_header("Retry-After", "0")
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        class Server(ThreadingHTTPServer):
            request_queue_size = 256  # many clients connect at once; the default 5 drops SYNs

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "FakeLLMServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "start() the server first"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """Environment that points both real SDKs at this server."""
        return {
            "OPENAI_BASE_URL": self.base_url + "/v1",
            "OPENAI_API_KEY": "test-key-not-secret",
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "test-key-not-secret",
        }

    # -- behaviour -------------------------------------------------------------------
    def _next_fault(self) -> str:
        with self._lock:
            self.requests += 1
            number = self.requests
            fault = self.faults.pop(0) if self.faults else "ok"
        if self.hang_after is not None and number > self.hang_after:
            return "hang"
        return fault

    def reply_for(self, prompt: str) -> str:
        role = role_of(prompt)
        with self._lock:
            for index, rule in enumerate(self.rules):
                if rule.get("role", "any") not in ("any", role):
                    continue
                if not all(m in prompt for m in rule.get("match", [])):
                    continue
                replies = rule.get("replies") or [rule.get("reply", "")]
                choice = replies[self._rule_uses[index] % len(replies)]
                self._rule_uses[index] += 1
                return choice
        return NO_RULE_REPLY

    def _handle(self, path: str, body: dict[str, Any]) -> tuple[Any, ...]:
        """(status, payload[, headers]). Faults: ``500``/``429``/``503``; ``429:N`` (a 429
        with ``Retry-After: N``); ``empty``; ``truncate``; ``hang``; ``badutf8`` (a 200
        whose body is not valid UTF-8); ``malformed`` (a 200 whose body is not a reply)."""
        anthropic = path.rstrip("/").endswith("/messages")
        if anthropic:
            prompt = str(body.get("system", "")) + "\n" + "\n".join(_text(m.get("content")) for m in body.get("messages", []))
        else:
            prompt = "\n".join(_text(m.get("content")) for m in body.get("messages", []))
        fault = self._next_fault()
        with self._lock:
            self.prompts.append(prompt)
            self.by_role[role_of(prompt)] += 1
        if fault == "hang":
            time.sleep(self.hang_seconds)
        if self.delay:
            time.sleep(self.delay)
        if fault in ("500", "429", "503"):
            return int(fault), {"error": {"message": f"scripted {fault}", "type": "server_error"}}
        if fault.startswith("429:"):
            return 429, {"error": {"message": "scripted 429", "type": "rate_limit"}}, {"Retry-After": fault[4:]}
        if fault == "badutf8":
            return 200, b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "\xff\xfe bad"}}]}'
        if fault == "malformed":
            return 200, b"<html>gateway says hello</html>"
        text = self.reply_for(prompt)
        finish = "stop"
        if fault == "empty":
            text = ""
        elif fault == "truncate":
            text = text[: max(1, len(text) // 2)]
            finish = "length"
        with self._lock:
            self.answered += 1
        model = body.get("model", "fake")
        tokens_in, tokens_out = max(1, len(prompt) // 4), max(1, len(text) // 4)
        if anthropic:
            return 200, {
                "id": f"msg_{self.requests}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "max_tokens" if finish == "length" else "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
            }
        return 200, {
            "id": f"chatcmpl-{self.requests}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
            "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out},
        }


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def load_rules(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    rules = data.get("rules") if isinstance(data, dict) else data
    if not isinstance(rules, list):
        raise ValueError(f"{path}: expected {{\"rules\": [...]}}")
    return rules


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Loopback fake LLM server (test double).")
    parser.add_argument("--script", help="JSON file with {\"rules\": [...]}")
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args(argv)
    server = FakeLLMServer(load_rules(args.script) if args.script else [], delay=args.delay).start()
    print(server.base_url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
