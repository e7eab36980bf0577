"""The trace's binary batches (trace_wire): the parent rebuilds exactly what was recorded,
and refuses, with a clean "malformed" outcome, every batch a well-behaved child never sends."""

from __future__ import annotations

import json
from array import array

import numpy as np
import pytest

from autocomp.backends.nki.harness import ChannelParser, parse_channel
from autocomp.backends.nki.trace import Instr
from autocomp.backends.nki.trace_wire import Decoder, Encoder

RESULT = b'["result", {"status": "ok"}]\n'


def _trace(n: int = 40) -> list[Instr]:
    rng = np.random.default_rng(3)
    out = []
    for i in range(n):
        region = (int(rng.integers(-3, 9)), 0, 128, int(rng.integers(0, 64)), int(rng.integers(64, 4096)))
        info: dict = {"op": ["add", "multiply"][i % 2]}
        if i % 3:
            info["loop"] = [1, 8, i % 8, -1, 1]
        if i % 5 == 0:
            info["psum"] = [2, 7]
            info["bytes"] = 1.0 if i % 10 else 1  # 1 and 1.0 stay apart, as in JSON
        out.append(Instr(["tensor_tensor", "dma_copy"][i % 2], ["vector", "dma"][i % 2], 10 + i % 4, 128,
                         int(rng.integers(1, 512)), 4, (region,) * (i % 3), (region,), info))
    return out


def _channel(trace: list[Instr], amend_at: dict[int, tuple] | None = None, size: int = 7) -> tuple[bytes, list[Instr]]:
    """Batches of ``size`` records, amendments after some instructions; and the trace the
    parent must rebuild."""
    enc, raw, expected = Encoder(), b"", []
    for i, ins in enumerate(trace):
        enc.instr(ins)
        expected.append(Instr(ins.op, ins.engine, ins.line, ins.partitions, ins.free, ins.dtype_bytes, ins.reads,
                              ins.writes, dict(ins.info)))
        if amend_at and i in amend_at:
            index, reads, writes = amend_at[i]
            enc.amend(index, reads, writes)
            expected[index].reads += reads
            expected[index].writes += writes
        if (i + 1) % size == 0:
            raw += b"".join(enc.batch())
    last = enc.batch()
    return raw + (b"".join(last) if last else b"") + RESULT, expected


@pytest.mark.parametrize("chunk", [1, 13, 1 << 20])
def test_batches_rebuild_the_instructions_and_amendments(chunk):
    amend = {5: (2, ((4, 0, 64, 0, 8),), ()), 30: (29, (), ((1, 0, 1, 0, 4), (2, 0, 2, 0, 8)))}
    raw, expected = _channel(_trace(), amend)
    result, trace, _, problem = parse_channel(raw)
    assert problem == "" and result == {"status": "ok"}
    assert trace == expected
    assert [type(ins.info.get("bytes")) for ins in trace] == [type(ins.info.get("bytes")) for ins in expected]
    fed = ChannelParser()
    for i in range(0, len(raw), chunk):
        fed.feed(raw[i:i + chunk])
    assert fed.finish()[1] == expected


def _batch(templates, ints) -> bytes:
    payload = array("q", ints).tobytes()
    return json.dumps(["tb", templates, len(payload)]).encode() + b"\n" + payload


T0 = [[0, "memset", "vector", 3, {}]]
GOOD = [0, 0, 128, 4, 4, 0, 1, 1, 0, 128, 0, 16, 0, 0]  # ... no loop, no PSUM ids


