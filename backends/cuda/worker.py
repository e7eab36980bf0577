"""The remote worker: ``python -m autocomp.backends.cuda.worker`` on a GPU host.

Reads one request from standard input, evaluates it with a local :class:`CudaBackend`
(which on a GPU host is the verified-and-timed tier) and prints one reply line; see
:mod:`autocomp.backends.cuda.remote` for the protocol.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys

from autocomp.backends.cuda.remote import MARKER, PROTOCOL


def _reply(obj: dict) -> None:
    print(MARKER + json.dumps({"protocol": PROTOCOL, **obj}), flush=True)


def main() -> int:
    from autocomp.backends.base import BackendError
    from autocomp.backends.cuda.backend import CudaBackend
    from autocomp.model import Problem

    try:
        req = json.loads(sys.stdin.read())
    except ValueError as exc:
        _reply({"error": f"unreadable request: {exc}"})
        return 2
    if req.get("protocol") != PROTOCOL:
        _reply({"error": f"request speaks {req.get('protocol')!r}, this worker speaks {PROTOCOL!r}"})
        return 2
    settings = {k: v for k, v in dict(req.get("settings") or {}).items() if k not in ("remote", "cache_dir", "nvcc")}
    try:
        backend = CudaBackend(settings)
        problem = Problem.from_json(req["problem"])  # a CandidateFileProblem for whole candidate files
        evaluations = asyncio.run(backend.evaluate(problem, list(req["codes"])))
    except (BackendError, KeyError, TypeError) as exc:
        _reply({"error": str(exc)})
        return 1
    _reply({"host": socket.gethostname(), "tier": backend.tier().name,
            "evaluations": [e.to_json() for e in evaluations]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
