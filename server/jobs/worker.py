"""Engine work off the server's event loop, and candidate evaluation out of its process.

Backends may do CPU work inside their coroutines (parsing a candidate, comparing outputs
with NumPy) and the LLM SDKs import slowly; on the server's loop any of that would stall
code actions, lenses and hovers for every document. Each search (and each tune-on-save
evaluation) therefore runs in a worker thread with its own asyncio loop (:class:`SearchWorker`,
:func:`run_in_thread`); events come back to the server's loop through a thread-safe
hand-off. Stopping and cancelling are forwarded to the worker loop, and the worker's own
cancellation kills evaluator process groups as usual (``run_limited``).

A thread still shares the server's GIL: a backend that parses a 2 MB module for every
candidate (the NKI static checks) would hold it for seconds at a time. So a job's
evaluations run in an evaluation process of its own (:class:`EvaluationProcess`, an
executor for :class:`autocomp.evaluator.Evaluator`): the backend is rebuilt there from its
class and settings, as a Ray worker rebuilds it, and every per-candidate check, the
reference run and the sandboxed children live there. The server process keeps only the
search's bookkeeping.
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


# -- the evaluation process ----------------------------------------------------------------
class EvaluationProcess:
    """An executor (:class:`autocomp.executor.Executor`) that evaluates in one child process.

    The child is spawned on the first evaluation and serves every evaluation of the job
    concurrently on its own event loop, so a backend's per-problem state (the reference
    run) is paid once, as in the server before. A problem's text crosses the pipe once;
    each evaluation then sends only its code. Cancelling an evaluation cancels it in the
    child, which kills its sandboxed process group (``run_limited``); :meth:`close` ends
    the child, and a child whose parent is gone ends by itself (its pipe closes).
    """

    name = "local"
    MAX_PROBLEMS = 8

    def __init__(self, concurrency: int | None = None) -> None:
        from autocomp.sandbox import cpu_slots

        self.concurrency = concurrency or cpu_slots()
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Any = None
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
        self._next = 0
        self._problems: dict[int, tuple[Any, str]] = {}  # id(problem) -> (problem, key sent)
        self._closed = False

    def describe(self) -> str:
        return f"local ({self.concurrency} at a time, in an evaluation process)"

    # -- parent side -------------------------------------------------------------------
    def _ensure(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        # A plain child process (not multiprocessing's spawn, which would also start a
        # resource-tracker process that outlives every job), talking over two pipes.
        import os
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        down_r, down_w = os.pipe()  # parent -> child
        up_r, up_w = os.pipe()  # child -> parent
        code = "import sys; from autocomp.server.jobs.worker import serve_fds; serve_fds(int(sys.argv[1]), int(sys.argv[2]))"
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", code, str(down_r), str(up_w)], pass_fds=(down_r, up_w),
                # Never the server's stdout: that is the LSP channel, and a child holding it
                # would keep the client from seeing the server end.
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True,
            )
        finally:
            os.close(down_r)
            os.close(up_w)
        conn_out = Connection(down_w, readable=False)
        conn_in = Connection(up_r, writable=False)
        conn_out.send(("path", list(sys.path)))
        self._proc, self._conn = proc, conn_out
        self._problems.clear()
        threading.Thread(target=self._read, args=(conn_in,), name="autocomp evaluation results", daemon=True).start()

    def _read(self, conn: Any) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            if message[0] != "result":
                continue
            _kind, tid, reply = message
            with self._lock:
                waiting = self._pending.pop(tid, None)
            if waiting is not None:
                _deliver(waiting, reply)
        conn.close()
        with self._lock:  # the child is gone: every evaluation still waiting fails
            lost = [w for tid, w in list(self._pending.items())]
            self._pending.clear()
        for waiting in lost:
            _deliver(waiting, {"error": "the evaluation process ended unexpectedly"})

    def _problem_key(self, problem: Any) -> tuple[str, Any]:
        """The key the child knows ``problem`` by, and the message that teaches it (None
        when it knows it already). Called with the lock held."""
        known = self._problems.get(id(problem))
        if known is not None and known[0] is problem:
            return known[1], None
        if len(self._problems) >= self.MAX_PROBLEMS:
            oldest = next(iter(self._problems))
            _p, key = self._problems.pop(oldest)
            self._conn.send(("forget", key))
        self._next += 1
        key = f"p{self._next}"
        self._problems[id(problem)] = (problem, key)
        return key, ("problem", key, problem.to_json())

    async def evaluate(self, backend: Any, problem: Any, code: str) -> Any:
        from autocomp import sandbox
        from autocomp.executor import backend_ref
        from autocomp.model import Evaluation

        if self._closed:
            raise RuntimeError("the evaluation process was closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        with self._lock:
            self._ensure()
            key, teach = self._problem_key(problem)
            self._next += 1
            tid = self._next
            self._pending[tid] = (loop, future)
            try:
                if teach is not None:
                    self._conn.send(teach)
                self._conn.send(("eval", tid, backend_ref(backend), dict(backend.settings), key, code, sandbox.mode()))
            except (OSError, ValueError) as exc:
                self._pending.pop(tid, None)
                raise RuntimeError(f"the evaluation process is gone: {exc}") from exc
        try:
            reply = await future
        except asyncio.CancelledError:
            with self._lock:
                self._pending.pop(tid, None)
                if self._conn is not None:
                    try:
                        self._conn.send(("cancel", tid))
                    except (OSError, ValueError):
                        pass
            raise
        if "sandbox_unavailable" in reply:
            raise sandbox.SandboxUnavailable(reply["sandbox_unavailable"])
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return Evaluation.from_json(reply["evaluation"])

    def close(self, timeout: float = 2.0) -> None:
        """End the child: it cancels what it still runs (killing those process groups)."""
        self._closed = True
        with self._lock:
            proc, conn = self._proc, self._conn
            self._proc, self._conn = None, None
        if conn is not None:
            try:
                conn.send(("close",))
            except (OSError, ValueError):
                pass
        if proc is not None:
            try:
                proc.wait(timeout)
            except Exception:
                proc.kill()
                try:
                    proc.wait(1.0)
                except Exception:
                    pass
        if conn is not None:
            conn.close()


def _deliver(waiting: tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]], reply: dict[str, Any]) -> None:
    loop, future = waiting

    def settle() -> None:
        if not future.done():
            future.set_result(reply)

    try:
        loop.call_soon_threadsafe(settle)
    except RuntimeError:  # that loop is closed: nobody waits any more
        pass


# -- child side ----------------------------------------------------------------------------
EVALUATION_NICENESS = 10


def serve_fds(read_fd: int, write_fd: int) -> None:
    """The evaluation process: evaluate what the parent sends until it says close or goes.
    It runs (with its sandboxed children) at a lower CPU priority than the server: on a
    machine whose cores are all busy evaluating, the editor's requests still come first.
    Simulated and counted metrics (cycles) do not depend on it."""
    import os
    import sys
    from multiprocessing.connection import Connection

    conn_in = Connection(read_fd, writable=False)
    conn_out = Connection(write_fd, readable=False)
    try:  # the editor's requests come first when the cores are busy (children inherit it)
        os.nice(EVALUATION_NICENESS)
    except OSError:
        pass
    first = conn_in.recv()
    if first[0] == "path":  # the server's import path (test doubles, plugins)
        sys.path[:] = list(first[1]) + [p for p in sys.path if p not in first[1]]
    asyncio.run(_serve_async(conn_in, conn_out))


async def _serve_async(conn: Any, out: Any) -> None:
    import importlib

    from autocomp import sandbox
    from autocomp.model import Problem

    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[Any] = asyncio.Queue()

    def quiet(loop_: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        # A cancelled evaluation leaves cancelled futures behind: not worth a traceback.
        if not isinstance(context.get("exception"), asyncio.CancelledError):
            loop_.default_exception_handler(context)

    loop.set_exception_handler(quiet)

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                message = None
            loop.call_soon_threadsafe(inbox.put_nowait, message)
            if message is None or message[0] == "close":
                return

    threading.Thread(target=read, name="autocomp evaluation requests", daemon=True).start()
    problems: dict[str, Any] = {}
    backends: dict[tuple[str, str], Any] = {}
    tasks: dict[int, asyncio.Task[Any]] = {}

    def backend_for(ref: str, settings: dict[str, Any]) -> Any:
        key = (ref, repr(sorted(settings.items())))
        if key not in backends:
            module_name, class_name = ref.split(":")
            backends[key] = getattr(importlib.import_module(module_name), class_name)(settings)
        return backends[key]

    async def one(tid: int, ref: str, settings: dict[str, Any], problem: Any, code: str) -> None:
        try:
            (result,) = await backend_for(ref, settings).evaluate(problem, [code])
            result.sandbox = sandbox.label()
            reply: dict[str, Any] = {"evaluation": result.to_json()}
        except asyncio.CancelledError:
            return
        except sandbox.SandboxUnavailable as exc:
            reply = {"sandbox_unavailable": str(exc)}
        except Exception as exc:  # reported as a failed evaluation, never cached
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            tasks.pop(tid, None)
        try:
            out.send(("result", tid, reply))
        except (OSError, ValueError):
            pass

    while True:
        message = await inbox.get()
        if message is None or message[0] == "close":
            break
        kind = message[0]
        if kind == "problem":
            problems[message[1]] = Problem.from_json(message[2])
        elif kind == "forget":
            problems.pop(message[1], None)
        elif kind == "eval":
            _k, tid, ref, settings, key, code, mode = message
            sandbox.configure(mode)
            tasks[tid] = loop.create_task(one(tid, ref, settings, problems[key], code))
        elif kind == "cancel":
            task = tasks.get(message[1])
            if task is not None:
                task.cancel()
    pending = list(tasks.values())
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=5.0)