@pytest.mark.parametrize("raw", [
    _batch([[0, "memset", "warp", 3, {}]], GOOD),  # unknown engine
    _batch(T0 + T0, GOOD),  # a template defined twice
    _batch(T0, GOOD) + _batch(T0, GOOD),  # ... or again in a later batch
    _batch([], GOOD),  # an undefined template
    _batch([[0, "memset", "vector", "3", {}]], GOOD),  # a line that is not an integer
    _batch([[0, "memset", "vector", 3, []]], GOOD),  # info that is not an object
    _batch(T0, GOOD[:-2]),  # cut before the loop flag
    _batch(T0, GOOD[:-2] + [2, 0]),  # a loop flag that is neither 0 nor 1
    _batch(T0, GOOD[:-2] + [1, 1, 2]),  # a loop cut short
    _batch(T0, GOOD[:-1]),  # cut before the PSUM id count
    _batch(T0, GOOD[:-1] + [-1]),  # a negative PSUM id count
    _batch(T0, GOOD[:-1] + [65] + [1] * 65),  # more PSUM ids than an instruction has operands
    _batch(T0, GOOD[:-1] + [3, 1]),  # PSUM ids past the batch
    _batch(T0, GOOD[:5] + [-1] + GOOD[6:]),  # a negative region count
    _batch(T0, GOOD[:5] + [1 << 40] + GOOD[6:]),  # a count past the batch
    _batch(T0, [1, 0, 0, 0]),  # an amendment of an instruction never sent
    _batch(T0, GOOD + [1, 1, 0, 0]),  # ... one past the end
    _batch(T0, GOOD + [7]),  # an unknown record
    json.dumps(["tb", T0, 12]).encode() + b"\n" + b"\0" * 12,  # partial integers
    json.dumps(["tb", T0, 800]).encode() + b"\n" + b"\0" * 16,  # a payload cut short
    json.dumps(["tb", T0, -8]).encode() + b"\n",
    b'["tb", [], 1e400]\n',  # a size no integer holds
    b'["array", "k", "float32", [1], 1e400]\n',
])
def test_malformed_batches_are_refused(raw):
    result, _, _, problem = parse_channel(raw + RESULT)
    assert result is None and problem
    fed = ChannelParser()
    fed.feed(raw + RESULT)
    result, _, _, problem = fed.finish()
    assert result is None and problem


def test_any_corruption_of_a_real_channel_ends_in_a_clean_outcome():
    """Flipped bytes anywhere: the parser gives a result or a problem, never an exception."""
    raw, _ = _channel(_trace(30), size=4)
    rng = np.random.default_rng(11)
    for _ in range(400):
        bad = bytearray(raw)
        for at in rng.integers(0, len(bad), 3):
            bad[at] = int(rng.integers(0, 256))
        result, trace, _, problem = parse_channel(bytes(bad))
        assert (result is None) == bool(problem)
        fed = ChannelParser()
        fed.feed(bytes(bad))
        assert (fed.finish()[0] is None) == (result is None)


def test_the_trace_limit_holds_for_batches(monkeypatch):
    from autocomp.backends.nki import harness

    monkeypatch.setattr(harness, "MAX_TRACE", 10)
    raw, _ = _channel(_trace(20), size=3)
    result, _, _, problem = parse_channel(raw)
    assert result is None and "more than 10 instructions" in problem


def test_changing_psum_ids_share_one_template():
    """Every matmul of a large kernel accumulates into a fresh PSUM tile: the ids travel with
    the instruction, so such a run defines one template, not one per instruction."""
    region = (5, 0, 128, 0, 512)
    trace = [Instr("nc_matmul", "tensor", 51, 128, 512, 4, (region,), (region,),
                   {"stationary_free": 128, "loop": [2, 64, i % 64, 1, 1], "psum": [100 + i]}) for i in range(300)]
    raw, expected = _channel(trace, size=64)
    result, rebuilt, _, problem = parse_channel(raw)
    assert problem == "" and rebuilt == expected
    assert raw.count(b'"nc_matmul"') == 1


def test_a_batch_header_is_read_once_however_its_payload_arrives(monkeypatch):
    raw, expected = _channel(_trace(200), size=100)
    reads = []
    real = json.loads
    monkeypatch.setattr("autocomp.backends.nki.harness.json.loads", lambda b, *a, **k: reads.append(1) or real(b, *a, **k))
    fed = ChannelParser()
    for i in range(0, len(raw), 7):
        fed.feed(raw[i:i + 7])
    assert fed.finish()[1] == expected
    assert len(reads) <= 4  # two batch headers and the result line (not one per 7-byte piece)


def test_decoder_templates_persist_across_batches():
    dec = Decoder()
    dec.define(T0)
    trace: list[Instr] = []
    assert dec.apply(array("q", GOOD).tobytes(), trace, 10)
    assert dec.apply(array("q", GOOD).tobytes(), trace, 10)
    assert [ins.op for ins in trace] == ["memset", "memset"] and trace[0].writes == ((1, 0, 128, 0, 16),)
