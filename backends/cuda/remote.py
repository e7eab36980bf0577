"""Evaluating on a GPU host the user has, through a worker command.

The engine treats a remote worker like any evaluator: ``CudaBackend.evaluate`` sends the
problem and a batch of candidate codes as one JSON document on the worker's standard
input and reads the evaluations back from its standard output. The command is anything
that starts the worker on the GPU host, for example::

    autocomp.target.cuda.remote = "ssh gpuhost python -m autocomp.backends.cuda.worker"
    autocomp.target.cuda.remote = "srun --gres=gpu:1 python -m autocomp.backends.cuda.worker"

Protocol ``autocomp-cuda/1``:
- request (stdin): ``{"protocol": "autocomp-cuda/1", "problem": Problem JSON, "codes": [str],
  "settings": {target settings}}``
- reply (stdout): one line ``AUTOCOMP-WORKER {"protocol": ..., "host": str,
  "evaluations": [Evaluation JSON]}`` or ``AUTOCOMP-WORKER {"protocol": ..., "error": str}``.
  Other stdout lines (login banners) are ignored; the worker's own log goes to stderr.
The worker runs the candidates in their own processes, so nothing a candidate prints can
reach the reply line.

The command is a transport the user configured: candidate code travels through it as data
and never runs here, so it is started with :func:`autocomp.sandbox.run_transport` (outside
the jail, which has no network, but with none of the user's variables besides what ``ssh`` /
``srun`` need: no API keys reach the GPU host). The worker on the GPU host evaluates with
the same backend, so every candidate runs in that host's own sandbox.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
from typing import Any

from autocomp.backends.base import BackendError
from autocomp.model import Evaluation, Problem, Verdict
from autocomp.sandbox import run_transport

PROTOCOL = "autocomp-cuda/1"
MARKER = "AUTOCOMP-WORKER "


def request(problem: Problem, codes: list[str], settings: dict[str, Any]) -> bytes:
    return json.dumps({"protocol": PROTOCOL, "problem": problem.to_json(), "codes": codes,
                       "settings": settings}).encode()


def parse_reply(stdout: str) -> dict[str, Any]:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(MARKER)]
    if not lines:
        raise ValueError("no AUTOCOMP-WORKER line in the worker's output")
    reply = json.loads(lines[-1][len(MARKER):])
    if reply.get("protocol") != PROTOCOL:
        raise ValueError(f"worker speaks {reply.get('protocol')!r}, expected {PROTOCOL!r}: update autocomp on the GPU host")
    return reply


async def evaluate_remote(command: str, problem: Problem, codes: list[str], settings: dict[str, Any]) -> list[Evaluation]:
    """Run the worker command once for the whole batch."""
    argv = shlex.split(command)
    if not argv:
        raise BackendError("autocomp.target.cuda.remote is empty; set it to a worker command or remove it")
    timeout = float(settings.get("remote_timeout", 1800.0))
    with tempfile.TemporaryDirectory(prefix="autocomp-remote-") as tmp:
        proc = await run_transport(argv, cwd=tmp, timeout=timeout, stdin_data=request(problem, codes, settings))
    if proc.timed_out:
        return [Evaluation(Verdict.TIMEOUT, {}, f"remote worker `{command}` did not answer within {timeout:.0f} s",
                           tier="remote") for _ in codes]
    try:
        reply = parse_reply(proc.stdout)
    except ValueError as exc:
        raise BackendError(f"remote CUDA worker `{command}` failed (exit {proc.returncode}): {exc}\n{proc.tail(2000)}\n"
                           "Check that `python -m autocomp.backends.cuda.worker` runs on the GPU host.") from None
    if "error" in reply:
        raise BackendError(f"remote CUDA worker `{command}`: {reply['error']}")
    evaluations = [Evaluation.from_json(e) for e in reply.get("evaluations", [])]
    if len(evaluations) != len(codes):
        raise BackendError(f"remote CUDA worker returned {len(evaluations)} evaluations for {len(codes)} candidates")
    host = reply.get("host", "remote host")
    for ev in evaluations:
        ev.feedback = f"{ev.feedback}\n(evaluated on {host} by `{command}`)".strip()
    return evaluations
