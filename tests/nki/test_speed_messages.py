"""The compact request forms between the kernel process and the interpreter (index arrays
sent once per run and named by entry, requests in batches): what a kernel process may send
in them is checked as strictly as the whole forms, and the kernel side produces them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from autocomp.backends.nki import tracer
from autocomp.backends.nki.interp import install
from autocomp.backends.nki.interp.install import execute
from autocomp.backends.nki.remote import KernelFailure, KernelProcess
from autocomp.testing.exited_process import ExitedProcess


def _nd(values, shape, ix=None):
    out = {"nd": values, "shape": shape, "dtype": "int64"}
    if ix is not None:
        out["ix"] = ix
    return out


P = list(range(128))
F = [0, 1, 2, 3]


def _rg(form, shape, dtype="int64"):
    return {"rg": form, "shape": shape, "dtype": dtype}


def _getitem(h, key, handle):
    return {"op": "getitem", "t": h, "key": {"T": key}, "line": 1, "h": handle}


def _serve(lines, tmp_path):
    """Run a kernel whose process sends ``lines`` (JSON values, one per line): the outputs,
    or the KernelFailure the interpreter ends it with."""
    install()
    # (the requests come from a file: a pipe would block the writer past its 64 KiB buffer)
    stream = tmp_path / "requests.jsonl"
    stream.write_bytes(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    req_r = os.open(stream, os.O_RDONLY)
    rep_r, rep_w = os.pipe()
    proc = KernelProcess(str(tmp_path / "k.py"), "k", spawned=(ExitedProcess(), req_r, rep_w), source="")
    try:
        return execute(proc.kernel, [np.zeros((128, 4), np.float32)], kernel_file=str(tmp_path / "k.py"), names=["a"])
    finally:
        proc.close()
        os.close(rep_r)


RETURN = {"op": "return", "value": {"t": -1}}


def test_index_arrays_by_entry_are_served_like_whole_ones(tmp_path):
    res = _serve([_getitem(-1, [_nd(P, [128, 1], 0), _nd(F, [1, 4], 1)], 1),
                  [_getitem(-1, [{"ix": 0}, {"ix": 1}], 2), _getitem(-1, [{"ix": 0}, {"ix": 1}], 3)], RETURN], tmp_path)
    assert res.outputs[0].shape == (128, 4)


@pytest.mark.parametrize("lines, why", [
    # an entry never defined (or defined by another run: entries do not outlive a run)
    ([_getitem(-1, [{"ix": 5}, 0], 1), RETURN], "undefined index array"),
    ([_getitem(-1, [{"ix": "0"}, 0], 1), RETURN], "undefined index array"),
    # an entry defined twice, out of range, or too large
    ([_getitem(-1, [_nd(P, [128, 1], 0), 0], 1), _getitem(-1, [_nd(P, [128, 1], 0), 0], 2), RETURN],
     "bad index array definition"),
    ([_getitem(-1, [_nd(P, [128, 1], -1), 0], 1), RETURN], "bad index array definition"),
    ([_getitem(-1, [_nd(P, [128, 1], 1 << 16), 0], 1), RETURN], "bad index array definition"),
    ([_getitem(-1, [_nd(P, [128, 1], True), 0], 1), RETURN], "bad index array definition"),
    ([_getitem(-1, [_nd(list(range(1 << 15)), [1 << 15], 0)], 1), RETURN], "bad index array definition"),
    # an entry where host data would become tile data (a fill value, an operand)
    ([_getitem(-1, [_nd(P, [128, 1], 0), 0], 1),
      {"op": "call", "mod": "new.language", "name": "full", "args": {"L": [{"T": [128, 1]}, {"ix": 0}]},
       "kw": {"D": [["dtype", {"dt": "int64"}], ["buffer", {"buf": "sbuf"}]]}, "line": 1, "h": 2}, RETURN],
     "host array can only index"),
    ([_getitem(-1, [_nd(P, [128, 1], 0), 0], 1),
      {"op": "binary", "name": "add", "a": {"t": -1}, "b": {"ix": 0}, "line": 1, "h": 2}, RETURN],
     "host array can only index"),
    ([{"op": "call", "mod": "new.language", "name": "full", "args": {"L": [{"T": [128, 1]}, _nd(P, [128, 1], 0)]},
       "kw": {"D": [["dtype", {"dt": "int64"}], ["buffer", {"buf": "sbuf"}]]}, "line": 1, "h": 2}, RETURN],
     "host array can only index"),
    # a range form (a dense nl.mgrid expression sent as its first value and axis): every
    # field checked, the size bounded, only where an index array may stand
    ([_getitem(-1, [_rg([0, 2], [128, 4]), 0], 1), RETURN], "bad range form"),
    ([_getitem(-1, [_rg([0, -1], [128, 4]), 0], 1), RETURN], "bad range form"),
    ([_getitem(-1, [_rg([0.5, 0], [128, 4]), 0], 1), RETURN], "bad range form"),
    ([_getitem(-1, [_rg([0, 0], [128, 0]), 0], 1), RETURN], "bad range form"),
    ([_getitem(-1, [_rg([0, 0], [128, True]), 0], 1), RETURN], "bad range form"),
    ([_getitem(-1, [_rg([0], [128, 4]), 0], 1), RETURN], "bad range form"),
    ([_getitem(-1, [_rg([0, 0], [1 << 12, 1 << 12]), 0], 1), RETURN], "index arrays hold integers"),
    ([_getitem(-1, [_rg([0, 0], [128, 4], "float32"), 0], 1), RETURN], "index arrays hold integers"),
    ([_getitem(-1, [_rg([120, 0], [128, 4], "int8"), 0], 1), RETURN], "bad range form"),
    ([_getitem(-1, [_rg([1, 0], [128, 1]), 0], 1),
      {"op": "call", "mod": "old.language", "name": "load", "args": {"L": [{"t": 1}]}, "kw": {"D": []}, "line": 1,
       "h": 2}, {"op": "return", "value": {"t": 2}}], "outside its tensor"),
    ([{"op": "binary", "name": "add", "a": {"t": -1}, "b": _rg([0, 0], [128, 4]), "line": 1, "h": 2}, RETURN],
     "host array can only index"),
    # a batch must hold requests only, and a command never ends inside one
    ([[_getitem(-1, [0, 0], 1), RETURN]], "bad message"),
    ([[_getitem(-1, [0, 0], 1), 7], RETURN], "bad message"),
    ([[_getitem(-1, [0, 0], 1), [_getitem(-1, [0, 0], 2)]], RETURN], "bad message"),
    ([[], RETURN], "bad message"),
])
def test_compact_forms_are_checked(lines, why, tmp_path):
    with pytest.raises(KernelFailure) as info:
        _serve(lines, tmp_path)
    assert why in info.value.error["message"], info.value.error


def test_kernel_side_sends_each_index_array_once_per_run_and_in_batches():
    rd, wr = os.pipe()
    conn = tracer.Conn(wr, os.open(os.devnull, os.O_RDONLY))
    saved, tracer.CONN = tracer.CONN, conn
    try:
        idx = np.arange(128)[:, None]
        first = tracer.encode((idx, np.arange(4)[None, :]))
        assert first == {"T": [{"nd": P, "shape": [128, 1], "dtype": "int64", "ix": 0},
                               {"nd": F, "shape": [1, 4], "dtype": "int64", "ix": 1}]}
        conn.send({"op": "getitem", "t": 1, "key": first})
        assert tracer.encode(idx + 0) == {"ix": 0}  # the same values: the entry
        # a message that is not sent (its encoding failed) defines nothing
        with pytest.raises(TypeError):
            tracer.encode((np.arange(3), object()))
        assert tracer.encode(np.arange(3)) == {"nd": [0, 1, 2], "shape": [3], "dtype": "int64", "ix": 2}
        floats = np.arange(3.0)
        assert tracer.encode(floats) == {"nd": [0.0, 1.0, 2.0], "shape": [3], "dtype": "float64"}  # never an entry
        for i in range(3):
            conn.send({"op": "getitem", "t": 1, "key": i})
        conn.send({"op": "return", "value": None}, flush=True)
        os.close(wr)
        lines = os.read(rd, 1 << 20).splitlines()
        assert [json.loads(x) for x in lines] == [
            [{"op": "getitem", "t": 1, "key": first}] + [{"op": "getitem", "t": 1, "key": i} for i in range(3)],
            {"op": "return", "value": None}]
        conn.reset_index_cache()
        assert "ix" in tracer.encode(idx) and tracer.encode(idx)["ix"] == 0
    finally:
        tracer.CONN = saved
        os.close(rd)


def test_a_shared_index_entry_is_bounds_checked_against_each_tensor(tmp_path):
    """Entries are read-only and their bounds computed once (core.frozen_index_array), but
    each use is checked against the tensor it indexes: an entry in bounds for one axis is
    refused on a shorter one."""
    load = {"op": "call", "mod": "old.language", "name": "load", "args": {"L": [{"t": 2}]}, "kw": {"D": []},
            "line": 1, "h": 3}
    with pytest.raises(KernelFailure) as info:
        _serve([_getitem(-1, [_nd(P, [128, 1], 0), _nd(F, [1, 4], 1)], 1),
                _getitem(-1, [{"ix": 1}, {"ix": 0}], 2), load, {"op": "return", "value": {"t": 3}}], tmp_path)
    assert "outside its tensor" in info.value.error["message"], info.value.error


def test_shared_index_entries_serve_as_masks_and_loads(tmp_path):
    """A read-only entry works wherever a whole index array does (an index, a mask=), and
    nothing the interpreter does with it writes to it."""
    def call(name, args, kw, h):
        return {"op": "call", "mod": "old.language", "name": name, "args": {"L": args}, "kw": {"D": kw}, "line": 1, "h": h}

    mask = {"nd": [True] * 4, "shape": [1, 4], "dtype": "bool", "ix": 2}
    res = _serve([_getitem(-1, [_nd(P, [128, 1], 0), _nd(F, [1, 4], 1)], 1),
                  call("load", [{"t": 1}], [["mask", mask]], 2),
                  _getitem(-1, [{"ix": 0}, {"ix": 1}], 3),
                  call("store", [{"t": 3}], [["value", {"t": 2}], ["mask", {"ix": 2}]], 4),
                  {"op": "return", "value": {"t": -1}}], tmp_path)
    assert res.outputs and res.outputs[0].shape == (128, 4)


def test_kernel_side_names_each_loop_iteration_once():
    """A request's loop travels only when it changes (the interpreter keeps the last one of
    the command): once per iteration, ``null`` on leaving the loops, afresh at a command."""
    rd, wr = os.pipe()
    conn = tracer.Conn(wr, os.open(os.devnull, os.O_RDONLY))
    saved, tracer.CONN = tracer.CONN, conn
    try:
        conn.post({"op": "x"}, result=False)  # outside loops: the command's start already says so
        for _ in tracer.RangeValues([0, 2, 1, False, True]):
            conn.post({"op": "x"}, result=False)
            conn.post({"op": "x"}, result=False)
        conn.post({"op": "x"}, result=False)
        conn.send({"op": "return", "value": None}, flush=True)
        os.close(wr)
        batch, end = [json.loads(line) for line in os.read(rd, 1 << 20).splitlines()]
    finally:
        tracer.CONN = saved
    assert [m.get("loop", "same") for m in batch] == ["same", [0, 2, 0, -1, 1], "same", [0, 2, 1, -1, 1], "same", None]
    assert "loop" not in end
    conn.reset_loop()  # (what serve() does at every command)
    assert conn.sent_frame is None


def test_kernel_side_knows_loop_ranges_without_waiting():
    """A range of plain integers is range(*args) (backwards for affine_range in the reversed
    run): posted for the interpreter to take in order, never waited for; other arguments
    still wait for the interpreter's answer (and its error)."""
    rd, wr = os.pipe()
    conn = tracer.Conn(wr, os.open(os.devnull, os.O_RDONLY))
    saved, tracer.CONN = tracer.CONN, conn
    try:
        nl = tracer.build_modules("new")["nki.language"]
        assert list(nl.affine_range(1, 7, 2)) == [1, 3, 5]
        conn.reverse = True
        assert list(nl.affine_range(4)) == [3, 2, 1, 0]
        assert list(nl.sequential_range(3)) == [0, 1, 2]  # only affine_range runs backwards
        conn.send({"op": "return", "value": None}, flush=True)
        os.close(wr)
        posted = json.loads(os.read(rd, 1 << 20).splitlines()[0])
    finally:
        tracer.CONN = saved
    assert [(m["name"], m.get("sync")) for m in posted] == [("affine_range", None), ("affine_range", None),
                                                            ("sequential_range", None)]
    assert not tracer._plain_range((1, 5, 0)) and not tracer._plain_range((2.0,)) and not tracer._plain_range(())


