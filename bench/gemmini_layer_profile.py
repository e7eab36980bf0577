"""Where the model's time goes on the DOSA layers: a diagnostic for model work, not a fidelity figure.

    python bench/gemmini_layer_profile.py [--only SUBSTRING ...] [--latency D,L2,LLC] [--json FILE]
                                          [--timeline DIR]

For each DOSA layer (gemmini_dosa_layers.py; the first of its programs, i.e. its first history),
runs the model with its diagnostics on (`stats 1`) and prints, next to model and FireSim cycles
and the error: what the measured call read through the DMA per modelled cycle (bytes a cycle:
the read side's pace, against the 16-byte bus), the share of those reads the L2 answered, the
L2 misses the LLC answered and those that went to DRAM, and for convolutions the library's tile
(output rows x cols, input and output channels per call), the number of loop_conv_ws calls and
how load-bound the calls are (the median call's cycles issuing loads against its execute
window, from its first step to its last, which includes waiting for the loads' data). `--latency` reruns with other memory latencies, as bench/gemmini_calibrate.py does,
to see which layers a latency moves. `--timeline DIR` (small layers: at most 8,000 lines are
traced) writes each layer's command timeline (`stats 2`: every command's queue entry, start,
occupancy and completion, every loop_ws's unrolling, in cycles from the call's start) to
DIR/<layer>.timeline and prints where the call's time went: host work before its first command,
when the last load, compute and store completed.

Why it exists: the calibration and fidelity benches say how far each layer is from FireSim;
this says what the model thinks bounds it (loads from the L2, the LLC or DRAM, or the array),
which is where a wrong layer's error has to come from. MODEL.md's analysis of ResNet's strided
1x1 layers (load-bound at 12.7-14.6 bytes a cycle of mostly L2 hits) was read from this.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from autocomp.backends.gemmini.backend import DEFAULTS  # noqa: E402
from autocomp.backends.gemmini.toolchain import GemminiToolchain  # noqa: E402

import gemmini_dosa_layers as dosa  # noqa: E402

# The counters of one `gemmini stats (...)` line (gemmini_ext.cc print_memory_stats), by name.
_COUNTERS = {
    "l2_hits": r"l2 hits (\d+)",
    "l2_misses": r"l2 hits \d+ misses (\d+)",
    "llc_hits": r"llc hits (\d+)",
    "llc_misses": r"llc hits \d+ misses (\d+)",
    "dma_reads": r"dma read requests (\d+)",
    "dma_writes": r"write requests (\d+)",
}
_CONV_TRACE = re.compile(
    r"TRACE conv i\d+ b(\d+) or(\d+) oc(\d+) kr(\d+) kc(\d+) kch(\d+) poch(\d+) w\d i\d o(\d) \| t0 \d+ "
    r"ld (\d+)\.\.(\d+) done \d+ \| ex (\d+)\.\.(\d+) E (\d+)")
DMA_REQUEST_BYTES = 64  # a read request carries at most one 64-byte line (timing_params.h)


def counters(line: str) -> dict[str, int]:
    """The counters of one stats line; a counter the line lacks is an error (the format moved)."""
    out = {}
    for name, pattern in _COUNTERS.items():
        m = re.search(pattern, line)
        if m is None:
            raise ValueError(f"stats line without {name!r}: {line[:120]}")
        out[name] = int(m.group(1))
    return out


_TIMELINE_CMD = re.compile(r"TRACE cmd (\S+) (\S+) entered (\d+) start (\d+) busy (\d+) done (\d+)")


def timeline_phases(stderr: str) -> dict[str, int]:
    """From a `stats 2` run's timeline: when (cycles from the measured call's start) the first
    command entered its queue and the last load, compute and store completed."""
    first, last = None, {"load": 0, "execute": 0, "store": 0}
    for line in stderr.splitlines():
        m = _TIMELINE_CMD.match(line)
        if not m:
            continue
        queue, entered, done = m.group(2), int(m.group(3)), int(m.group(6))
        first = entered if first is None else min(first, entered)
        if queue in last:
            last[queue] = max(last[queue], done)
    if first is None:
        raise ValueError("no command timeline in the diagnostics (was `stats 2` set?)")
    return {"first_command": first, "last_load_done": last["load"], "last_compute_done": last["execute"],
            "last_store_done": last["store"]}


def timeline_text(stderr: str) -> str:
    """The timeline lines of the measured region (TRACE cmd / loop_ws / truncated)."""
    keep = ("TRACE cmd ", "TRACE loop_ws ", "TRACE timeline ")
    return "".join(line + "\n" for line in stderr.splitlines() if line.startswith(keep))


@dataclass
class ConvCall:
    """One loop_conv_ws call of the measured region, as its trace line tells it."""
    orows: int
    ocols: int
    kchs: int
    pochs: int
    writes_output: bool
    load_issue_cycles: int
    execute_cycles: int


@dataclass
class Profile:
    """What the measured call of one program did, from the model's diagnostics."""
    counts: dict[str, int] = field(default_factory=dict)  # counters over the measured region
    calls: list[ConvCall] = field(default_factory=list)


