"""Index expressions that know they are ranges.

``nl.arange``/``nl.mgrid`` and the offsets kernels add to them (``k * 128 + i.p``) are the
index of nearly every tile access. As plain arrays, each offset is a fresh dense array
(64k integers for a (128, 512) tile of AWS's tutorials) that the interpreter must compute
and then inspect element by element to find that it is a range (core.range_form): a fifth
of the time of a matmul-heavy kernel. An :class:`IndexGrid` is the same read-only integer
array, a broadcast view of one line, that carries its form ``(first, axis)``: it runs
first, first+1, … along ``axis`` and repeats along the others. Adding or subtracting an
integer shifts the form instead of touching every element; every other operation gives the
plain NumPy array it always did, so kernels see the values, shapes and dtypes they would
see without this class.

The form is a shortcut, not a trust boundary: kernel code could build an IndexGrid with
any form, so only the trusted in-process run of the original and the kernel process itself
read it; the interpreter of untrusted code receives ranges as numbers it checks
(remote._range_array)."""

from __future__ import annotations

from typing import Any

import numpy as np

_INT64 = np.iinfo(np.int64)


class IndexGrid(np.ndarray):
    """A read-only int64 array equal to ``first + arange(n)`` along ``form[1]`` broadcast
    over the other axes, when ``form`` is not None (views and reshapes drop the form)."""

    form: tuple[int, int] | None

    def __array_finalize__(self, obj: Any) -> None:
        self.form = None

    def __getitem__(self, key: Any) -> Any:
        out = super().__getitem__(key)
        if self.form is not None and type(out) is IndexGrid:
            axis = _axis_after(key, self.ndim, self.form[1])
            if axis is not None:
                out.form = (self.form[0], axis)
        return out

    def __repr__(self) -> str:  # (what a kernel printing its index expects to see)
        return repr(self.view(np.ndarray))

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs and len(inputs) == 2 and (ufunc is np.add or ufunc is np.subtract):
            shifted = _shifted(ufunc is np.subtract, *inputs)
            if shifted is not None:
                return shifted
        inputs = tuple(x.view(np.ndarray) if isinstance(x, IndexGrid) else x for x in inputs)
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(o.view(np.ndarray) if isinstance(o, IndexGrid) else o for o in out)
        return getattr(ufunc, method)(*inputs, **kwargs)


def _rebinding(ufunc: np.ufunc) -> Any:
    """``grid op= x`` for a read-only grid: the result as a new array bound to the name (an
    offset of a kernel's index expression, ``idx += 128``, worked on the writable array
    NumPy arithmetic used to return)."""
    def op(self: IndexGrid, other: Any) -> Any:
        return self.__array_ufunc__(ufunc, "__call__", self, other)
    op.__name__ = f"__i{ufunc.__name__}__"
    return op


for _name, _ufunc in (("__iadd__", np.add), ("__isub__", np.subtract), ("__imul__", np.multiply),
                      ("__ifloordiv__", np.floor_divide), ("__imod__", np.remainder), ("__ilshift__", np.left_shift),
                      ("__irshift__", np.right_shift), ("__iand__", np.bitwise_and), ("__ior__", np.bitwise_or),
                      ("__ixor__", np.bitwise_xor)):
    setattr(IndexGrid, _name, _rebinding(_ufunc))


def index_grid(first: int, axis: int, shape: tuple[int, ...]) -> IndexGrid:
    """The read-only grid that runs first, first+1, … along ``axis`` of ``shape`` and
    repeats along the other axes."""
    n = shape[axis]
    line = np.arange(first, first + n, dtype=np.int64)
    if len(shape) > 1:
        line = np.broadcast_to(line.reshape([n if i == axis else 1 for i in range(len(shape))]), shape)
    grid = line.view(IndexGrid)
    grid.flags.writeable = False
    grid.form = (int(first), axis) if n > 1 else None
    return grid


def _is_offset(c: Any) -> bool:
    """An integer scalar that NumPy adds to an int64 array without changing its dtype."""
    tc = type(c)
    if tc is int:
        return True
    return isinstance(c, np.integer) and np.result_type(np.int64, c) == np.int64


def _shifted(subtract: bool, a: Any, b: Any) -> IndexGrid | None:
    """``a + b`` or ``a - b`` as a grid when one side is a grid with a form and the other an
    integer offset (``grid - k`` but not ``k - grid``, which runs backwards), else None."""
    if type(a) is IndexGrid and a.form is not None and _is_offset(b):
        grid, offset = a, (-int(b) if subtract else int(b))
    elif not subtract and type(b) is IndexGrid and b.form is not None and _is_offset(a):
        grid, offset = b, int(a)
    else:
        return None
    first, axis = grid.form
    lo, hi = first + offset, first + offset + grid.shape[axis] - 1
    if lo < _INT64.min or hi > _INT64.max:
        return None  # NumPy's own overflow behaviour decides
    return index_grid(lo, axis, grid.shape)


def _axis_after(key: Any, ndim: int, axis: int) -> int | None:
    """Where ``axis`` lands in ``grid[key]`` when ``key`` only adds axes and keeps every
    existing one whole (``[:, None]``, ``[None, :]``, ``[None]``), else None."""
    key = key if type(key) is tuple else (key,)
    whole = slice(None)
    seen = out = 0
    for k in key:
        if k is None:
            out += 1
        elif type(k) is slice and k == whole:
            if seen == axis:
                return out
            seen += 1
            out += 1
        else:
            return None
    if seen > ndim:
        return None
    return out + (axis - seen)
