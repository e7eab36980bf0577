"""nl.arange/nl.mgrid index expressions as IndexGrid: every operation a kernel applies to
them gives what plain NumPy arrays give (values, shape, dtype), integer offsets keep a
range form the interpreter reads instead of the elements, and nothing else claims one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from autocomp.backends.nki.interp import core
from autocomp.backends.nki.interp.index_grid import IndexGrid, index_grid
from autocomp.backends.nki.interp.install import install

install()
import neuronxcc.nki.language as nl  # noqa: E402  (the interpreter, after install)


def _plain(x):
    return np.array(x.view(np.ndarray)) if isinstance(x, np.ndarray) else x


def _check(result, expected) -> None:
    """``result`` (computed on grids) equals ``expected`` (on plain arrays), and a form it
    claims is the one its elements have."""
    if not isinstance(expected, np.ndarray):
        assert result == expected and type(result) is type(expected)
        return
    assert result.shape == expected.shape and result.dtype == expected.dtype
    assert np.array_equal(_plain(result), expected)
    if type(result) is IndexGrid and result.form is not None:
        assert core.range_form(np.array(_plain(result))) == result.form


OPS = [
    ("k + g", lambda g, k: k + g), ("g + k", lambda g, k: g + k), ("g - k", lambda g, k: g - k),
    ("k - g", lambda g, k: k - g), ("g * k", lambda g, k: g * k), ("k * 128 + g", lambda g, k: k * 128 + g),
    ("g + np.int32(k)", lambda g, k: g + np.int32(k)), ("g + np.uint8(3)", lambda g, k: g + np.uint8(3)),
    ("g + np.uint64(k)", lambda g, k: g + np.uint64(k)), ("g + 0.5", lambda g, k: g + 0.5),
    ("g < k", lambda g, k: g < k), ("g // 2", lambda g, k: g // 2), ("g + g", lambda g, k: g + g),
    ("-g", lambda g, k: -g), ("g + True", lambda g, k: g + True), ("g.sum()", lambda g, k: g.sum()),
    ("g.max()", lambda g, k: g.max()), ("g.T", lambda g, k: g.T), ("g.reshape(-1)", lambda g, k: g.reshape(-1)),
    ("np.where(g > 2, g, 0)", lambda g, k: np.where(g > 2, g, 0)), ("g.astype(np.int32)", lambda g, k: g.astype(np.int32)),
    ("g[..., None]", lambda g, k: g[..., None]), ("g[None]", lambda g, k: g[None]), ("g[1:]", lambda g, k: g[1:]),
    ("(k + g) - 3", lambda g, k: (k + g) - 3), ("np.add(g, k)", lambda g, k: np.add(g, k)),
]


def _grids():
    """(grid, the same values as a plain writable array) for 1-D, column, row and dense grids."""
    out = []
    line = nl.arange(8)
    out.append((line, np.arange(8)))
    out.append((line[:, None], np.arange(8)[:, None]))
    out.append((line[None, :], np.arange(8)[None, :]))
    i = nl.mgrid[0:4, 2:7]
    ref = np.mgrid[0:4, 2:7]
    out += [(i.p, ref[0]), (i.x, ref[1])]
    return out


@pytest.mark.parametrize("name,op", OPS, ids=[n for n, _ in OPS])
@pytest.mark.parametrize("k", [0, 5, 4096])
def test_every_operation_gives_what_plain_arrays_give(name, op, k):
    for grid, plain in _grids():
        assert type(grid) is IndexGrid and grid.form is not None
        _check(op(grid, k), op(plain, k))


def test_integer_offsets_keep_a_form_and_nothing_else_claims_one():
    i = nl.mgrid[0:128, 0:512]
    assert (3 * 128 + i.p).form == (384, 0) and (i.x + 1024).form == (1024, 1)
    assert (i.x - 2).form == (-2, 1)
    for not_a_range in (5 - i.p, i.p * 2, i.p + i.x, i.p + np.uint64(1), i.p.reshape(-1), i.p.T):
        assert getattr(not_a_range, "form", None) is None


def test_stepped_or_empty_or_single_axes_fall_back_to_plain_arrays():
    assert type(nl.arange(0, 8, 2)) is np.ndarray and np.array_equal(nl.arange(0, 8, 2), [0, 2, 4, 6])
    single = nl.mgrid[0:1, 0:4]
    assert single.p.form is None and np.array_equal(single.p, np.zeros((1, 4)))
    stepped = nl.mgrid[0:8:2, 0:3]
    assert type(stepped.p) is np.ndarray and np.array_equal(stepped.p, np.mgrid[0:8:2, 0:3][0])


def test_grids_are_read_only_and_in_place_offsets_rebind_the_name():
    g = nl.arange(4)[:, None]
    with pytest.raises(ValueError):
        g[0, 0] = 7
    alias = g
    g += 8
    assert g.form == (8, 0) and np.array_equal(g.ravel(), [8, 9, 10, 11])
    assert np.array_equal(alias.ravel(), [0, 1, 2, 3])  # (a new array: the expression it aliased is unchanged)
    g *= 2
    assert type(g) is np.ndarray and np.array_equal(g.ravel(), [16, 18, 20, 22]) and g.flags.writeable


def test_overflowing_offsets_behave_as_numpy_does():
    g = index_grid(0, 0, (4,))
    with pytest.raises(OverflowError):
        g + 2 ** 63
    near = g + (2 ** 63 - 4)
    assert near.form == (2 ** 63 - 4, 0)
    wrapped = near + np.int64(1)  # past int64: NumPy's wrap-around, as a plain array
    assert getattr(wrapped, "form", None) is None
    with np.errstate(over="ignore"):
        assert np.array_equal(wrapped, np.arange(2 ** 63 - 4, 2 ** 63, dtype=np.int64) + np.int64(1))


def test_a_view_indexed_with_offset_grids_reads_no_element_of_them(monkeypatch):
    """The interpreter takes an offset grid's range from its form (no element-wise check)."""
    def never(x):
        raise AssertionError("range_form looked at the elements of an IndexGrid with a form")

    i = nl.mgrid[0:128, 0:512]
    key = (2 * 128 + i.p, 512 + i.x)
    monkeypatch.setattr(core, "_range_axis", never)
    plain_form = core.range_form
    monkeypatch.setattr(core, "range_form", lambda x: x.form if type(x) is IndexGrid and x.form else never(x))
    normalized = core._array_key(key, (1024, 2048))
    assert normalized is not None and normalized[1] is not None  # the basic-slicing equivalent
    assert normalized[1][0] == (slice(256, 384), slice(512, 1024))
    monkeypatch.setattr(core, "range_form", plain_form)