def profile(stderr: str) -> Profile:
    """Counters over the last measured region (its start's stats line to the next one) and the
    loop_conv_ws calls traced inside it."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("gemmini stats (measure_begin)")]
    if not starts:
        raise ValueError("no measured region in the diagnostics (was `stats 1` set?)")
    begin = starts[-1]
    end = next((i for i in range(begin + 1, len(lines)) if lines[i].startswith("gemmini stats")), None)
    if end is None:
        raise ValueError("the measured region's closing stats line is missing")
    before, after = counters(lines[begin]), counters(lines[end])
    calls = []
    for line in lines[begin:end]:
        m = _CONV_TRACE.match(line)
        if m:
            _b, orows, ocols, _kr, _kc, kchs, pochs, out, l0, l1, e0, e1, _e = (int(v) for v in m.groups())
            calls.append(ConvCall(orows, ocols, kchs, pochs, bool(out), l1 - l0, e1 - e0))
    return Profile({k: after[k] - before[k] for k in before}, calls)


def summary_row(name: str, model: int, firesim: int, prof: Profile) -> dict:
    """The printed figures of one layer, as a dict (the --json record)."""
    c = prof.counts
    l2 = c["l2_hits"] + c["l2_misses"]
    row = {
        "layer": name, "model_cycles": model, "firesim_cycles": firesim, "error": model / firesim - 1,
        "dma_read_bytes_per_cycle": c["dma_reads"] * DMA_REQUEST_BYTES / model,
        "l2_hit_share": c["l2_hits"] / l2 if l2 else None,
        "llc_hits": c["llc_hits"], "dram_reads": c["llc_misses"], "calls": len(prof.calls),
    }
    if prof.calls:
        biggest = max(prof.calls, key=lambda k: k.orows * k.ocols * k.kchs)
        row["tile"] = f"{biggest.orows}x{biggest.ocols} {biggest.kchs}->{biggest.pochs}"
        row["median_load_issue_cycles"] = statistics.median(k.load_issue_cycles for k in prof.calls)
        row["median_execute_cycles"] = statistics.median(k.execute_cycles for k in prof.calls)
    return row


def format_row(row: dict) -> str:
    hit = "-" if row["l2_hit_share"] is None else f"{row['l2_hit_share']:.2f}"
    text = (f"{row['layer']:34s} {row['model_cycles']:>12,} {row['firesim_cycles']:>12,} {100 * row['error']:+6.1f}%"
            f"  {row['dma_read_bytes_per_cycle']:5.1f} B/c  L2 {hit}  LLC {row['llc_hits']:>8,}  DRAM {row['dram_reads']:>8,}")
    if "tile" in row:
        text += (f"  tile {row['tile']:>14s} x{row['calls']:<4d} load/ex "
                 f"{row['median_load_issue_cycles']:,.0f}/{row['median_execute_cycles']:,.0f}")
    return text


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=[], help="layers whose name contains any of these")
    ap.add_argument("--latency", help="DRAM,L2,LLC latencies for this run (calibration values)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--timeline", type=Path, help="write each layer's command timeline into this directory")
    args = ap.parse_args()
    latency = tuple(int(v) for v in args.latency.split(",")) if args.latency else None
    if latency is not None and len(latency) != 3:
        ap.error("--latency takes three numbers: DRAM,L2,LLC (e.g. 60,40,50)")
    layers = [la for la in dosa.LAYERS if not args.only or any(s in dosa.name(*la[:7]) for s in args.only)]
    if not layers:
        ap.error("no DOSA layer matches --only; names look like 'conv 28x28 256->512 1x1/2'")
    toolchain = GemminiToolchain.discover({})
    print("layer                                     model      FireSim  error   DMA reads, L2 answered, "
          "LLC hits, DRAM reads; conv: biggest tile x calls, median load-issue / execute cycles per call")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, layer in enumerate(layers):
            name = dosa.name(*layer[:7])
            work = Path(tmp) / str(i)
            work.mkdir()
            (work / "prog.c").write_text(dosa.programs(layer)[0])
            built = await toolchain.compile([str(work / "prog.c")], str(work / "prog.elf"), str(work))
            if not built.ok:
                print(f"{name}: does not build: {built.tail()}")
                return 1
            run = await toolchain.run(str(work / "prog.elf"), str(work), {}, timeout=900,
                                      max_instructions=2_000_000_000, host_dcache=bool(DEFAULTS["host_dcache"]),
                                      buffers_kib=dosa.IMAGE_BUFFERS_KIB, memory_latency=latency,
                                      stats=2 if args.timeline else True)
            if not run.cycles:
                print(f"{name}: no cycles: {run.error or 'timed out'}")
                return 1
            row = summary_row(name, run.cycles, layer[7], profile(run.stderr))
            rows.append(row)
            print(format_row(row), flush=True)
            if args.timeline:
                args.timeline.mkdir(parents=True, exist_ok=True)
                path = args.timeline / (re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_") + ".timeline")
                path.write_text(timeline_text(run.stderr))
                row["phases"] = phases = timeline_phases(run.stderr)
                print(f"    model cycles from the call's start: first command {phases['first_command']:,}, "
                      f"last load done {phases['last_load_done']:,}, last compute done "
                      f"{phases['last_compute_done']:,}, last store done {phases['last_store_done']:,} ({path})")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
