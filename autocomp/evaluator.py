"""Evaluation with the store in front: code already evaluated for this problem by this
evaluator (same backend, version and settings) is never evaluated again, across runs and
across a kill and resume. Concurrency is bounded here so that the beam search can hand
candidates over one at a time, as soon as each is written, without oversubscribing the
machine. Where an evaluation runs is the executor's business (:mod:`autocomp.executor`:
this machine, or a Ray cluster); caching, de-duplication and the sandbox label in the cache
key are the same whichever runs it."""

from __future__ import annotations

import asyncio
import time
from typing import Sequence

from autocomp.backends.base import Backend
from autocomp.executor import Executor, LocalExecutor
from autocomp.model import Evaluation, Problem, Verdict
from autocomp import sandbox
from autocomp.store import Store


class Evaluator:
    def __init__(
        self, backend: Backend, store: Store | None, concurrency: int | None = None, executor: Executor | None = None
    ) -> None:
        self.backend = backend
        self.store = store
        self.executor: Executor = executor or LocalExecutor(concurrency)
        self._semaphore = asyncio.Semaphore(concurrency or self.executor.concurrency)
        self.evaluated = 0  # real (uncached) evaluations, for tests and reports
        self.cache_hits = 0
        # The same code arriving twice at once (two plans converging) is evaluated once.
        self._inflight: dict[str, asyncio.Future[Evaluation]] = {}
        # The last problem's content hash: hashing a 2 MB file for every candidate would
        # hold the interpreter for milliseconds each time (the language server's requests
        # wait on it).
        self._hashed: tuple[Problem, str] | None = None

    def _problem_hash(self, problem: Problem) -> str:
        hashed = self._hashed
        if hashed is not None and hashed[0] is problem:
            return hashed[1]
        digest = problem.content_hash()
        self._hashed = (problem, digest)
        return digest

    def _key(self, problem: Problem, code: str) -> str:
        # An evaluation made without isolation is never reused for an isolated run.
        return Store.eval_key(code, self._problem_hash(problem), f"{self.backend.cache_identity()}:sandbox={sandbox.label()}")

    def cached(self, problem: Problem, code: str) -> Evaluation | None:
        if self.store is None:
            return None
        data = self.store.get(self._key(problem, code))
        return Evaluation.from_json(data) if data is not None else None

    async def evaluate_one(self, problem: Problem, code: str) -> Evaluation:
        hit = self.cached(problem, code)
        if hit is not None:
            self.cache_hits += 1
            return hit
        key = self._key(problem, code)
        pending = self._inflight.get(key)
        if pending is not None:
            self.cache_hits += 1
            return Evaluation.from_json((await asyncio.shield(pending)).to_json())
        future: asyncio.Future[Evaluation] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            result = await self._evaluate_uncached(problem, code)
        except BaseException:
            future.cancel()
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._inflight[key]

    async def _evaluate_uncached(self, problem: Problem, code: str) -> Evaluation:
        async with self._semaphore:
            start = time.monotonic()
            try:
                result = await self.executor.evaluate(self.backend, problem, code)
            except (asyncio.CancelledError, sandbox.SandboxUnavailable):
                raise  # no isolation: the whole run stops with the fix, not each candidate
            except Exception as exc:  # a backend bug must not take the run down
                result = Evaluation(Verdict.RUNTIME_ERROR, feedback=f"evaluator failed: {type(exc).__name__}: {exc}",
                                    sandbox=sandbox.label())
                return result  # not cached: it may be fixed by the next try
            if not result.seconds:
                result.seconds = time.monotonic() - start
            result.sandbox = sandbox.label()
        self.evaluated += 1
        if self.store is not None:
            self.store.set(self._key(problem, code), result.to_json())
        return result

    async def evaluate(self, problem: Problem, codes: Sequence[str]) -> list[Evaluation]:
        return list(await asyncio.gather(*(self.evaluate_one(problem, c) for c in codes)))
