"""Pieces of the GPU tier that run without a GPU: the runner's wire format (no pickle,
bounded), the toolkit view nvcc gets in its sandbox, and the runner's verdict channel."""

from __future__ import annotations

import io
import json
import os
import struct

import pytest

from autocomp.backends.cuda import gpu_wire
from autocomp.backends.cuda.compile import toolkit_dirs


def test_messages_round_trip_with_raw_payloads():
    buf = io.BytesIO()
    gpu_wire.send(buf, {"op": "run", "tensors": [{"dtype": "float32", "shape": [2], "nbytes": 8}]}, [b"\x00" * 8])
    buf.seek(0)
    header, payload = gpu_wire.receive(buf)
    assert header["op"] == "run" and payload == [b"\x00" * 8]


@pytest.mark.parametrize("raw", [
    struct.pack(">Q", gpu_wire.MAX_HEADER + 1),  # a header too large to be honest
    struct.pack(">Q", 4) + b"[1]\n",  # not an object
    struct.pack(">Q", 5) + b"\x80\x04K.",  # a pickle is not JSON
    struct.pack(">Q", 40) + json.dumps({"tensors": [{"nbytes": -1}]}).encode().ljust(40),
])
def test_malformed_messages_are_errors_not_code(raw):
    with pytest.raises(gpu_wire.WireError):
        gpu_wire.receive(io.BytesIO(raw))


def test_a_closed_pipe_is_an_error():
    with pytest.raises(gpu_wire.WireError):
        gpu_wire.receive(io.BytesIO(b"\x00\x00"))


def test_toolkit_behind_a_wrapper_script_is_found(tmp_path):
    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "bin").mkdir(parents=True)
    (toolkit / "include").mkdir()
    real = toolkit / "bin" / "nvcc"
    real.write_text("#!/bin/sh\n")
    wrapper = tmp_path / "nvcc"
    wrapper.write_text(f"#!/bin/sh\nexec {real} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    assert str(toolkit) in toolkit_dirs(str(wrapper))
