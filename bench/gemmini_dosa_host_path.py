"""Our replica of DOSA's matmul host path against the branch's own library, on the model.

    python bench/gemmini_dosa_host_path.py --suite CHECKOUT [LAYER ...]

The DOSA matmul layers and mappings run through `_DOSA_MATMUL` (gemmini_dosa_layers.py): our
code with the structure of the `tiled_matmul` on gemmini-rocc-tests' `dosa` branch (the loop
order read from a string at run time, run-time divisions, a seven-deep loop nest, the per-tile
routine called through a pointer), issuing our library's `loop_ws`. This bench builds every
DOSA matmul layer's program twice, once as shipped and once with the branch's own `gemmini.h`
and `tiled_matmul_auto` in its place (read from a local clone at run time, never committed),
runs both on the model, and prints the cycles and the instructions each retired in the timed
call, with FireSim's figure alongside: how much of the host work the replica reproduces.
Convolutions are not compared: the branch's `loop_conv_ws` encoding predates the model's.
Takes under a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from backends.gemmini.toolchain import GemminiToolchain  # noqa: E402

import gemmini_dosa_layers as dosa  # noqa: E402
import gemmini_rocc_suite as suite  # noqa: E402

_DOSA_MARKER = "dosa_tiled_matmul_auto("
_OUR_CALL = re.compile(r"dosa_tiled_matmul_auto\((\d+), (\d+), (\d+), X, Y, Z, (\d+), (\d+), (\d+)\);")
_INSTRET = re.compile(r"TRACE measure_end \d+ instret (\d+)")


def with_branch_library(program: str) -> str:
    """The same program on the branch's own library: its header, and its tiled_matmul_auto
    (the argument list of that branch) in place of our replica's call."""
    if _DOSA_MARKER not in program:
        raise ValueError("not a DOSA matmul program (no _DOSA_MATMUL block)")
    program = program.replace(dosa._DOSA_MATMUL, "").replace('#include "gemmini.h"', '#include "include/gemmini.h"')
    return _OUR_CALL.sub(
        lambda m: (f"tiled_matmul_auto({m[1]}, {m[2]}, {m[3]}, X, Y, NULL, Z, {m[4]}, {m[5]}, {m[6]}, {m[6]}, "
                   "MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, MVIN_SCALE_IDENTITY, NO_ACTIVATION, "
                   "ACC_SCALE_IDENTITY, 0, true, false, false, false, false, 0, WS);"), program)



async def measure(tc: GemminiToolchain, source: str, work: Path, include: Path | None) -> tuple[int, int] | str:
    """Modelled cycles and instructions retired in the timed call, or why there are none."""
    run, why = await suite.build_and_run(tc, source, work, include, buffers_kib=dosa.IMAGE_BUFFERS_KIB, stats=True)
    if run is None or not run.cycles:
        return why or (run.error if run else "no run")
    m = _INSTRET.search(run.stderr)
    return run.cycles, int(m.group(1)) if m else 0


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", required=True, type=Path, help="git directory of ucb-bar/gemmini-rocc-tests")
    ap.add_argument("layers", nargs="*", help="only these layers (names as printed, e.g. 'matmul 128x128x64')")
    args = ap.parse_args()
    if not args.suite.exists():
        raise SystemExit(f"{args.suite}: no such directory (clone ucb-bar/gemmini-rocc-tests, or fetch it)")
    layers = [la for la in dosa.LAYERS if la[0] == "mm" and (not args.layers or dosa.name(*la[:7]) in args.layers)]
    if not layers:
        raise SystemExit("no DOSA matmul layer matches; names look like 'matmul 128x128x64'")
    tc = GemminiToolchain.discover({})
    print(f"{'layer':24s} {'replica':>12s} {'branch':>12s} {'diff':>7s} {'instr. replica/branch':>22s} "
          f"{'FireSim':>12s}  (model cycles of the timed call; first run of each layer)")
    with tempfile.TemporaryDirectory(prefix="gemmini-dosa-host-") as tmp:
        branch = suite.Suite(args.suite, "dosa", Path(tmp) / "suite")
        for n, layer in enumerate(layers):
            program = dosa.programs(layer)[0]
            ours = await measure(tc, program, Path(tmp) / f"ours-{n}", None)
            theirs = await measure(tc, with_branch_library(program), Path(tmp) / f"branch-{n}", branch.root)
            name = dosa.name(*layer[:7])
            if isinstance(ours, str) or isinstance(theirs, str):
                print(f"{name:24s} failed: {ours if isinstance(ours, str) else theirs}"[:200])
                return 1
            print(f"{name:24s} {ours[0]:>12,} {theirs[0]:>12,} {100 * (ours[0] / theirs[0] - 1):+6.1f}% "
                  f"{ours[1]:>11,} / {theirs[1]:<9,} {layer[7]:>12,}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
