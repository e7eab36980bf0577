"""Where each DOSA binary's buffers sat in a cache line, inferred from FireSim's per-run figures.

    python bench/gemmini_dosa_offsets.py --suite CHECKOUT [--json FILE]

Every network's layers ran in three binaries (runs dnn, analytical, both), and the same
library call ran up to 50% apart between them: the binaries differ only in DOSA's tables, which
move the static buffers to another place within a 64-byte line (gemmini_dosa_layers.LINE_OFFSET
says why, and why the offsets cannot be read from a rebuild). This bench times every DOSA layer
on the model with its binary's buffers at every offset the template allows (multiples of 8 for
the convolution binaries, 16 for the matmul ones), reads each run's own FireSim figure of the
library call from the artifact (`target.gemmini_auto_cycle` of branch `dosa`'s
`gemmini-data-collection/artifact/<run>/<net>.csv`, read from the clone at run time), and prints,
per binary and run, the offset at which the model best matches that run (least RMS log error),
fitted on all its layers and on each half of them (alternate layers), next to the shipped
LINE_OFFSET. An offset is trustworthy when both halves pick it (or offsets the model cannot tell
apart); the last lines give the error on the held-out half with the halves' offsets against
every buffer on a line. Takes about 20 minutes on two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from autocomp.backends.gemmini.toolchain import GemminiToolchain  # noqa: E402

import gemmini_dosa_layers as dosa  # noqa: E402
import gemmini_dosa_mappings as mappings  # noqa: E402


def offsets_of(binary: str) -> range:
    """The line offsets a binary's buffers can have: matmul_tilings.c aligns them to 16 bytes,
    conv_tilings.c to 8."""
    return range(0, 64, 16 if binary.endswith("matmuls") else 8)


def per_run_figures(table: list[dict]) -> dict[tuple[str, str], list[tuple[tuple, float]]]:
    """(binary, run) -> [(layer shape, FireSim cycles of its library call)] from the artifact's
    rows (gemmini_dosa_mappings.rows), for the layers in gemmini_dosa_layers.LAYERS, in the
    binary's order."""
    known = {tuple(layer[:7]) for layer in dosa.LAYERS}
    out: dict[tuple[str, str], list] = {}
    for row in table:
        shape = tuple(row["shape"])
        if shape in known:
            out.setdefault((dosa.binary_of(row["network"], shape[0]), row["run"]), []).append((shape, row["auto_cycles"]))
    return out


def best_offset(model: dict[tuple[str, tuple, int], float], binary: str, figures: list[tuple[tuple, float]]) -> tuple[int, float]:
    """The offset whose modelled cycles match `figures` with the least RMS log error, and that error."""
    offset = min(offsets_of(binary), key=lambda o: rms_error(model, binary, figures, o))
    return offset, rms_error(model, binary, figures, offset)


def rms_error(model, binary: str, figures: list[tuple[tuple, float]], offset: int) -> float:
    logs = [math.log(model[binary, shape, offset] / cycles) for shape, cycles in figures]
    return math.sqrt(sum(v * v for v in logs) / len(logs))


async def time_all(tc: GemminiToolchain, work: Path) -> dict[tuple[str, tuple, int], float]:
    """Model cycles of every (binary, layer, offset): the median over the layer's histories in
    that binary (usually one)."""
    lanes = asyncio.Semaphore(2)
    count = 0

    async def simulate(source: str) -> int:
        nonlocal count
        count += 1
        d = work / f"p{count}"
        d.mkdir()
        (d / "prog.c").write_text(source)
        async with lanes:
            built = await tc.compile([str(d / "prog.c")], str(d / "prog.elf"), str(d))
            if not built.ok:
                raise SystemExit(f"compile failed:\n{built.tail()}")
            run = await tc.run(str(d / "prog.elf"), str(d), {}, timeout=900, max_instructions=2_000_000_000,
                               host_dcache=True, buffers_kib=dosa.IMAGE_BUFFERS_KIB)
        if run.error or run.cycles is None:
            raise SystemExit(f"run failed: {run.error}")
        return run.cycles

    async def one(binary: str, shape: tuple, offset: int):
        cycles = await asyncio.gather(*(simulate(dosa.program(*shape, history=h, line_offset=offset))
                                        for h in dosa.histories(shape, binary)))
        return (binary, shape, offset), statistics.median(cycles)

    known = {tuple(layer[:7]) for layer in dosa.LAYERS}
    jobs = [one(binary, shape, offset) for binary, order in dosa.BINARIES.items()
            for shape in dict.fromkeys(order) if shape in known for offset in offsets_of(binary)]
    return dict(await asyncio.gather(*jobs))


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", required=True, help="a local clone of ucb-bar/gemmini-rocc-tests (with branch dosa)")
    ap.add_argument("--json", default="", help="also write the modelled cycles per binary, layer and offset here")
    args = ap.parse_args()
    table = mappings.rows_or_explain(args.suite)
    if table is None:
        return 2
    figures = per_run_figures(table)
    tc = GemminiToolchain.discover({})
    with tempfile.TemporaryDirectory(prefix="gemmini-dosa-offsets-") as tmp:
        model = await time_all(tc, Path(tmp))
    if args.json:
        Path(args.json).write_text(json.dumps([{"binary": b, "shape": list(s), "offset": o, "cycles": c}
                                               for (b, s, o), c in model.items()], indent=1))
    print("Model cycles against each run's FireSim figure (RMS log error); offsets in bytes into a 64-byte line")
    print(f"{'binary':24s} {'run':11s} {'shipped':>7s} {'best':>10s} {'even half':>10s} {'odd half':>10s} {'on a line':>10s}")
    held_fit, held_line = [], []
    for binary in dosa.BINARIES:
        for run in dosa.RUNS:
            rows = figures.get((binary, run), [])
            if not rows:
                continue
            best, err = best_offset(model, binary, rows)
            halves = [rows[0::2], rows[1::2]]
            picks = [best_offset(model, binary, half) if half else (None, 0.0) for half in halves]
            for (offset, _), held in zip(picks, reversed(halves)):
                if offset is None or not held:
                    continue
                held_fit += [math.log(model[binary, s, offset] / c) for s, c in held]
                held_line += [math.log(model[binary, s, 0] / c) for s, c in held]
            half_text = [f"{o:>3} {e:.3f}" if o is not None else "-" for o, e in picks]
            print(f"{binary:24s} {run:11s} {dosa.LINE_OFFSET[binary][run]:>7} {best:>3} {err:.3f} "
                  f"{half_text[0]:>10s} {half_text[1]:>10s} {rms_error(model, binary, rows, 0):>10.3f}")

    def summary(logs: list[float]) -> str:
        rms = math.sqrt(sum(v * v for v in logs) / len(logs))
        within = sum(1 for v in logs if abs(math.exp(v) - 1) <= 0.15)
        return f"RMS log error {rms:.3f}, {within} of {len(logs)} within 15%"
    print(f"held-out halves, each at the offset the other half picked: {summary(held_fit)}")
    print(f"held-out halves, every buffer on a line:                   {summary(held_line)}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
