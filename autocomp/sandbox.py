"""Run untrusted programs (built candidates, harnesses) in their own process group with
wall-time, CPU-time and memory limits, and kill the whole group on timeout or cancel.

Every backend uses this; nothing a candidate does can outlive its limits or the task that
awaits it.
"""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

DEFAULT_MEMORY_BYTES = 4 * 1024**3


@dataclass
class ProcessResult:
    returncode: int | None  # None when killed for timeout
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, limit: int = 4000) -> str:
        """The end of stderr+stdout, for feedback to the LLM and the user."""
        text = (self.stderr + ("\n" if self.stderr and self.stdout else "") + self.stdout).strip()
        return text if len(text) <= limit else "…" + text[-limit:]


def _limits(memory_bytes: int | None, cpu_seconds: float | None):
    def apply() -> None:
        os.setsid()
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if cpu_seconds:
            cpu = int(cpu_seconds) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _close_transport(proc: asyncio.subprocess.Process) -> None:
    """Close the subprocess transport now: left to the garbage collector it may be
    finalized after its event loop has closed, which raises "Event loop is closed"."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_limited(
    argv: Sequence[str],
    cwd: str,
    timeout: float,
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
    env: Mapping[str, str] | None = None,
    stdin_data: bytes | None = None,
    output_limit: int = 1 << 20,
) -> ProcessResult:
    """Run ``argv`` in ``cwd``; never raises for the program's own failures."""
    start = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=asyncio.subprocess.PIPE if stdin_data is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=_limits(memory_bytes, timeout * 2),
    )
    timed_out = False
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin_data), timeout=timeout)
    except asyncio.TimeoutError:
        timed_out = True
        _kill_group(proc)
        out, err = await proc.communicate()
    except asyncio.CancelledError:
        _kill_group(proc)
        _close_transport(proc)
        raise
    finally:
        if proc.returncode is None:
            _kill_group(proc)
    # A candidate may have left children behind (fork bombs, background sleeps).
    _kill_group(proc)
    _close_transport(proc)
    return ProcessResult(
        returncode=None if timed_out else proc.returncode,
        stdout=out[:output_limit].decode("utf-8", "replace"),
        stderr=err[:output_limit].decode("utf-8", "replace"),
        seconds=time.monotonic() - start,
        timed_out=timed_out,
    )


def cpu_slots() -> int:
    """How many candidates to evaluate at once on this machine."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
