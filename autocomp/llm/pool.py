"""The ensemble of models a run uses, with everything around a call that is not the
provider's business: the store cache, the session recorder, bounded concurrency, retries
with backoff, an overall per-call timeout, usage per model and the budget caps."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from autocomp.llm.base import BudgetExhausted, LLMCallError, LLMClient, LLMReply, LLMRequest, malformed
from autocomp.llm.session import SessionRecorder
from autocomp.model import Usage
from autocomp.store import Store


MAX_RETRY_AFTER = 120.0  # seconds; the per-call timeout still bounds the whole call


@dataclass
class Budget:
    calls: int | None = None
    tokens: int | None = None
    seconds: float | None = None
    started: float = field(default_factory=time.monotonic)
    spent_calls: int = 0
    spent_tokens: int = 0

    def check(self) -> None:
        """Raise BudgetExhausted when any cap is reached (cache hits are free)."""
        if self.calls is not None and self.spent_calls >= self.calls:
            raise BudgetExhausted("budget-calls")
        if self.tokens is not None and self.spent_tokens >= self.tokens:
            raise BudgetExhausted("budget-tokens")
        if self.seconds is not None and time.monotonic() - self.started >= self.seconds:
            raise BudgetExhausted("budget-time")


class LLMPool:
    def __init__(
        self,
        clients: list[LLMClient],
        store: Store | None = None,
        recorder: SessionRecorder | None = None,
        concurrency: int = 8,
        timeout: float = 300.0,
        retries: int = 3,
        backoff: float = 0.5,
    ) -> None:
        if not clients:
            raise ValueError("an LLM pool needs at least one model")
        self.clients = clients
        self.store = store
        self.recorder = recorder
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.budget = Budget()
        self.usage: dict[str, Usage] = {c.spec: Usage() for c in clients}
        self.notices: list[str] = []
        self._semaphore = asyncio.Semaphore(concurrency)
        # Identical requests in flight at once (two branches reaching the same plan) share
        # one call instead of paying twice.
        self._inflight: dict[tuple[str, str, int], asyncio.Future[LLMReply]] = {}
        # Requests sent and not yet answered are listed in the store under the run, so a
        # resume knows (and says) how many it sends again.
        self._track_store: Store | None = None
        self._track_run: str | None = None
        self._open: list[str] = []
        self.resend: set[str] | None = None  # set on resume: what was in flight when it stopped
        self.resent = 0

    def track(self, store: Store | None, run_id: str) -> None:
        self._track_store, self._track_run = store, run_id

    def _mark(self, key: str, sending: bool) -> None:
        if not key:
            return
        if sending:
            self._open.append(key)
            if self.resend is not None and key in self.resend:
                self.resend.discard(key)
                self.resent += 1
        elif key in self._open:
            self._open.remove(key)
        if self._track_store is not None and self._track_run is not None:
            self._track_store.set_inflight(self._track_run, list(self._open))

    @property
    def specs(self) -> list[str]:
        return [c.spec for c in self.clients]

    @property
    def all_replay(self) -> bool:
        return all(c.is_replay for c in self.clients)

    def client_for(self, slot: int) -> LLMClient:
        """Work is split evenly across the ensemble: slot i goes to model i mod M."""
        return self.clients[slot % len(self.clients)]

    async def ask(self, request: LLMRequest, slot: int, sample: int) -> LLMReply:
        client = self.client_for(slot)
        key = (client.spec, request.prompt_hash, sample)
        pending = self._inflight.get(key)
        if pending is not None:
            shared = await asyncio.shield(pending)
            self.usage[client.spec].cached_calls += 1
            return LLMReply(shared.text, shared.model, Usage(), cached=True, replay=shared.replay, truncated=shared.truncated)
        future: asyncio.Future[LLMReply] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            reply = await self._ask_once(client, request, sample)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                future.cancel()
            else:
                future.set_exception(exc)
                future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        else:
            future.set_result(reply)
            return reply
        finally:
            del self._inflight[key]

    async def _ask_once(self, client: LLMClient, request: LLMRequest, sample: int) -> LLMReply:
        cache_model = client.spec
        if self.store is not None and not client.is_replay:
            cached = self.store.get_reply(cache_model, request.prompt_hash, sample)
            if cached is not None:
                reply = LLMReply(
                    text=cached["text"],
                    model=cached.get("model", cache_model),
                    usage=Usage.from_json(cached.get("usage", {})),
                    cached=True,
                    truncated=bool(cached.get("truncated", False)),
                )
                self.usage[client.spec].cached_calls += 1
                if self.recorder:
                    self.recorder.record(request, sample, reply)
                return reply
        self.budget.check()
        if not client.is_replay:
            self.budget.spent_calls += 1
        mark = f"{client.spec}|{request.prompt_hash}|{sample}" if not client.is_replay else ""
        if mark:
            self._mark(mark, True)
        try:
            reply = await asyncio.wait_for(self._call_with_retries(client, request, sample), timeout=self.timeout)
        except asyncio.TimeoutError:
            self._mark(mark, False)
            raise LLMCallError(f"{client.spec}: no reply within {self.timeout:g}s (retries included)") from None
        except asyncio.CancelledError:
            raise  # stopped while in flight: it stays listed, and a resume sends it again
        except BaseException:
            self._mark(mark, False)
            raise
        reply.usage.calls = 1
        self.usage[client.spec].add(reply.usage)
        if not client.is_replay:
            self.budget.spent_tokens += reply.usage.tokens
        if self.store is not None and not client.is_replay:
            self.store.put_reply(cache_model, request.prompt_hash, sample, reply.to_json())
        self._mark(mark, False)
        if self.recorder:
            self.recorder.record(request, sample, reply)
        return reply

    async def _call_with_retries(self, client: LLMClient, request: LLMRequest, sample: int) -> LLMReply:
        attempt = 0
        while True:
            async with self._semaphore:
                try:
                    reply = await client.complete(request, sample)
                    reply.text.encode("utf-8")  # a reply that cannot be stored is a malformed one
                    return reply
                except LLMCallError as exc:
                    if not exc.retryable or attempt >= self.retries:
                        raise
                    error = exc
                except (ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
                    raise malformed(client.spec, exc) from exc
            delay = min(8.0, self.backoff * (2**attempt))
            if error.retry_after is not None:  # the server said how long to wait: honour it
                delay = max(delay, min(error.retry_after, MAX_RETRY_AFTER))
            self.notices.append(f"{client.spec}: {error}; retrying in {delay:.1f}s (attempt {attempt + 2}/{self.retries + 1})")
            attempt += 1
            await asyncio.sleep(delay)

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
        if self.recorder:
            self.recorder.close()
