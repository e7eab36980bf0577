"""LLM access: provider clients behind one interface, an ensemble pool, recorded sessions.

Specs: ``openai:MODEL``, ``anthropic:MODEL``, ``replay:FILE``. Several specs form an
ensemble that splits plans and implementations evenly. API keys come only from the
environment and are never logged or stored.
"""

from __future__ import annotations

from autocomp.llm.base import BudgetExhausted, LLMCallError, LLMClient, LLMConfigError, LLMReply, LLMRequest
from autocomp.llm.pool import LLMPool
from autocomp.llm.session import ReplayClient, SessionRecorder
from autocomp.store import Store

PROVIDERS = ("openai", "anthropic", "replay")


def make_client(spec: str, timeout: float = 300.0) -> LLMClient:
    provider, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise LLMConfigError(f"LLM spec {spec!r} must look like openai:MODEL, anthropic:MODEL or replay:FILE")
    if provider == "openai":
        from autocomp.llm.openai_client import OpenAIClient

        return OpenAIClient(rest, timeout)
    if provider == "anthropic":
        from autocomp.llm.anthropic_client import AnthropicClient

        return AnthropicClient(rest, timeout)
    if provider == "replay":
        return ReplayClient(rest)
    raise LLMConfigError(f"unknown LLM provider {provider!r} in {spec!r}; use one of {', '.join(PROVIDERS)}")


def build_pool(
    specs: list[str],
    store: Store | None,
    record: str | None = None,
    concurrency: int = 8,
    timeout: float = 300.0,
    retries: int = 3,
    header: dict | None = None,
) -> LLMPool:
    if not specs:
        raise LLMConfigError("no LLM given: pass --llm openai:MODEL / anthropic:MODEL / replay:FILE (or set autocomp.llm)")
    clients = [make_client(spec, timeout) for spec in specs]
    recorder = SessionRecorder(record, note="recorded by autocomp optimize --record", header=header) if record else None
    return LLMPool(clients, store=store, recorder=recorder, concurrency=concurrency, timeout=timeout, retries=retries)


__all__ = [
    "BudgetExhausted",
    "LLMCallError",
    "LLMClient",
    "LLMConfigError",
    "LLMPool",
    "LLMReply",
    "LLMRequest",
    "ReplayClient",
    "SessionRecorder",
    "build_pool",
    "make_client",
]
