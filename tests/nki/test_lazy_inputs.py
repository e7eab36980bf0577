"""The original's input sets are made when their run starts: a problem too large for more
than one set within autocomp.target.nki.seed_budget draws one set, not all of them (drawing
the unused ones was a third of a large evaluation), and a set that cannot be made fails
with the seed named when it is reached."""

from __future__ import annotations

import os
import sys
import textwrap

from autocomp.backends.nki import runner

KERNEL = textwrap.dedent('''
    import numpy as np
    import nki
    import nki.isa as nisa
    import nki.language as nl

    MADE = []

    @nki.jit
    def copy(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.dma_copy(dst=out, src=t)
        return out

    def get_inputs(rng):
        MADE.append(1)
        if FAIL_AT is not None and len(MADE) == FAIL_AT:
            raise RuntimeError("no input here")
        return [rng.standard_normal((128, 64)).astype(np.float32)]
    ''')


def _run(tmp_path, budget: float, fail_at: int | None, channel: runner.Channel | None = None, **extra):
    path = tmp_path / "kernel.py"
    path.write_text(KERNEL.replace("MADE = []", f"MADE = []\nFAIL_AT = {fail_at!r}"))
    request = {"mode": "oracle", "file": str(path), "function": "copy", "seeds": [0, 1, 2], "rng_seeds": [7, 8, 9],
               "seed_budget": budget, **extra}
    result, arrays = runner.run(request, channel)
    return result, arrays, sys.modules["autocomp_nki_kernel"].MADE


def test_the_first_set_is_sent_before_the_others_are_made(tmp_path):
    """A candidate can start on the first set while the original's child still makes the
    others (random inputs at published shapes take seconds per set)."""
    fd = os.open(tmp_path / "channel", os.O_RDWR | os.O_CREAT)
    try:
        channel = runner.Channel(fd)
        made_when_sent = []
        send = channel.message

        def message(msg):
            if msg[0] == "inputs":
                made_when_sent.append(len(sys.modules["autocomp_nki_kernel"].MADE))
            send(msg)

        channel.message = message
        result, arrays, made = _run(tmp_path, budget=0, fail_at=None, channel=channel, early_inputs=True)
    finally:
        os.close(fd)
    assert result["status"] == "ok", result
    assert made_when_sent == [1] and len(made) == 3
    assert "s0_in0" not in arrays and "s1_in0" in arrays  # the first set went early, once


def test_a_set_the_budget_does_not_reach_is_never_made(tmp_path):
    result, arrays, made = _run(tmp_path, budget=1e-9, fail_at=None)
    assert result["status"] == "ok" and result["seeds_run"] == [0]
    assert len(made) == 1 and sorted(arrays) == ["s0_in0", "s0_out0"]


def test_every_set_is_made_when_the_budget_allows(tmp_path):
    result, arrays, made = _run(tmp_path, budget=0, fail_at=None)  # (0: no budget, every set runs)
    assert result["status"] == "ok" and result["seeds_run"] == [0, 1, 2] and len(made) == 3


def test_a_set_that_cannot_be_made_names_its_seed(tmp_path):
    result, _, _ = _run(tmp_path, budget=0, fail_at=2)
    assert result["status"] == "error" and result["error"]["kind"] == "inputs"
    assert "seed 1" in result["error"]["message"] and "no input here" in result["error"]["message"]
    first, _, _ = _run(tmp_path, budget=0, fail_at=1)
    assert first["status"] == "error" and "seed 0" in first["error"]["message"]
