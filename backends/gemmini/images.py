"""The Gemmini builds the timing model can stand for (setting ``autocomp.target.gemmini.image``).

A cycle count is a claim about one build of the hardware, so the user picks which:

- ``default``: Chipyard's ``GemminiRocketConfig`` (Gemmini's ``defaultConfig``) as FireSim runs
  it with a 4 MiB LLC model and FASED DDR3 (``..._l2_llc4mb_ddr3`` targets): the build the
  Autocomp paper and the DOSA artifact measured, and what the model is fitted to.
- ``lean``: ``FireSimLeanGemminiRocketConfig``, the build behind FireSim's public Gemmini images
  (``firesim_gemmini_rocket_singlecore_no_nic`` on AWS F2 and Alveo U250). Gemmini's
  ``leanConfig`` (Configs.scala) keeps defaultConfig's array and buffers but issues 64 memory
  requests per DMA engine instead of 16, is weight-stationary only, cannot read the accumulator
  at full width, cannot write the scratchpad from the array and ignores a compute's D operand;
  the image takes FireSim's default memory model (firesim.configs ``WithDefaultMemModel``: a
  latency-bandwidth pipe, no LLC, ``BaseParams`` maxReads 16 and maxWrites 16). The model
  refuses the commands this build does not carry out as written, naming the reason.

The figures below are the only place these builds are described; the benches that compare the
model with FireSim runs of the Lean image (``bench/gemmini_firesim_f2.py``) take them from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Image:
    """One Gemmini build, as the timing model's configuration lines describe it."""

    name: str
    title: str
    dma_inflight: int  # max_in_flight_mem_reqs (Configs.scala)
    # FireSim's latency pipe (latency in cycles, reads and writes in flight), or None for the
    # model's LLC and DDR3.
    memory_pipe: tuple[int, int, int] | None

    def run_options(self, dma_inflight: int | None = None) -> dict[str, Any]:
        """Keyword arguments of ``GemminiToolchain.run`` that put this build in the model
        (``dma_inflight``: the user's override of the build's requests in flight)."""
        inflight = self.dma_inflight if dma_inflight is None else dma_inflight
        return {"dma_inflight": inflight, "memory_pipe": self.memory_pipe, "image": self.name}


DEFAULT = Image(
    name="default",
    title="GemminiRocketConfig on FireSim with a 4 MiB LLC and DDR3",
    dma_inflight=16,  # Configs.scala defaultConfig max_in_flight_mem_reqs
    memory_pipe=None,
)

# The pipe's latency is a runtime setting that the published F2 runs do not print; 30 cycles is
# what lorikjashari/OpenASDx reports for its own FireSim build of this kind (llm/fpga/f2
# FIRESIM.md, 13.9: "FASED LatencyPipe (read latency 30, maxReads 16), no LLC"). Every F2 figure
# of bench/gemmini_fidelity.py moves by less than 2 points for latencies from 20 to 60 cycles
# (those runs are bound by the 8-byte memory bus, not by latency).
LEAN = Image(
    name="lean",
    title="FireSimLeanGemminiRocketConfig (FireSim's public Gemmini image)",
    dma_inflight=64,  # Configs.scala leanConfig max_in_flight_mem_reqs
    memory_pipe=(30, 16, 16),
)

IMAGES: dict[str, Image] = {image.name: image for image in (DEFAULT, LEAN)}


def image_named(name: object) -> Image:
    """The build called ``name``; ValueError saying which names there are."""
    image = IMAGES.get(name) if isinstance(name, str) else None
    if image is None:
        choices = ", ".join(f"{n!r} ({i.title})" for n, i in IMAGES.items())
        raise ValueError(f"autocomp.target.gemmini.image must be one of {choices}; got {name!r}")
    return image
