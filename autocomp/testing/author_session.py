"""Turn a hand-written script of plans and code into a replayable recorded session.

We have no API key here, so example sessions are authored: a person writes the plans and
the improved kernels (real, verified improvements), and this tool runs the REAL engine and
evaluator against the loopback fake LLM (a test double) serving those replies, recording
every prompt hash and reply with ``--record``. The session file says in its header that it
was authored, and every replay of it is labelled as a replay.

    python -m autocomp.testing.author_session SCRIPT.json --record OUT.jsonl -- FILE [optimize flags]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

from autocomp.testing.fake_llm import FakeLLMServer, load_rules


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("usage: python -m autocomp.testing.author_session SCRIPT.json --record OUT.jsonl -- FILE [optimize flags]", file=sys.stderr)
        return 2
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="author_session")
    parser.add_argument("script")
    parser.add_argument("--record", required=True)
    parser.add_argument("--model", default="authored-session")
    args = parser.parse_args(argv[:split])
    optimize_args = argv[split + 1 :]
    if os.path.exists(args.record):
        os.remove(args.record)
    server = FakeLLMServer(load_rules(args.script)).start()
    saved = {k: os.environ.get(k) for k in server.env()}
    os.environ.update(server.env())
    home = os.environ.get("AUTOCOMP_HOME")
    # A fresh store so the session records every reply instead of reusing cached ones.
    scratch_home = tempfile.mkdtemp(prefix="autocomp-author-")
    try:
        os.environ["AUTOCOMP_HOME"] = scratch_home
        from autocomp.cli.main import main as cli_main

        status = cli_main(["optimize", *optimize_args, "--llm", f"openai:{args.model}", "--record", args.record])
    finally:
        server.stop()
        shutil.rmtree(scratch_home, ignore_errors=True)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if home is None:
            os.environ.pop("AUTOCOMP_HOME", None)
        else:
            os.environ["AUTOCOMP_HOME"] = home
    _mark_authored(args.record)
    print(f"recorded {args.record}: {server.answered} replies ({dict(server.by_role)})", file=sys.stderr)
    return status


def _mark_authored(path: str) -> None:
    """Rewrite the header note so nobody mistakes the session for a live model's output."""
    import json

    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as handle:
        lines = handle.readlines()
    if lines:
        header = json.loads(lines[0])
        if "autocomp_session" in header:
            header["note"] = "authored session: plans and code written by the Autocomp developers, served by the fake LLM double and recorded through the real engine"
            lines[0] = json.dumps(header, sort_keys=True) + "\n"
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(lines)


if __name__ == "__main__":
    raise SystemExit(main())
