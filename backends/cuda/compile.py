"""The compiled tier: ``nvcc`` for a configurable architecture, with ``-Xptxas -v``
figures (registers, spills, shared memory per kernel) as feedback, cached on disk by a
hash of everything that decides the outcome.

Each compile runs in its own temporary directory through :func:`run_limited` (the
source is untrusted: template recursion or huge unrolls must hit a limit, not the
machine). Error messages are rewritten so their line numbers count from the kernel's
first line, which is what the LLM sees.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from autocomp.backends.base import BackendError
from autocomp.store import default_home
from autocomp.sandbox import Isolation, run_limited

DEFAULT_ARCH = "sm_90"
BASE_FLAGS = ("-O3", "-std=c++17", "-Xptxas", "-v", "-lineinfo")

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")
_LOC = re.compile(r"(?:[^\s:()]*/)?(kernel\.cu|harness\.cu)\((\d+)\)")


@dataclass
class KernelUsage:
    """ptxas figures for one ``__global__`` function."""

    name: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    smem_bytes: int = 0
    stack_bytes: int = 0


@dataclass
class CompileResult:
    ok: bool
    log: str  # nvcc's output, file names as written (kernel.cu)
    kernels: list[KernelUsage] = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False
    arch: str = DEFAULT_ARCH
    timed_out: bool = False

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("cached")
        return d

    @classmethod
    def from_json(cls, d: dict) -> "CompileResult":
        return cls(
            ok=bool(d["ok"]),
            log=str(d["log"]),
            kernels=[KernelUsage(**k) for k in d.get("kernels", [])],
            seconds=float(d.get("seconds", 0.0)),
            arch=str(d.get("arch", DEFAULT_ARCH)),
            timed_out=bool(d.get("timed_out", False)),
            cached=True,
        )

    @property
    def max_registers(self) -> int:
        return max((k.registers for k in self.kernels), default=0)

    @property
    def spill_bytes(self) -> int:
        return sum(k.spill_stores + k.spill_loads for k in self.kernels)

    @property
    def max_smem(self) -> int:
        return max((k.smem_bytes for k in self.kernels), default=0)

    def summary(self) -> str:
        """One line per kernel, for feedback."""
        if not self.kernels:
            return "ptxas reported no kernels (nothing instantiated a __global__ function)"
        return "\n".join(
            f"{k.name}: {k.registers} registers/thread, {k.smem_bytes} bytes static smem, "
            f"{k.spill_stores + k.spill_loads} bytes spilled, {k.stack_bytes} bytes stack ({self.arch})"
            for k in self.kernels
        )


def parse_ptxas(log: str) -> list[KernelUsage]:
    kernels: list[KernelUsage] = []
    current: KernelUsage | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = KernelUsage(name=m.group(1))
            kernels.append(current)
            continue
        if current is None:
            continue
        m = _PROPS.search(line)
        if m:
            current.stack_bytes, current.spill_stores, current.spill_loads = (int(g) for g in m.groups())
            continue
        m = _USED.search(line)
        if m:
            current.registers = int(m.group(1))
            current.smem_bytes = int(m.group(2) or 0)
    return kernels


def demangle(names: list[str]) -> dict[str, str]:
    """Readable kernel names through binutils' c++filt when present (else unchanged)."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    import subprocess

    try:
        out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=10).stdout
        lines = out.splitlines()
        if len(lines) == len(names):
            return dict(zip(names, lines))
    except (OSError, subprocess.SubprocessError):
        pass
    return {n: n for n in names}


def map_lines(log: str, mapper: Callable[[str, int], str]) -> str:
    """Rewrite ``kernel.cu(23)`` locations with ``mapper(file, line)``."""
    return _LOC.sub(lambda m: mapper(m.group(1), int(m.group(2))), log)


def toolkit_dirs(nvcc: str) -> tuple[str, ...]:
    """Read-only paths nvcc needs inside the sandbox: the CUDA toolkit it belongs to.

    ``nvcc`` may be a symlink or a wrapper script (``exec /usr/local/cuda-13.0/bin/nvcc``):
    the real binary's prefix is what must be visible (``/usr`` is always bound; a toolkit
    under ``/opt`` is not, so it is named here)."""
    found: list[str] = []
    candidates = [os.path.realpath(nvcc)]
    try:
        with open(candidates[0], "rb") as fh:
            head = fh.read(4096)
        if head.startswith(b"#!"):
            candidates += [os.path.realpath(m.decode()) for m in re.findall(rb"(/[\w./+-]+/bin/nvcc)\b", head)]
    except OSError:
        pass
    for c in candidates:
        prefix = os.path.dirname(os.path.dirname(c))
        if os.path.isdir(os.path.join(prefix, "include")) or os.path.isdir(os.path.join(prefix, "nvvm")):
            found.append(prefix)
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env) and os.path.isdir(os.environ[env]):
            found.append(os.path.realpath(os.environ[env]))
    if os.path.isdir("/usr/local/cuda"):
        found.append(os.path.realpath("/usr/local/cuda"))
    return tuple(dict.fromkeys(found))


