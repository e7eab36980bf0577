"""Run engine work on its own thread and event loop, away from the server's loop.

Backends may do CPU work inside their coroutines (parsing a candidate, comparing outputs
with NumPy) and the LLM SDKs import slowly; on the server's loop any of that would stall
code actions, lenses and hovers for every document. Each search (and each tune-on-save
evaluation) therefore runs in a worker thread with its own asyncio loop; events come back
to the server's loop through a thread-safe hand-off. Stopping and cancelling are forwarded
to the worker loop, and the worker's own cancellation kills evaluator process groups as
usual (``run_limited``). CPU-heavy Python in a worker still shares the GIL, but the
interpreter switches threads every few milliseconds, so requests are served between slices.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

T = TypeVar("T")

_END = object()


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class SearchWorker:
    """Builds a search with ``factory()`` on a worker thread and streams its events."""

    def __init__(self, factory: Callable[[], Any], name: str = "autocomp search") -> None:
        self._factory = factory
        self._main = asyncio.get_running_loop()
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._ready = threading.Event()
        self._stop_requested = False
        self.search: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.run(self._drive())

    def _send(self, item: Any) -> None:
        try:
            self._main.call_soon_threadsafe(self._queue.put_nowait, item)
        except RuntimeError:  # the server's loop is closed: nobody is listening
            pass

    async def _drive(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._ready.set()
        try:
            self.search = self._factory()
            if self._stop_requested:
                self.search.stop()
            async for event in self.search.run():
                self._send(event)
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # delivered to the consumer, which reports it
            self._send(_Failure(exc))
        finally:
            self._send(_END)

    async def events(self) -> AsyncIterator[Any]:
        """The search's events, on the caller's loop; raises what building/running raised."""
        while True:
            item = await self._queue.get()
            if item is _END:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item

    def _call(self, fn: Callable[[], Any]) -> None:
        self._ready.wait(timeout=5.0)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(fn)
            except RuntimeError:
                pass

    def stop(self) -> None:
        """End the run cleanly (best so far kept), as ``BeamSearch.stop`` does."""
        self._stop_requested = True

        def stop_search() -> None:
            if self.search is not None:
                self.search.stop()

        self._call(stop_search)

    def cancel(self) -> None:
        """End the run now: the worker task is cancelled, which kills its evaluations."""

        def cancel_task() -> None:
            if self._task is not None:
                self._task.cancel()

        self._call(cancel_task)

    def join_now(self, timeout: float) -> None:
        """Block up to ``timeout`` s for the worker thread (process exit only)."""
        self._thread.join(timeout)

    async def join(self, timeout: float = 5.0) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self._thread.join, timeout)


async def run_in_thread(factory: Callable[[], Awaitable[T]], name: str = "autocomp work") -> T:
    """Await ``factory()`` on a worker thread's loop; cancelling the caller cancels it there."""
    main = asyncio.get_running_loop()
    result: asyncio.Future[T] = main.create_future()
    holder: dict[str, Any] = {}
    ready = threading.Event()

    def deliver(fn: Callable[[], None]) -> None:
        try:
            main.call_soon_threadsafe(fn)
        except RuntimeError:
            pass

    async def drive() -> None:
        holder["loop"] = asyncio.get_running_loop()
        holder["task"] = asyncio.current_task()
        ready.set()
        try:
            value = await factory()
        except asyncio.CancelledError:
            deliver(lambda: result.cancel() if not result.done() else None)
        except BaseException as exc:
            error = exc  # ``exc`` is unbound when the except block ends; keep a reference

            def fail() -> None:
                if not result.done():
                    result.set_exception(error)

            deliver(fail)
        else:
            deliver(lambda: result.set_result(value) if not result.done() else None)

    thread = threading.Thread(target=lambda: asyncio.run(drive()), name=name, daemon=True)
    thread.start()
    try:
        return await result
    except asyncio.CancelledError:
        ready.wait(timeout=5.0)
        loop, task = holder.get("loop"), holder.get("task")
        if loop is not None and task is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:
                pass
        raise