def test_kernels_indexed_with_grids_compute_what_numpy_does():
    """An AWS-tutorial-style kernel (offsets of nl.mgrid grids, a (K, par_dim, F) tile)
    against NumPy, in-process, with the trace's instruction count as before."""
    from autocomp.backends.nki.interp.install import execute

    def kernel(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        i = nl.mgrid[0:128, 0:64]
        tiles = nl.ndarray((a.shape[0] // 128, nl.par_dim(128), 64), dtype=a.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(a.shape[0] // 128):
            tiles[k, i.p, i.x] = nl.load(a[k * 128 + i.p, i.x])
        for k in nl.affine_range(a.shape[0] // 128):
            row = k * 128 + i.p
            row -= 0
            nl.store(out[row, i.x], value=nl.multiply(tiles[k, i.p, i.x], 2.0))
        return out

    a = np.random.default_rng(1).standard_normal((512, 64)).astype(np.float32)
    res = execute(kernel, [a])
    assert np.allclose(res.outputs[0], 2 * a)
    assert len(res.trace) == 12


@pytest.mark.parametrize("shape,axis", list(itertools.product([(5,), (3, 4), (2, 3, 4)], range(3))))
def test_index_grid_holds_the_values_its_form_names(shape, axis):
    if axis >= len(shape):
        return
    g = index_grid(7, axis, shape)
    expected = np.broadcast_to((7 + np.arange(shape[axis])).reshape([-1 if i == axis else 1 for i in range(len(shape))]), shape)
    assert np.array_equal(g, expected) and g.form == (7, axis) and not g.flags.writeable
    assert core.range_form(np.array(expected)) == g.form