RANGES = '''import numpy as np
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(ARGS):
        t = nl.ndarray((128, 4), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=t)
    return out
'''


@pytest.mark.parametrize("args, message", [("2", None), ("1, 5, 0", "ValueError: range() arg 3 must not be zero"),
                                           ("2.5", "integer arguments")])
def test_loop_ranges_run_and_fail_in_the_kernel_process_as_in_process(args, message, tmp_path):
    path = tmp_path / "ranges.py"
    path.write_text(RANGES.replace("ARGS", args))
    install()
    a = np.arange(256 * 4, dtype=np.float32).reshape(256, 4)
    proc = KernelProcess(str(path), "k")
    try:
        proc.load()
        for reverse in (False, True):
            if message is None:
                res = execute(proc.kernel, [a], kernel_file=str(path), names=proc.names, reverse_affine=reverse)
                first_rows = [ins.reads[0][3] // (4 * 4) for ins in res.trace[::2]]  # the rows each iteration loads
                assert first_rows == ([128, 0] if reverse else [0, 128])
                np.testing.assert_array_equal(res.outputs[0], a)
            else:
                with pytest.raises(KernelFailure) as info:
                    execute(proc.kernel, [a], kernel_file=str(path), names=proc.names, reverse_affine=reverse)
                assert message in info.value.error["message"] and f"{path}:10" in info.value.error["message"]
    finally:
        proc.close()


def test_range_forms_are_served_like_the_arrays_they_name(tmp_path):
    """A dense grid sent as a range form selects what the whole array selects, and its view
    gets the basic-slicing fast path (bounds and axis known from the form)."""
    res = _serve([_getitem(-1, [_rg([0, 0], [128, 4]), _rg([0, 1], [128, 4])], 1),
                  {"op": "return", "value": {"t": 1}}], tmp_path)
    assert res.outputs[0].shape == (128, 4)


def test_kernel_side_sends_large_dense_grids_as_ranges():
    """Index arrays too large for an entry go as [first, axis] when they are a range along
    one axis repeated along the others (a dense nl.mgrid grid plus an offset), whole
    otherwise; the grids nl.mgrid returns are read-only and looked at once."""
    grid = tracer.build_modules("old")["neuronxcc.nki.language"].mgrid[0:128, 0:512]
    assert not grid.p.flags.writeable
    assert tracer.encode(3 * 128 + grid.p) == {"rg": [384, 0], "shape": [128, 512], "dtype": "int64"}
    assert tracer.encode(grid.x + 1024) == {"rg": [1024, 1], "shape": [128, 512], "dtype": "int64"}
    assert tracer.encode(grid.p)["rg"] == [0, 0] and tracer.encode(grid.p)["rg"] == [0, 0]
    skewed = grid.p + grid.x  # not a range along one axis: sent whole
    assert "nd" in tracer.encode(skewed)
    bent = grid.x.copy()
    bent[5, 7] = 0
    assert "nd" in tracer.encode(bent)
    stepped = 2 * grid.x
    assert "nd" in tracer.encode(stepped)
