"""Shared fixtures: an isolated store per test, and the environment the real SDKs need to
talk to the loopback fake LLM."""

from __future__ import annotations

import os
import tempfile

import pytest


def pytest_configure(config):
    """One build cache for the whole session (the Spike extension takes seconds to build);
    stores stay per test. Subprocesses inherit it through the environment."""
    if "AUTOCOMP_BUILD_CACHE" not in os.environ:
        os.environ["AUTOCOMP_BUILD_CACHE"] = _made_here["build_cache"] = tempfile.mkdtemp(prefix="autocomp-build-")
    register_test_doubles()


_made_here: dict[str, str] = {}


def pytest_unconfigure(config):
    """Remove the session's build cache if this session made it (one per run piled up in /tmp)."""
    import shutil

    made = _made_here.pop("build_cache", None)
    if made:
        shutil.rmtree(made, ignore_errors=True)


TEST_DOUBLE_PLUGINS = ("autocomp.testing.scripted_backend",)


def register_test_doubles() -> None:
    """The test-double targets are not registered in production: the tests opt in, for this
    process and (through ``AUTOCOMP_PLUGINS``, which subprocesses inherit) for every server
    and CLI they start."""
    from autocomp.backends import PLUGINS_ENV, reload

    present = [p for p in os.environ.get(PLUGINS_ENV, "").split(",") if p.strip()]
    os.environ[PLUGINS_ENV] = ",".join(dict.fromkeys([*present, *TEST_DOUBLE_PLUGINS]))
    reload()


@pytest.fixture(autouse=True)
def isolated_home(tmp_path, monkeypatch):
    """Every test gets its own AUTOCOMP_HOME so caches never leak between tests."""
    home = tmp_path / "autocomp-home"
    monkeypatch.setenv("AUTOCOMP_HOME", str(home))
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "AUTOCOMP_LLM"):
        monkeypatch.delenv(var, raising=False)
    return home
