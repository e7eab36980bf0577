"""The interpreter/kernel-process split: the channel parser the parent trusts, the checks on
what a kernel process may send, and the kernel process running the shipped examples."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from autocomp.backends.nki.harness import ChannelParser, parse_channel
from autocomp.backends.nki.interp import install
from autocomp.backends.nki.interp.install import execute
from autocomp.backends.nki.remote import KernelFailure, KernelProcess, _affine
from autocomp.backends.nki.trace import Instr

ROOT = Path(__file__).resolve().parents[2]


def _line(msg) -> bytes:
    return json.dumps(msg).encode() + b"\n"


def test_channel_parser_takes_instructions_arrays_and_one_final_result():
    ins = Instr("memset", "vector", 3, 128, 4, 4, (), ((1, 0, 128, 0, 16),), {}).to_list()
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    raw = (_line(["i", ins]) + _line(["a", 0, [[1, 0, 128, 0, 16]], []])
           + _line(["array", "s0_out0", "float32", [2, 3], arr.nbytes]) + arr.tobytes() + _line(["result", {"status": "ok"}]))
    result, trace, arrays, problem = parse_channel(raw)
    assert problem == "" and result == {"status": "ok"}
    assert len(trace) == 1 and trace[0].reads == ((1, 0, 128, 0, 16),)
    np.testing.assert_array_equal(arrays["s0_out0"], arr)


@pytest.mark.parametrize("raw, why", [
    (_line(["result", {"status": "ok"}]) + _line(["result", {"status": "ok"}]), "after the result"),
    (_line(["i", ["x", "warp", 1, 1, 1, 4, [], [], {}]]), "malformed"),
    (_line(["a", 5, [], []]) + _line(["result", {}]), "malformed"),
    (_line(["array", "k", "float32", [4], 16]) + b"\0" * 8, "bad array"),
    (_line(["array", "k", "object", [1], 8]) + b"\0" * 8 + _line(["result", {}]), "malformed"),
    (_line(["whatever"]), "unknown message"),
    (b'["i", [', "truncated"),
    (b"", "no result"),
])
def test_channel_parser_refuses_what_a_well_behaved_child_never_sends(raw, why):
    result, _, _, problem = parse_channel(raw)
    assert result is None and why in problem


def test_iota_expressions_must_be_affine():
    i = np.arange(128)[:, None]
    j = np.arange(64)[None, :]
    assert _affine(np.broadcast_to(3 + 2 * i + 5 * j, (128, 64)).copy())
    assert _affine(np.arange(7))
    assert not _affine(np.array([0, 1, 5, 2]))
    assert not _affine((i * i + j).astype(np.int64))


@pytest.mark.parametrize("name", ["gemm", "rmsnorm", "layernorm", "softmax"])
def test_kernel_process_gives_the_same_trace_and_outputs_as_running_in_process(name):
    """The split is invisible to a kernel: same instructions, same regions, same values."""
    import importlib.util

    install()
    path = str(ROOT / "examples" / "nki" / f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"remote_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fn_name = [n for n in dir(mod) if n.endswith("_kernel")][0]
    args = mod.get_inputs(np.random.default_rng(0))
    local = execute(getattr(mod, fn_name), args, kernel_file=path)
    proc = KernelProcess(path, fn_name)
    try:
        proc.load()
        remote = execute(proc.kernel, args, kernel_file=path, names=proc.names)
    finally:
        proc.close()
    assert [i.to_list() for i in remote.trace] == [i.to_list() for i in local.trace]
    for a, b in zip(remote.outputs, local.outputs):
        np.testing.assert_array_equal(a, b)


def test_kernel_process_errors_name_the_line_and_tensors_do_not_outlive_a_call(tmp_path):
    install()
    path = tmp_path / "k.py"
    path.write_text('''import nki
import nki.isa as nisa
import nki.language as nl

KEEP = []


@nki.jit
def k(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((256, 4), dtype=a.dtype, buffer=nl.sbuf)
    return out


@nki.jit
def stash(a):
    if KEEP:
        return KEEP[0]
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.dma_copy(dst=out, src=t)
    KEEP.append(out)
    return out
''')
    a = np.zeros((128, 4), np.float32)
    proc = KernelProcess(str(path), "k")
    try:
        proc.load()
        with pytest.raises(KernelFailure) as info:
            execute(proc.kernel, [a], kernel_file=str(path), names=proc.names)
        assert f"{path}:11:" in info.value.error["message"] and "partition" in info.value.error["message"]
    finally:
        proc.close()
    proc = KernelProcess(str(path), "stash")
    try:
        proc.load()
        first = execute(proc.kernel, [a], kernel_file=str(path), names=proc.names)
        assert (first.outputs[0] == 1.0).all()
        with pytest.raises(KernelFailure) as info:  # the second call returns the first call's tensor
            execute(proc.kernel, [a], kernel_file=str(path), names=proc.names)
        assert "earlier kernel call" in info.value.error["message"]
    finally:
        proc.close()


def _fed(raw: bytes, size: int):
    """ChannelParser fed ``raw`` in chunks of ``size`` bytes, as the channel reader does."""
    parser = ChannelParser()
    for i in range(0, len(raw), size):
        parser.feed(raw[i:i + size])
    return parser.finish()


def _same_parse(a, b) -> None:
    assert a[0] == b[0] and a[3] == b[3]
    assert [ins.to_list() for ins in a[1]] == [ins.to_list() for ins in b[1]]
    assert a[2].keys() == b[2].keys() and all(np.array_equal(a[2][k], b[2][k]) for k in a[2])


_INS = Instr("memset", "vector", 3, 128, 4, 4, (), ((1, 0, 128, 0, 16),), {}).to_list()
_ARR = np.arange(6, dtype=np.float32).reshape(2, 3)
FED_CHANNELS = [
    _line(["t", [["i", _INS], ["i", _INS], ["a", 1, [[1, 0, 128, 0, 16]], []]]]) + _line(["i", _INS])
    + _line(["array", "s0_out0", "float32", [2, 3], _ARR.nbytes]) + _ARR.tobytes() + _line(["result", {"status": "ok"}]),
    _line(["t", [["i", _INS]]]) + b"\n" + _line(["t", [["i", _INS]]]) + _line(["result", {}]),  # an empty line mid-trace
    _line(["t", [["a", 3, [], []]]]) + _line(["result", {}]),  # amends an instruction never sent
    _line(["t", [["i", _INS]]]) + b'["t", [["i", ',  # cut mid-line
    _line(["t", "x"]) + _line(["result", {}]),
    _line(["t", [["i", _INS]]]) + _line(["result", {}]) + _line(["t", [["i", _INS]]]),  # trace after the result
    _line(["i", _INS]) + _line(["whatever"]),
    b"",
] + [raw for raw, _ in [
    (_line(["result", {"status": "ok"}]) + _line(["result", {"status": "ok"}]), ""),
    (_line(["i", ["x", "warp", 1, 1, 1, 4, [], [], {}]]), ""),
    (_line(["array", "k", "float32", [4], 16]) + b"\0" * 8, ""),
]]


@pytest.mark.parametrize("raw", FED_CHANNELS, ids=range(len(FED_CHANNELS)))
@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 30])
def test_channel_fed_as_it_arrives_parses_as_the_whole_channel(raw, size):
    """The parent parses the trace while the child runs (ChannelParser, fed by the channel
    reader): whatever the chunks, the outcome (result, trace, arrays, or the refusal) is the
    one parse_channel gives for the whole channel."""
    _same_parse(_fed(raw, size), parse_channel(raw))
