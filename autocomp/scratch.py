"""A private scratch folder that never outlives its owner.

Evaluators keep each child's work folder under one root. The root is made on first use and
removed by ``close()``, when its owner is collected, or at interpreter exit: a
``weakref.finalize`` runs then, where the ``__del__`` of a backend that lives in a module
global may not, and a CLI run would leave one folder in /tmp per evaluator. A process killed
outright (SIGKILL, an OOM kill, a timeout) runs none of these: its root carries its pid, and
the next process to make a root removes those of dead processes (after an hour, so a
folder is never taken from a process another PID namespace hides)."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
import weakref

# A root of a dead process is removed only once it is this old (seconds).
STALE_AFTER = 3600.0
_swept: set[str] = set()  # prefixes this process has swept already


class ScratchRoot:
    """``path`` makes the folder (mode 0700) on first use; ``close()`` removes it."""

    def __init__(self, owner: object, prefix: str) -> None:
        self._owner = weakref.ref(owner)
        self._prefix = prefix
        self._dir: str | None = None
        self._cleanup: weakref.finalize | None = None

    @property
    def path(self) -> str:
        if self._dir is None or not os.path.isdir(self._dir):
            if self._prefix not in _swept:
                _swept.add(self._prefix)
                sweep_stale(self._prefix)
            self._dir = tempfile.mkdtemp(prefix=f"{self._prefix}{os.getpid()}-")
            owner = self._owner()
            self._cleanup = weakref.finalize(owner if owner is not None else self, shutil.rmtree, self._dir, True)
        return self._dir

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
        self._dir = self._cleanup = None


def sweep_stale(prefix: str, folder: str | None = None, now: float | None = None) -> list[str]:
    """Remove the roots ``prefix<pid>-*`` in ``folder`` (the temp folder) that this user owns,
    whose process no longer exists and that are older than STALE_AFTER; the removed paths."""
    folder = folder or tempfile.gettempdir()
    now = time.time() if now is None else now
    removed: list[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(prefix):
            continue
        pid = name[len(prefix):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or now - st.st_mtime < STALE_AFTER:
            continue
        if _alive(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # (someone else's process, or not a pid we can ask about: keep it)
    return True
