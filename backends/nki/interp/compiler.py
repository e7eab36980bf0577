"""``nki.compiler`` (``ncc``): allocation and scheduling directives.

They steer the Neuron compiler's memory allocation and instruction ordering; values do not
depend on them, so here allocators name the buffer they place tiles in and the
scheduling directives change nothing. Both sides of a candidate run (the interpreter and
the kernel process) build this module locally: nothing in it touches tensor data.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

from autocomp.backends.nki.interp.core import BufferKind, buffer_with_tiles


class _Allocator:
    """``ncc.sbuf`` / ``ncc.psum``: ``alloc(fn)``, ``mod_alloc(base_addr=..., ...)`` and
    ``auto_alloc()`` all give the buffer itself (placement is the compiler's business)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def alloc(self, func: Any = None, *args: Any, **kw: Any) -> BufferKind:
        return BufferKind(self.name)

    def mod_alloc(self, *args: Any, base_addr: Any = None, num_free_tiles: Any = (), **kw: Any) -> BufferKind:
        return buffer_with_tiles(self.name, num_free_tiles, base_addr)

    def auto_alloc(self, *args: Any, **kw: Any) -> BufferKind:
        return BufferKind(self.name)

    def __repr__(self) -> str:
        return f"ncc.{self.name}"


sbuf = _Allocator("sbuf")
psum = _Allocator("psum")


def _passthrough(func: Callable[..., Any] | None = None, **kw: Any) -> Any:
    if func is None:
        return lambda f: f
    return func


skip_middle_end_transformations = _passthrough
enable_stack_allocator = _passthrough
force_auto_alloc = _passthrough


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Keep instructions in program order (the interpreter always does)."""
    yield


def multi_buffer(n: int = 2) -> int:
    return int(n)


ATTRS: dict[str, Any] = {
    "sbuf": sbuf, "psum": psum, "skip_middle_end_transformations": skip_middle_end_transformations,
    "enable_stack_allocator": enable_stack_allocator, "force_auto_alloc": force_auto_alloc, "no_reorder": no_reorder,
    "multi_buffer": multi_buffer,
}
