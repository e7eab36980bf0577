"""A private scratch folder that never outlives its owner.

Evaluators keep each child's work folder under one root. The root is made on first use and
removed by ``close()``, when its owner is collected, or at interpreter exit: a
``weakref.finalize`` runs then, where the ``__del__`` of a backend that lives in a module
global may not, and a CLI run would leave one folder in /tmp per evaluator."""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref


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
            self._dir = tempfile.mkdtemp(prefix=self._prefix)
            owner = self._owner()
            self._cleanup = weakref.finalize(owner if owner is not None else self, shutil.rmtree, self._dir, True)
        return self._dir

    def close(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
        self._dir = self._cleanup = None
