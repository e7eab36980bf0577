"""The interpreter's fast paths for tile accesses give what the general paths give.

Views indexed with nl.arange expressions move their data by basic slicing when the index
arrays are ranges the interpreter made read-only (``core._array_key``); their shape comes
from the key without a gather (``core._advanced_shape``); in-process, an NKI call made from
the kernel's code knows its line without a frame walk (``install._styled``). Each is checked
here against what NumPy's advanced indexing and the frame walk answer.
"""

from __future__ import annotations

import itertools
import textwrap

import numpy as np
import pytest

from autocomp.backends.nki.interp import core
from autocomp.backends.nki.interp.errors import NkiError
from autocomp.backends.nki.interp.install import execute, install


def _frozen(a: np.ndarray) -> np.ndarray:
    return core.frozen_index_array(np.array(a, dtype=np.int64))


def _keys(shape: tuple[int, ...], rng: np.random.Generator):
    """Keys mixing integers and index arrays (ranges of every orientation, strided and
    shuffled ones, single elements), frozen as the kernel-process decoder freezes them."""
    for _ in range(300):
        key = []
        for size in shape:
            kind = rng.integers(0, 5)
            if kind == 0:
                key.append(int(rng.integers(0, size)))
                continue
            n = int(rng.integers(1, size + 1))
            lo = int(rng.integers(0, size - n + 1))
            values = np.arange(lo, lo + n)
            if kind == 3 and n > 2:
                values = values[::2]
            if kind == 4 and n > 2:
                values = rng.permutation(values)
            ndim = int(rng.integers(1, 4))
            axis = int(rng.integers(0, ndim))
            key.append(_frozen(values.reshape([-1 if i == axis else 1 for i in range(ndim)])))
        if any(isinstance(k, np.ndarray) for k in key):  # integers alone keep NKI's free axes
            yield tuple(key)


