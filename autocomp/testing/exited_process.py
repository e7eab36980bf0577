"""A test double for the process behind a kernel-process connection: tests that feed a
crafted request stream to ``KernelProcess`` (from a file, no process at all) hand it this,
a process that has already exited cleanly."""

from __future__ import annotations


class ExitedProcess:
    returncode = 0

    def poll(self) -> int:
        return 0

    def kill(self) -> None:
        pass

    def wait(self, timeout: float | None = None) -> int:
        return 0
