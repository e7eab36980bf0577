"""Berkeley's gemmini-rocc-tests against Autocomp's Gemmini model, built with the suite's own headers.

    python bench/gemmini_rocc_suite.py --suite PATH              # every test in bareMetalC/Makefile
    python bench/gemmini_rocc_suite.py --suite PATH conv mvin_mvout
    python bench/gemmini_rocc_suite.py --suite PATH --image lean # as FireSim's public (Lean) image
    python bench/gemmini_rocc_suite.py --suite PATH --library    # our library against Gemmini's

PATH is a git directory of ucb-bar/gemmini-rocc-tests (a clone, or a bare mirror such as the
session tool `fetch` brings to /work/.mirror/ucb-bar+gemmini-rocc-tests/repo); `--rev` picks
the commit (default HEAD). Nothing of the suite is committed to this repository: its files are
read with `git show` into a temporary directory for the run. The suite's `rocc-software`
submodule is replaced by a few lines of our own (the RoCC instruction macros for Gemmini's
custom-3 opcode), which is all `gemmini.h` takes from it.

Default mode: build each bare-metal test the suite's Makefile lists (`bareMetalC/Makefile`,
`tests = ...`) with `-DBAREMETAL=1 -I<suite>` ahead of our include directory, run it on the
model (host L1 model on, as the backend runs kernels), and count the tests that exit 0; a test
checks its own results and exits non-zero on a mismatch. Prints one line per test and
"N/M passed"; the exit status is 1 unless all pass. `--image lean` runs them as the Lean build
(backends/gemmini/images.py): a test that needs what leanConfig lacks (the output-stationary
dataflow, full-width accumulator reads, ...) is refused by the model with the reason, as it would
compute something else on that hardware; those are listed as REFUSED and not counted as failures.

`--library`: the programs of the FireSim F2 comparison (gemmini_firesim_f2.py) compiled twice,
once with our gemmini.h and once with the suite's, run on the model with the Lean image's 64
requests in flight; prints both beside FireSim's figure. A difference between the two columns
is a difference between our library and Gemmini's (host work, operand reuse, tiling), not a
timing-model error: that is how the library's tile-search cost and its convolution operand
reuse were found.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import backends.gemmini.toolchain as toolchain_module  # noqa: E402
from backends.gemmini.images import DEFAULT as DEFAULT_IMAGE, IMAGES, Image  # noqa: E402
from backends.gemmini.toolchain import GemminiToolchain  # noqa: E402

import gemmini_firesim_f2 as f2  # noqa: E402

# gemmini.h includes "rocc-software/src/xcustom.h" for these macros only (our own lines).
XCUSTOM = r"""
#ifndef AUTOCOMP_XCUSTOM_H
#define AUTOCOMP_XCUSTOM_H
#define AUTOCOMP_STR1(x) #x
#define AUTOCOMP_STR(x) AUTOCOMP_STR1(x)
#define ROCC_INSTRUCTION_0_R_R(x, rs1, rs2, funct) \
  { asm volatile(".insn r 0x7b, 3, " AUTOCOMP_STR(funct) ", x0, %0, %1" :: "r"(rs1), "r"(rs2)); }
#define ROCC_INSTRUCTION_RS1_RS2(x, rs1, rs2, funct) ROCC_INSTRUCTION_0_R_R(x, rs1, rs2, funct)
#define ROCC_INSTRUCTION(x, rd, rs1, rs2, funct) \
  { asm volatile(".insn r 0x7b, 7, " AUTOCOMP_STR(funct) ", %0, %1, %2" : "=r"(rd) : "r"(rs1), "r"(rs2)); }
#endif
"""


class Suite:
    """The suite's files at one revision, and a scratch tree holding its headers."""

    def __init__(self, git_dir: Path, rev: str, scratch: Path) -> None:
        self.git_dir, self.rev, self.root = git_dir, rev, scratch
        (scratch / "include").mkdir(parents=True)
        (scratch / "rocc-software" / "src").mkdir(parents=True)
        (scratch / "rocc-software" / "src" / "xcustom.h").write_text(XCUSTOM)
        for name in self._git("ls-tree", "--name-only", rev, "include/").split():
            (scratch / name).write_text(self.show(name))

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.git_dir), *args], check=True, capture_output=True,
                              text=True).stdout

    def show(self, path: str) -> str:
        return self._git("show", f"{self.rev}:{path}")

    def tests(self) -> list[str]:
        makefile = self.show("bareMetalC/Makefile")
        block = re.search(r"^tests\s*=\s*\\\n(.*?)\n\s*\n", makefile, re.S | re.M)
        if block is None:
            raise SystemExit("bareMetalC/Makefile has no `tests = ...` list at this revision")
        return re.findall(r"[A-Za-z0-9_]+", block.group(1))