def test_views_of_frozen_ranges_read_write_and_measure_as_advanced_indexing():
    rng = np.random.default_rng(7)
    core.begin_run()
    try:
        for shape in [(6, 5), (3, 4, 5), (2, 3, 4, 5)]:
            tile = core.new_tensor(shape, np.float32, "sbuf")
            tile._store(rng.standard_normal(shape).astype(np.float32))
            basic_seen = 0
            for key in _keys(shape, rng):
                try:
                    expected = tile._data[key]
                except IndexError:  # arrays that do not broadcast: NumPy refuses, so must we
                    with pytest.raises(Exception):
                        tile[key]._values()
                    continue
                view = tile[key]
                basic_seen += view._basic is not None
                assert view.shape == expected.shape, key
                np.testing.assert_array_equal(view._values(), expected)
                assert view._written_mask().shape == expected.shape
                # A write through the view lands where advanced indexing puts it.
                new = rng.standard_normal(expected.shape).astype(np.float32)
                reference = tile._data.copy()
                reference[key] = new
                view._store(new)
                np.testing.assert_array_equal(tile._data, reference)
                # The cost model's region covers every element the index arrays select
                # (partition-major bytes), and is that of the basic slicing when there is one.
                alloc_id, p0, p1, f0, f1 = core.region(view)
                pos = np.arange(tile._data.size).reshape(shape)[key]
                per_partition = tile._data.size // shape[0]
                if pos.size:
                    assert alloc_id == tile._alloc.id
                    assert p0 <= (pos // per_partition).min() and (pos // per_partition).max() < p1, key
                    byte = (pos % per_partition) * 4
                    assert f0 <= byte.min() and byte.max() + 4 <= f1, key
                if view._basic is not None:
                    basic = view._basic[0]
                    assert core.region(view) == core.region(core.Tensor(tile._alloc, tile._data[basic],
                                                                        tile._written[basic], None))
            assert basic_seen > 20, shape  # the fast path is taken, not only the general one
    finally:
        core.end_run()


def test_range_axis_recognises_only_unit_step_ranges():
    assert core._range_axis(np.arange(4)[:, None] + 3, 3, 6) == 0
    assert core._range_axis(np.arange(4)[None, :], 0, 3) == 1
    assert core._range_axis(np.array([[5]]), 5, 5) == -1
    assert core._range_axis(np.arange(0, 8, 2), 0, 6) is None
    assert core._range_axis(np.array([1, 0, 2]), 0, 2) is None
    assert core._range_axis(np.arange(6).reshape(2, 3), 0, 5) is None


def test_unfrozen_index_arrays_get_the_basic_form_when_they_are_ranges():
    """Arrays the kernel made in this process (a trusted original runs in-process) are
    measured where the view is made: a range along one axis, dense or open, gets the
    basic-slicing equivalent (what the view selects is fixed then, as NKI's tracing fixes
    it); anything else takes NumPy's advanced indexing."""
    core.begin_run()
    try:
        tile = core.new_tensor((8, 8), np.float32, "sbuf")
        tile._store(np.arange(64, dtype=np.float32).reshape(8, 8))
        i = np.arange(4)[:, None]
        view = tile[i, 2]
        assert view._basic is not None
        np.testing.assert_array_equal(view._values(), tile._data[i, 2])
        grid = np.mgrid[0:4, 0:8]  # dense, as nl.mgrid gives it
        dense = tile[grid[0] + 2, grid[1]]
        assert dense._basic is not None and dense.shape == (4, 8)
        np.testing.assert_array_equal(dense._values(), tile._data[2:6, :])
        odd = np.array([[3], [1], [2]])
        scattered = tile[odd, 2]
        assert scattered._basic is None
        np.testing.assert_array_equal(scattered._values(), tile._data[odd, 2])
        # a dense grid indexed with an integer: as many elements as NumPy's broadcast, not the slice
        single = tile[grid[0], 1]
        np.testing.assert_array_equal(single._values(), tile._data[grid[0], 1])
    finally:
        core.end_run()


def test_advanced_shape_matches_numpy():
    data = np.zeros((4, 5, 6, 7))
    shapes = [(4, 1), (1, 6), (4, 6), (3, 1, 1), ()]
    for a_shape, b_shape in itertools.product(shapes, repeat=2):
        key = (1, np.zeros(a_shape, np.int64), 2, np.zeros(b_shape, np.int64))
        assert core._advanced_shape(key) == data[key].shape
    assert core._advanced_shape((slice(0, 2), np.zeros((3,), np.int64))) is None
    assert core._advanced_shape((np.zeros((3,), np.int64), np.zeros((4,), np.int64))) is None  # NumPy refuses


LINES = textwrap.dedent('''\
    import numpy as np
    import neuronxcc.nki as nki
    import neuronxcc.nki.language as nl


    def helper(t):
        return nl.exp(t)


    @nki.jit
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        u = helper(t)
        v = nl.multiply(u, 2.0)
        nl.store(out, value=v)
        return out
    ''')


def test_in_process_instructions_and_errors_carry_the_kernel_line(tmp_path):
    """Lines come from the innermost frame of the kernel file: a helper function's own line
    for what it calls, the kernel's line otherwise (as the frame walk answers)."""
    path = tmp_path / "lines.py"
    path.write_text(LINES)
    install()
    namespace: dict = {"__file__": str(path)}
    exec(compile(LINES, str(path), "exec"), namespace)
    res = execute(namespace["k"], [np.ones((128, 8), np.float32)], kernel_file=str(path))
    assert [(ins.op, ins.line) for ins in res.trace] == [
        ("dma_copy", 13), ("activation", 7), ("tensor_scalar", 15), ("dma_copy", 16)]
    assert core.STATE.site is None
    bad = LINES.replace("nl.multiply(u, 2.0)", "nl.multiply(u, 2.0, dtype=\"nope\")")
    path.write_text(bad)
    exec(compile(bad, str(path), "exec"), namespace)
    with pytest.raises(NkiError) as info:
        execute(namespace["k"], [np.ones((128, 8), np.float32)], kernel_file=str(path))
    assert info.value.line == 15
    assert core.STATE.site is None