def find_nvcc(setting: str | None = None) -> str | None:
    for candidate in (setting, os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


_VERSION_CACHE: dict[str, str] = {}


def nvcc_version(nvcc: str) -> str:
    if nvcc not in _VERSION_CACHE:
        import subprocess

        try:
            out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            raise BackendError(f"{nvcc} --version failed: {exc}. Check the CUDA toolkit install.") from exc
        m = re.search(r"release [\d.]+, V([\d.]+)", out)
        _VERSION_CACHE[nvcc] = m.group(1) if m else out.strip().splitlines()[-1] if out.strip() else "unknown"
    return _VERSION_CACHE[nvcc]


def default_cache_dir() -> Path:
    """``$AUTOCOMP_CUDA_CACHE``, else ``<autocomp home>/cache/cuda`` (the store's home:
    compile results are cached results, so they follow the store, not the build cache)."""
    if os.environ.get("AUTOCOMP_CUDA_CACHE"):
        return Path(os.environ["AUTOCOMP_CUDA_CACHE"])
    return default_home() / "cache" / "cuda"


class Compiler:
    """nvcc with ptxas figures and an on-disk result cache (JSON files, owner-only)."""

    def __init__(
        self,
        nvcc: str,
        arch: str = DEFAULT_ARCH,
        extra_flags: tuple[str, ...] = (),
        cache_dir: Path | None = None,
        timeout: float = 180.0,
        memory_bytes: int = 8 * 1024**3,
    ) -> None:
        if not re.fullmatch(r"sm_\d+[a-z]?|compute_\d+[a-z]?", arch):
            raise BackendError(f"bad CUDA architecture {arch!r}; write it like sm_90 or sm_80")
        self.nvcc = nvcc
        self.arch = arch
        self.extra_flags = tuple(extra_flags)
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.timeout = timeout
        self.memory_bytes = memory_bytes

    def flags(self, forced_includes: tuple[str, ...] = ()) -> list[str]:
        out = [f"-arch={self.arch}", *BASE_FLAGS, *self.extra_flags]
        for inc in forced_includes:
            out += ["-include", inc]
        return out

    def key(self, source: str, forced_includes: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> str:
        payload = json.dumps(
            {"nvcc": nvcc_version(self.nvcc), "flags": self.flags(forced_includes) + list(extra), "source": source,
             "v": 2},
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()

    def _cache_path(self, key: str) -> Path:
        return self.cache_dir / "compile" / key[:2] / f"{key}.json"

    def _load(self, key: str) -> CompileResult | None:
        path = self._cache_path(key)
        try:
            return CompileResult.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _store(self, key: str, result: CompileResult) -> None:
        path = self._cache_path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(result.to_json(), fh)
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written only costs time

    def isolation(self, include_paths: tuple[str, ...] = ()) -> Isolation:
        """nvcc sees the toolkit, the include paths the user's own file names, /usr and its
        work directory; nothing else of the host (no $HOME, no /etc, no other /tmp)."""
        readable = toolkit_dirs(self.nvcc) + tuple(p for p in include_paths if os.path.isdir(p))
        return Isolation(readable=tuple(dict.fromkeys(readable)))

    async def compile(self, source: str, forced_includes: tuple[str, ...] = (), use_cache: bool = True,
                      include_paths: tuple[str, ...] = (), extra_flags: tuple[str, ...] = ()) -> CompileResult:
        """Compile ``source`` (as ``kernel.cu``) to an object; figures from ptxas.

        ``include_paths`` become ``-I`` flags and are bound read-only into the sandbox
        (callers pass only paths the user's own file names); ``extra_flags`` are
        ``load_inline``'s ``extra_cuda_cflags`` (already checked against the allowlist)."""
        extra = tuple(f"-I{p}" for p in include_paths) + tuple(extra_flags)
        key = self.key(source, forced_includes, extra)
        if use_cache:
            hit = self._load(key)
            if hit is not None:
                return hit
        tmp = tempfile.mkdtemp(prefix="autocomp-nvcc-")
        try:
            Path(tmp, "kernel.cu").write_text(source)
            argv = [self.nvcc, *self.flags(forced_includes), *extra, "-c", "kernel.cu", "-o", "kernel.o"]
            proc = await run_limited(argv, cwd=tmp, timeout=self.timeout, memory_bytes=self.memory_bytes,
                                     isolation=self.isolation(include_paths))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        log = (proc.stderr + proc.stdout).strip()
        if proc.timed_out:
            log += f"\nnvcc did not finish within {self.timeout:.0f} s"
        kernels = parse_ptxas(log) if proc.ok else []
        names = demangle([k.name for k in kernels])
        for k in kernels:
            k.name = names.get(k.name, k.name)
        result = CompileResult(ok=proc.ok, log=_trim(log), kernels=kernels, seconds=proc.seconds, arch=self.arch,
                               timed_out=proc.timed_out)
        if not proc.timed_out:
            self._store(key, result)
        return result

    async def build_shared(self, source: str, out_dir: str, name: str) -> tuple[bool, str]:
        """Build ``source`` into ``out_dir/name.so`` for the GPU harness to load."""
        Path(out_dir, f"{name}.cu").write_text(source)
        argv = [self.nvcc, f"-arch={self.arch}", "-O3", "-std=c++17", "-shared", "-Xcompiler", "-fPIC",
                *self.extra_flags, f"{name}.cu", "-o", f"{name}.so"]
        proc = await run_limited(argv, cwd=out_dir, timeout=self.timeout, memory_bytes=self.memory_bytes,
                                 isolation=self.isolation())
        return proc.ok, proc.tail()


def _trim(log: str) -> str:
    """Drop ptxas's per-function chatter from error logs; keep errors and warnings."""
    keep = [ln for ln in log.splitlines()
            if not ln.startswith("ptxas info") and not _PROPS.search(ln) and "detected in the compilation of" not in ln]
    return "\n".join(keep).strip()