async def build_and_run(tc: GemminiToolchain, source: str, work: Path, include: Path | None,
                        image: Image = DEFAULT_IMAGE, buffers_kib: tuple[int, int] | None = None,
                        stats: bool = False):
    """Compile `source` (the suite's headers first when `include` is given) and run it on the
    model of `image` (`buffers_kib`, `stats`: as GemminiToolchain.run takes them)."""
    work.mkdir(parents=True)
    (work / "prog.c").write_text(source)
    extra = [f"-I{include}", "-DBAREMETAL=1", "-DPRINT_TILE=0"] if include else []
    argv = [tc.cc, *toolchain_module.CFLAGS, *extra, f"-I{tc.include_dir}", str(work / "prog.c"),
            str(toolchain_module.RUNTIME_C), "-o", str(work / "prog.elf"), *toolchain_module.LDFLAGS]
    built = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True)
    if built.returncode != 0:
        return None, " ".join(built.stderr.split())[-300:]
    run = await tc.run(str(work / "prog.elf"), str(work), {}, timeout=600, max_instructions=2_000_000_000,
                       host_dcache=True, buffers_kib=buffers_kib, stats=stats, **image.run_options())
    return run, ""


async def conformance(suite: Suite, tc: GemminiToolchain, only: list[str], work: Path,
                      image: Image = DEFAULT_IMAGE) -> int:
    tests = [t for t in suite.tests() if not only or t in only]
    slots = asyncio.Semaphore(2)

    async def one(name: str) -> tuple[str, bool, str]:
        async with slots:
            run, why = await build_and_run(tc, suite.show(f"bareMetalC/{name}.c"), work / name, suite.root, image)
        if run is None:
            return name, "FAIL", "compile: " + why
        if run.exit_code == 0 and not run.error and not run.timed_out:
            return name, "PASS", ""
        said = " ".join((run.error or run.stdout or "").split())
        outcome = "REFUSED" if image.name != "default" and "leanConfig" in said else "FAIL"
        return name, outcome, f"exit {run.exit_code}: {said[-160:]}"

    results = await asyncio.gather(*(one(t) for t in tests))
    for name, outcome, why in results:
        print(f"{name:40s} {outcome} {why}")
    passed = sum(outcome == "PASS" for _, outcome, _ in results)
    refused = sum(outcome == "REFUSED" for _, outcome, _ in results)
    refusals = f", {refused} refused for the {image.name} build's limits" if image.name != "default" else ""
    print(f"{passed}/{len(results)} passed{refusals} (gemmini-rocc-tests {suite.rev}, built with its own headers; "
          f"model: {image.title})")
    return 0 if passed + refused == len(results) else 1


async def library(suite: Suite, tc: GemminiToolchain, work: Path) -> int:
    print(f"{'F2 program':16s} {'our library':>14s} {'Gemmini library':>16s} {'FireSim':>12s}  (model cycles, "
          f"{f2.LEAN.title}: {f2.LEAN.dma_inflight} requests in flight, FireSim's latency-pipe memory)")
    for key, program in (("mm64_gemmini", f2.MM64), ("matmul_perf", f2.MATMUL_PERF),
                         ("conv_perf", f2.CONV_PERF), ("conv_dw_perf", f2.CONV_DW_PERF)):
        theirs = program.replace('#include "gemmini.h"', '#include "include/gemmini.h"')
        ours_run, why = await build_and_run(tc, program, work / f"ours-{key}", None, f2.LEAN)
        their_run, their_why = await build_and_run(tc, theirs, work / f"theirs-{key}", suite.root, f2.LEAN)
        cell = [f"{r.cycles:,}" if r is not None and r.cycles else f"failed: {w[:40]}"
                for r, w in ((ours_run, why), (their_run, their_why))]
        print(f"{key:16s} {cell[0]:>14s} {cell[1]:>16s} {f2.PUBLISHED[key]:>12,}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--suite", required=True, type=Path, help="git directory of ucb-bar/gemmini-rocc-tests")
    parser.add_argument("--rev", default="HEAD", help="revision of the suite (default HEAD)")
    parser.add_argument("--library", action="store_true", help="compare our library with Gemmini's on the F2 programs")
    parser.add_argument("--image", choices=sorted(IMAGES), default="default",
                        help="the Gemmini build to model (backends/gemmini/images.py; default: default)")
    parser.add_argument("tests", nargs="*", help="only these tests (default: all the Makefile lists)")
    args = parser.parse_args()
    if not args.suite.exists():
        raise SystemExit(f"{args.suite}: no such directory (clone ucb-bar/gemmini-rocc-tests, or fetch it)")
    tc = GemminiToolchain.discover({})
    with tempfile.TemporaryDirectory(prefix="gemmini-rocc-") as tmp:
        suite = Suite(args.suite, args.rev, Path(tmp) / "suite")
        work = Path(tmp) / "work"
        job = library(suite, tc, work) if args.library else conformance(suite, tc, args.tests, work, IMAGES[args.image])
        return asyncio.run(job)


if __name__ == "__main__":
    raise SystemExit(main())
