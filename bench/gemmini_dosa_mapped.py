"""DOSA's own mappings timed on the model against FireSim: a second set of published figures,
over varied tilings and loop orders, and the ranking the search most needs (is this schedule
faster than the library?).

    python bench/gemmini_dosa_mapped.py --suite CHECKOUT [--only TEXT] [--json FILE]

The DOSA artifact's templates time, for every layer, Gemmini's library call and then DOSA's own
mapping of the layer (explicit tiles and a loop permutation, `target.gemmini_cycle`) right after
it, in the same binary (gemmini_dosa_mappings.py reads the mappings from a local clone of
ucb-bar/gemmini-rocc-tests, branch `dosa`, at run time). For every mapped run whose tiles fit
half of defaultConfig's scratchpad and accumulator (the DOSA image's buffers are 4 MiB; the
model has defaultConfig's), our program replays the layers before it as gemmini_dosa_layers.py
does, times the library call, then the mapping: convolutions with our library's tile step
(gemmini_conv_tile_step) visited in DOSA's loop order, matmuls through the host path of DOSA's
tiled_matmul (gemmini_dosa_layers._DOSA_MATMUL), which reads the order at run time. It prints the
model against FireSim for both, and whether the model ranks the mapping against the library as
FireSim did (pairs FireSim separates by more than 5%).

What differs from DOSA's library, and why it does not matter here: DOSA's tiled_conv and
tiled_matmul with a permutation accumulate wrongly when a reduction loop is not innermost (the
accumulator tile is reused by the next output tile); the image's arithmetic is a dummy anyway
and the operands are zeros, so only the command stream counts, and ours issues the same one
(one loop_conv_ws / loop_ws per tile, in the same order, bias on the first reduction step,
move-out on the last). Matmul tiles are DOSA's element counts over 16, rounded down, at least 1,
as its matmul template computes them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from autocomp.backends.gemmini.backend import DEFAULTS  # noqa: E402
from autocomp.backends.gemmini.toolchain import GemminiToolchain  # noqa: E402

import gemmini_dosa_layers as dosa  # noqa: E402
import gemmini_dosa_mappings as mappings  # noqa: E402

# A pair whose two FireSim figures differ by less than this is a tie: no ranking to reproduce.
TIE = 0.05

# DOSA's loop letters and what each walks (gemmini.h, branch dosa: idx_to_dim).
_CONV_LOOPS = {"N": ("b", "batch"), "Q": ("porow", "out"), "P": ("pocol", "out"), "K": ("poch", "k"),
               "S": ("krow", "r"), "R": ("kcol", "r"), "C": ("kch", "c")}


def mapped_conv(batch: int, c: int, k: int, p: int, r: int, stride: int, tile: dict[str, int], perm: str) -> str:
    """C statements running one DOSA-mapped convolution over X (input), Y (weights), Z (output)."""
    in_dim, pad, out = dosa.conv_dims(p, r, stride)
    whole = {"N": batch, "Q": out, "P": out, "K": k, "S": r, "R": r, "C": c}
    t = {d: min(tile[d], whole[d]) for d in whole}
    limits = {"batch": batch, "out": out, "k": k, "r": r, "c": c}
    loops, indent = "", "  "
    for d in reversed(perm):  # perm lists the innermost loop first
        var, limit = _CONV_LOOPS[d]
        loops += f"{indent}for (int {var} = 0; {var} < {limits[limit]}; {var} += {t[d]})\n"
        indent += "  "
    return (f"  {{\n  const struct gemmini_conv_tile t = {{{t['N']}, {t['Q']}, {t['P']}, {t['K']}, {t['S']}, {t['R']}, {t['C']}}};\n"
            "  struct gemmini_conv_plan p;\n"
            f"  gemmini_conv_plan_begin(&p, \"dosa\", {batch}, {in_dim}, {in_dim}, {c}, {k}, {out}, {out}, {stride}, 1, 1, "
            f"{pad}, {r}, {c}, {k}, {k}, false, false, false, false, false, &t, X, Y, NULL, Z, NO_ACTIVATION, "
            "ACC_SCALE_IDENTITY, 0, 0, 0);\n"
            + loops + f"{indent}gemmini_conv_tile_step(&p, b, porow, pocol, poch, krow, kcol, kch);\n  }}\n")


def mapped_matmul(c: int, k: int, p: int, tile: dict[str, int], perm: str) -> str:
    """C statements running one DOSA-mapped matmul (I = p, K = c, J = k) over X, Y, Z, through
    DOSA's host path (gemmini_dosa_layers._DOSA_MATMUL: the loop order read from the string at
    run time, as the template's tiled_matmul call does)."""
    blocks = {d: mappings.matmul_blocks(tile[d]) for d in "PKC"}
    return (f"  dosa_tiled_matmul({p}, {k}, {c}, X, Y, Z, {c}, {k}, {k}, {blocks['P']}, {blocks['K']}, {blocks['C']}, "
            f"\"{perm}\", DIM);\n")


