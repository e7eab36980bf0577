"""DOSA's own mappings of the 67 layers, read from a local clone of gemmini-rocc-tests.

    python bench/gemmini_dosa_mappings.py --suite CHECKOUT [--json]

The DOSA artifact ran every layer twice on FireSim: Gemmini's library (`tiled_conv_auto` /
`tiled_matmul_auto`, the figures in gemmini_dosa_layers.py) and then DOSA's own mapping
(`tiled_conv` / `tiled_matmul` with explicit tiles and a loop permutation), whose cycle count is
`target.gemmini_cycle` in the branch `dosa`'s
`gemmini-data-collection/artifact/{dnn,analytical,both}/<net>.csv`. This script (our code; the
CSVs are read from the clone at run time, never copied) turns each row's `mapping.mapping` into
the tile sizes and permutation the template ran, as that branch's `layers/extract_data_csv.py`
does: tiles are the L1 factors (C times its spatial factor), K times the L2 spatial factor, P and
Q times the L0 factors; the permutation is the L3 loops innermost first, padded with the rest of
"CRSKPQN". It prints how many mapped tiles fit half of defaultConfig's scratchpad and accumulator
(the sizes in our gemmini.h), which is what the model accepts: the DOSA image's buffers are 4 MiB, so
most do not (see MODEL.md, "DRAM banks and rows"). With `--json` it prints every row.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autocomp.backends.gemmini.tunables import hardware_env  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemmini_dosa_layers import RUNS  # noqa: E402

NETWORKS = ("bert", "resnet50", "retinanet", "unet")
VARIANTS = RUNS  # the artifact's three runs of every network
_HW = hardware_env()  # our gemmini.h: DIM, scratchpad and accumulator rows
HALF_SPAD_ROWS, HALF_ACC_ROWS, DIM = _HW["SP_ROWS"] // 2, _HW["ACC_ROWS"] // 2, _HW["DIM"]


def _csv(checkout: str, variant: str, net: str) -> list[dict]:
    path = f"dosa:gemmini-data-collection/artifact/{variant}/{net}.csv"
    # a working clone, or a bare git directory (as the `fetch` tool leaves one)
    git_dir = ["-C", checkout] if os.path.isdir(os.path.join(checkout, ".git")) else ["--git-dir", checkout]
    text = subprocess.run(["git", *git_dir, "show", path], capture_output=True, text=True, check=True).stdout
    return list(csv.DictReader(io.StringIO(text)))


def _factors(level: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for word in level.split():
        if word[-1] in "XY":
            out[word[0] + "X"] = int(word[1:-1])
        else:
            out[word[0]] = out.get(word[0], 1) * int(word[1:])
    return out


def _level(mapping: str, name: str) -> str:
    return mapping.split(name + " ")[1].split(" - ")[0]


def tiles_and_permutation(mapping: str) -> tuple[dict[str, int], str]:
    """The tile (N, P, Q, K, R, S, C) and loop permutation (innermost first) DOSA's template ran."""
    l1, l0 = _factors(_level(mapping, "L1[O]")), _factors(_level(mapping, "L0[W]"))
    tile = {"N": l1.get("N", 1), "P": l1.get("P", 1) * l0.get("P", 1), "Q": l1.get("Q", 1) * l0.get("Q", 1),
            "K": l1.get("K", 1) * _factors(_level(mapping, "L2[WI]")).get("KX", 1),
            "R": l1.get("R", 1), "S": l1.get("S", 1), "C": l1.get("C", 1) * l1.get("CX", 1)}
    perm = "".join(reversed([w[0] for w in _level(mapping, "L3[WIO]").split()]))
    return tile, perm + "".join(d for d in "CRSKPQN" if d not in perm)


def matmul_blocks(elements: int) -> int:
    """A matmul tile in DIM blocks as DOSA's matmul template computes it: elements / 16 rounded
    down, at least 1."""
    return max(1, elements >> 4)


def fits_default_buffers(kind: str, stride: int, tile: dict[str, int]) -> bool:
    """Whether the tile fits the halves of defaultConfig's scratchpad and accumulator."""
    if kind == "mm":  # in DIM blocks, as the matmul template turns DOSA's tiles into tile_I/J/K
        ti, tj, tk = (matmul_blocks(tile[d]) for d in "PKC")
        spad, acc = (ti * tk + tk * tj) * DIM, ti * tj * DIM
    else:
        irows, icols = tile["Q"] * stride + tile["S"] - 1, tile["P"] * stride + tile["R"] - 1
        spad = (tile["N"] * irows * icols * math.ceil(tile["C"] / DIM)
                + tile["S"] * tile["R"] * tile["C"] * math.ceil(tile["K"] / DIM))
        acc = tile["N"] * tile["Q"] * tile["P"] * math.ceil(tile["K"] / DIM)
    return spad <= HALF_SPAD_ROWS and acc <= HALF_ACC_ROWS


def rows(checkout: str) -> list[dict]:
    out = []
    for net in NETWORKS:
        for variant in VARIANTS:
            for r in _csv(checkout, variant, net):
                c, k, p, q, r_, s, n = (int(r["prob." + d]) for d in "CKPQRSN")
                stride = int(r["prob.Wstride"])
                kind = "mm" if (q == 1 and r_ == 1 and s == 1) else "conv"
                tile, perm = tiles_and_permutation(r["mapping.mapping"])
                out.append({"network": net, "run": variant, "shape": [kind, n, c, k, p, r_, stride], "tile": tile,
                            "permutation": perm, "fits_default": fits_default_buffers(kind, stride, tile),
                            "auto_cycles": float(r["target.gemmini_auto_cycle"]),
                            "mapped_cycles": float(r["target.gemmini_cycle"]) if r["target.gemmini_cycle"] else None})
    return out


def rows_or_explain(checkout: str) -> list[dict] | None:
    """rows(checkout), or None after telling the user (on stderr) what to fetch: the benches that
    need the artifact's CSVs exit with status 2 then."""
    try:
        return rows(checkout)
    except (subprocess.CalledProcessError, OSError) as exc:
        detail = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) and exc.stderr else str(exc)
        print(f"cannot read the dosa branch's CSVs from {checkout}: {detail}\n"
              "fetch ucb-bar/gemmini-rocc-tests (all branches) and pass its clone or git directory", file=sys.stderr)
        return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", required=True, help="a local clone of ucb-bar/gemmini-rocc-tests (with branch dosa)")
    ap.add_argument("--json", action="store_true", help="print every row")
    args = ap.parse_args()
    table = rows_or_explain(args.suite)
    if table is None:
        return 2
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    fit = sum(r["fits_default"] for r in table)
    faster = sum(1 for r in table if r["mapped_cycles"] and r["mapped_cycles"] < r["auto_cycles"])
    print(f"{len(table)} mapped runs (4 networks x 3 runs); {fit} fit defaultConfig's buffers, "
          f"{len(table) - fit} need the DOSA image's larger ones; DOSA's mapping beat the library in {faster}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
