"""Fixtures for the server's pytest-lsp tests (helpers live in lsp_harness.py)."""

from __future__ import annotations

import pytest
import pytest_asyncio
from lsp_harness import CLIENTS, default_rules, server_settings, start_editor

from autocomp.testing.fake_llm import FakeLLMServer


@pytest.fixture
def fake_llm():
    with FakeLLMServer(default_rules()) as server:
        yield server


@pytest_asyncio.fixture(params=CLIENTS)
async def editor(request, tmp_path, fake_llm):
    ed = await start_editor(request.param, str(tmp_path), fake_llm, server_settings(str(tmp_path)))
    try:
        yield ed
    finally:
        await ed.client.shutdown_session()
        await ed.client.stop()