def program(row: dict) -> str:
    """The layers before the row's layer in its network's binary, the library call, the mapping."""
    kind, batch, c, k, p, r, stride = row["shape"]
    shape = (kind, batch, c, k, p, r, stride)
    binary = dosa.binary_of(row["network"], kind)
    try:
        history = dosa.histories(shape, binary)[0]
    except ValueError:
        history = ()  # U-Net's up-convolutions are left out of the replayed binaries
    mapped = (mapped_matmul(c, k, p, row["tile"], row["permutation"]) if kind == "mm"
              else mapped_conv(batch, c, k, p, r, stride, row["tile"], row["permutation"]))
    return dosa.program(*shape, history=history, mapped=mapped, line_offset=dosa.LINE_OFFSET[binary][row['run']])


async def run_one(tc: GemminiToolchain, work: Path, n: int, source: str,
                  buffers_kib: tuple[int, int] | None) -> tuple[int, int] | str:
    d = work / f"mapped-{n}"
    d.mkdir()
    (d / "prog.c").write_text(source)
    res = await tc.compile([str(d / "prog.c")], str(d / "prog.elf"), str(d))
    if not res.ok:
        return "compile failed: " + res.tail()[-300:]
    run = await tc.run(str(d / "prog.elf"), str(d), {}, timeout=900, max_instructions=2_000_000_000,
                       measure_limit=2, host_dcache=bool(DEFAULTS["host_dcache"]), buffers_kib=buffers_kib)
    if run.error or run.exit_code != 0 or len(run.region_cycles) != 2:
        return (run.error or run.stdout[-300:]).strip()
    return run.region_cycles[0], run.region_cycles[1]


def ranking(auto: float, mapped: float) -> str:
    """'mapping' or 'library' for the faster of the two, or 'tie' within TIE."""
    if abs(mapped / auto - 1) <= TIE:
        return "tie"
    return "mapping" if mapped < auto else "library"


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", required=True, help="a local clone of ucb-bar/gemmini-rocc-tests (with branch dosa)")
    ap.add_argument("--only", default="", help="only layers whose name contains this text")
    ap.add_argument("--json", default="", help="also write every row, with the model's figures, to this file")
    ap.add_argument("--buffers", choices=("dosa", "default"), default="dosa",
                    help="the model's scratchpad and accumulator: the DOSA image's 4 MiB each (every mapping runs; "
                         "the default) or defaultConfig's (only mappings that fit it)")
    args = ap.parse_args()
    table = mappings.rows_or_explain(args.suite)
    if table is None:
        return 2
    buffers = dosa.IMAGE_BUFFERS_KIB if args.buffers == "dosa" else None
    chosen = [r for r in table if r["mapped_cycles"] and (buffers or r["fits_default"])
              and args.only in dosa.name(*r["shape"])]
    tc = GemminiToolchain.discover({})
    out, failed = [], []
    with tempfile.TemporaryDirectory(prefix="gemmini-dosa-mapped-") as tmp:
        for n, row in enumerate(chosen):
            got = await run_one(tc, Path(tmp), n, program(row), buffers)
            if isinstance(got, str):
                failed.append((row, got))
                continue
            out.append({**row, "model_auto": got[0], "model_mapped": got[1]})
    print(f"{'layer':34s} {'net/run':18s} {'perm':8s} {'FireSim lib':>12s} {'model':>11s} "
          f"{'FireSim map':>12s} {'model':>11s} {'error':>7s}  faster (FireSim / model)")
    agree = separated = 0
    for r in out:
        fs, md = ranking(r["auto_cycles"], r["mapped_cycles"]), ranking(r["model_auto"], r["model_mapped"])
        if fs != "tie":
            separated += 1
            agree += fs == md
        print(f"{dosa.name(*r['shape']):34s} {r['network'] + '/' + r['run']:18s} {r['permutation']:8s} "
              f"{r['auto_cycles']:>12,.0f} {r['model_auto']:>11,} {r['mapped_cycles']:>12,.0f} {r['model_mapped']:>11,} "
              f"{(r['model_mapped'] / r['mapped_cycles'] - 1) * 100:>+6.1f}%  {fs} / {md}")
    for row, why in failed:
        print(f"{dosa.name(*row['shape'])} {row['network']}/{row['run']}: not run: {why}")
    if out:
        mean, spread, within = dosa.summary([r["model_mapped"] / r["mapped_cycles"] for r in out])
        lib_mean, lib_spread, lib_within = dosa.summary([r["model_auto"] / r["auto_cycles"] for r in out])
        print(f"DOSA's mappings, model / FireSim: geometric mean {mean:.3f}, spread x{spread:.2f}, "
              f"{within} of {len(out)} within 15%")
        print(f"the library call before each (single runs): geometric mean {lib_mean:.3f}, spread x{lib_spread:.2f}, "
              f"{lib_within} of {len(out)} within 15%")
        print(f"ranking, mapping against library: reproduced in {agree} of the {separated} pairs FireSim separates "
              f"by more than {TIE:.0%} ({len(out) - separated} ties left out)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
