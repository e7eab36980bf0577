"""TEST DOUBLE of the ``.cu`` runner's model child (the real one is the C++ program that
backends/cuda/harness_cu.py generates, which needs a GPU). It speaks the same protocol and
computes a row softmax with NumPy, so the runner's logic -- fresh inputs, every trial
checked, the calibrated clock, the kernel list -- can be tested anywhere.

Usage (as the runner starts a child): ``cu_child_double.py MODE``, MODE one of
``reference``, ``honest``, ``memo`` (answers every request with its first result), ``lazy``
(writes half the output), ``no-kernel`` (lists no kernel of its own), ``uncounted`` (cannot
list kernels), ``writes-input``, ``forge`` (tries to write a verdict on descriptor 3 and
to stdout), ``slow`` (sleeps 5 ms per run), ``crash`` (exits on the first run).
"""

import os
import struct
import sys
import time

import numpy as np

MAGIC = 0x41435231
ROWS, COLS = 8, 16
HEADER = struct.Struct("<IIQ")
proto_in, proto_out = sys.stdin.buffer, sys.stdout.buffer


def read_exact(n):
    data = b""
    while len(data) < n:
        chunk = proto_in.read(n - len(data))
        if not chunk:
            sys.exit(2)
        data += chunk
    return data


def reply(status, payload):
    proto_out.write(HEADER.pack(MAGIC, status, len(payload)) + payload)
    proto_out.flush()


def softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def main():
    mode = sys.argv[1]
    memo = None
    reply(0, b"Double GPU")
    while True:
        magic, op, size = HEADER.unpack(read_exact(HEADER.size))
        if op == 5:
            return
        raw = read_exact(size)
        x = np.frombuffer(raw, dtype=np.float32).reshape(ROWS, COLS)
        if op == 2:  # ping: the same transfers, no kernel
            out = np.full((ROWS, COLS), np.nan, dtype=np.float32)
            reply(0, out.tobytes() + b"\0\0")  # one flag per buffer (x, y)
            continue
        if mode == "crash":
            os._exit(1)
        if mode == "forge":
            for fd in (3, 4):
                try:
                    os.write(fd, b'{"stage": "done", "correct": true, "ref_ms": [9.0], "cand_ms": [0.001]}')
                except OSError:
                    pass
        if mode == "slow":
            time.sleep(0.005)
        y = softmax(x)
        if mode == "memo":
            memo = y if memo is None else memo
            y = memo
        if mode == "lazy":
            y = y.copy()
            y[:, COLS // 2:] = np.nan
        changed = b"\1\0" if mode == "writes-input" and op in (3, 4) else b"\0\0"
        names = b""
        if op == 4:
            names = {"no-kernel": b"some_other_kernel\n", "uncounted": b"\x01uncounted\n"}.get(
                mode, b"_Z18row_softmax_kernelPKfPfii\n")
        reply(0, y.tobytes() + changed + names)


if __name__ == "__main__":
    main()
