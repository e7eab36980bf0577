"""Shared set-up for the Gemmini backend tests.

tests/conftest.py gives every test its own AUTOCOMP_HOME, and the Spike extension is
cached under AUTOCOMP_HOME, so each new backend would rebuild it with g++ (several
seconds). Build it once per test process in a shared folder and hand its path to every
backend through the ``extension`` setting, exactly as a user pointing at a prebuilt
extension would.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from autocomp.backends import get_backend
from autocomp.backends.gemmini import GemminiBackend

_SHARED_HOME = os.path.join(tempfile.gettempdir(), f"autocomp-test-gemmini-{os.getuid()}")
_extension: str | None = None


def extension_path() -> str:
    global _extension
    if _extension is None:
        from autocomp.backends.gemmini.toolchain import GemminiToolchain

        saved = os.environ.get("AUTOCOMP_HOME")
        os.environ["AUTOCOMP_HOME"] = _SHARED_HOME
        try:
            _extension = GemminiToolchain.discover({}).extension
        finally:
            if saved is None:
                os.environ.pop("AUTOCOMP_HOME", None)
            else:
                os.environ["AUTOCOMP_HOME"] = saved
    return _extension


def backend(**settings: Any) -> GemminiBackend:
    """A Gemmini backend using the shared prebuilt extension."""
    b = get_backend("gemmini", {"extension": extension_path(), **settings})
    assert isinstance(b, GemminiBackend)
    return b
