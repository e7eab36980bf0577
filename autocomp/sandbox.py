"""Run programs that touch candidate code (compilers, simulators, interpreter children, GPU
runners) isolated at the OS level, with limits, and kill everything they started.

Why by construction: a candidate is LLM-written code and may be written to win by cheating or
to steal keys. Checks on its text can be evaded; what it cannot evade is a process that has
no network, no environment, no host files beyond a read-only view of the toolchain, its own
PID namespace and a pids limit. Every backend starts its children through
:func:`run_limited`, which builds that jail with Debian's ``bubblewrap``:

* user, mount, PID, IPC, UTS, network and cgroup namespaces (``--unshare-all``);
* an empty environment plus a few harmless variables (``PATH``, ``HOME``, ``TMPDIR``,
  ``LANG``) and what the caller names explicitly; the host's variables (API keys) never enter;
* ``/usr`` (with the ``/bin``, ``/lib``, ``/lib64`` links) and the caller's ``readable`` paths
  read-only, the work directory (and ``writable`` paths) read-write, a private ``/tmp``, a
  minimal ``/dev`` and, unless asked for, no ``/proc`` (so no ``/proc/self/mem``, no
  ``/proc/<pid>/environ``, no reopening of inherited descriptors through ``/proc/self/fd``);
* address-space, CPU, file-size and process-count limits, a wall-clock timeout, and output
  read through bounded buffers.

A result may travel on a *channel*: a pipe whose write end is descriptor 3 in the child. Only
the trusted part of a child (a simulator extension, an interpreter) is given its number; a
candidate running inside cannot reopen it (no ``/proc``) and cannot write host files.

The user may opt out (``AUTOCOMP_SANDBOX=off`` or the setting ``autocomp.sandbox = "off"``);
children then still get an empty environment, and every result says ``sandbox: off``.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from autocomp.backends.base import BackendError

DEFAULT_MEMORY_BYTES = 4 * 1024**3
DEFAULT_MAX_PROCESSES = 64
DEFAULT_FILE_BYTES = 2 * 1024**3
CHANNEL_FD = 3
CHANNEL_LIMIT = 1 << 30

MODES = ("auto", "bwrap", "off")
ENV_VAR = "AUTOCOMP_SANDBOX"
INSTALL_HINT = (
    "install bubblewrap (sudo apt-get install bubblewrap, or run .ci/install-sandbox.sh); to run "
    "candidates without isolation at your own risk set AUTOCOMP_SANDBOX=off or the setting "
    'autocomp.sandbox = "off"'
)

# Variables that may never be handed to a child, whatever a caller passes (a second line
# behind "callers pass only what the tool needs").
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)


class SandboxUnavailable(BackendError):
    """Isolation was required but cannot be set up on this machine; the message names the fix."""


@dataclass(frozen=True)
class Isolation:
    """What an isolated child may see besides ``/usr`` and its work directory."""

    readable: tuple[str, ...] = ()  # host paths bound read-only at the same path
    writable: tuple[str, ...] = ()  # host directories bound read-write at the same path
    proc: bool = False  # mount a /proc of the child's own PID namespace
    devices: tuple[str, ...] = ()  # device nodes bound in (GPU runners)


@dataclass
class ProcessResult:
    returncode: int | None  # None when killed for timeout
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool
    channel: bytes = b""  # what the child wrote to descriptor 3 (when asked for)
    isolation: str = "bwrap"  # "bwrap", or "off" when the user opted out
    truncated: bool = False  # output past ``output_limit`` was dropped

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    def tail(self, limit: int = 4000) -> str:
        """The end of stderr+stdout, for feedback to the LLM and the user."""
        text = (self.stderr + ("\n" if self.stderr and self.stdout else "") + self.stdout).strip()
        return text if len(text) <= limit else "…" + text[-limit:]


# -- mode --------------------------------------------------------------------------------

_configured_mode: str | None = None


def configure(mode: str | None) -> None:
    """Set the mode from the ``autocomp.sandbox`` setting (CLI flag or editor setting)."""
    global _configured_mode
    if mode is not None and str(mode).lower() not in MODES:
        raise BackendError(f'autocomp.sandbox must be one of {", ".join(MODES)}; got {mode!r}')
    _configured_mode = None if mode is None else str(mode).lower()


def mode() -> str:
    """``off`` when the user opted out by setting or environment, else ``bwrap``."""
    for raw in (os.environ.get(ENV_VAR), _configured_mode):
        if raw and raw.strip().lower() == "off":
            return "off"
    for raw in (os.environ.get(ENV_VAR), _configured_mode):
        if raw and raw.strip().lower() not in MODES:
            raise SandboxUnavailable(f"{ENV_VAR}={raw!r} is not one of {', '.join(MODES)}")
    return "bwrap"


def label() -> str:
    """How evaluations are isolated right now, for results and cache keys."""
    try:
        return mode()
    except SandboxUnavailable:
        return "invalid"


@dataclass
class Probe:
    """Whether bubblewrap works here, and how process counts are limited."""

    works: bool
    detail: str
    pids: str = ""


_probe: Probe | None = None
_probe_lock = threading.Lock()


def probe() -> Probe:
    """Check once per process that bubblewrap can create its namespaces here."""
    global _probe
    with _probe_lock:
        if _probe is not None:
            return _probe
        bwrap = shutil.which("bwrap")
        if bwrap is None:
            _probe = Probe(False, "bubblewrap (bwrap) is not installed")
            return _probe
        try:
            out = subprocess.run(
                [bwrap, *_base_args(), "--", "/bin/true"], capture_output=True, text=True, timeout=20, env={}
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            _probe = Probe(False, f"bwrap failed to start: {exc}")
            return _probe
        if out.returncode != 0:
            _probe = Probe(False, "bwrap cannot create namespaces here: " + (out.stderr.strip() or f"exit {out.returncode}"))
            return _probe
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
        _probe = Probe(True, f"{version} at {bwrap}", _pids_mechanism())
        return _probe


def require() -> str:
    """The active mode; raises :class:`SandboxUnavailable` with the fix when isolation is
    required but bubblewrap cannot run."""
    m = mode()
    if m == "off":
        return m
    p = probe()
    if not p.works:
        raise SandboxUnavailable(f"cannot isolate candidate code: {p.detail}; {INSTALL_HINT}")
    return m


# -- the jail ----------------------------------------------------------------------------


def _base_args() -> list[str]:
    args = ["--unshare-all", "--die-with-parent", "--new-session", "--clearenv", "--cap-drop", "ALL"]
    args += ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    # Harmless files the dynamic loader and /usr/bin's alternatives links use.
    for extra in ("/etc/ld.so.cache", "/etc/alternatives"):
        if os.path.exists(extra):
            args += ["--ro-bind", extra, extra]
    args += ["--dev", "/dev", "--tmpfs", "/tmp"]
    return args


def jail_argv(argv: Sequence[str], cwd: str, isolation: Isolation, env: Mapping[str, str]) -> list[str]:
    """The bubblewrap command line that runs ``argv`` in ``cwd`` under ``isolation``."""
    bwrap = shutil.which("bwrap") or "bwrap"
    args = [bwrap, *_base_args()]
    if isolation.proc:
        args += ["--proc", "/proc"]
    # Parents before children so that a nested bind is not hidden by its parent's.
    # A path and, if it is a link, its target (a venv's python points into its base prefix).
    existing = [p for p in isolation.readable if p and os.path.exists(p)]
    ro = sorted(set(existing) | {os.path.realpath(p) for p in existing}, key=len)
    for path in ro:
        if path in ("/", "/usr") or path.startswith("/usr/"):
            continue  # already visible
        args += ["--ro-bind", path, path]
    rw = sorted({os.path.abspath(cwd), *(os.path.abspath(p) for p in isolation.writable if p)}, key=len)
    for path in rw:
        args += ["--bind", path, path]
    for dev in isolation.devices:
        if os.path.exists(dev):
            args += ["--dev-bind", dev, dev]
    for key, value in env.items():
        args += ["--setenv", key, value]
    args += ["--chdir", os.path.abspath(cwd), "--", *argv]
    return args


def child_env(cwd: str, extra: Mapping[str, str] | None) -> dict[str, str]:
    """The whole environment a child gets: nothing inherited from the host."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": os.path.abspath(cwd), "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    for key, value in (extra or {}).items():
        if _SECRET_NAME.search(key):
            continue
        env[str(key)] = str(value)
    return env


def python_view() -> tuple[str, ...]:
    """Read-only paths a child needs to run this Python with Autocomp importable: the
    interpreter's prefixes (a venv and its base) and Autocomp's own package folders (an
    editable install maps them outside site-packages)."""
    import autocomp
    import autocomp.backends
    import autocomp.prompts

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for pkg in (autocomp, autocomp.backends, autocomp.prompts):
        paths.update(os.path.realpath(p) for p in pkg.__path__)
    try:
        import numpy

        paths.add(os.path.dirname(os.path.dirname(os.path.realpath(numpy.__file__))))
    except ImportError:
        pass
    return tuple(sorted(paths))


# -- process limits ----------------------------------------------------------------------

_CGROUP_ROOTS = ("/sys/fs/cgroup/pids", "/sys/fs/cgroup")


def _pids_mechanism() -> str:
    if _cgroup_parent() is not None:
        return "cgroup pids.max"
    return "RLIMIT_NPROC" if os.geteuid() != 0 else "none (root without a writable pids cgroup)"


_cgroup_checked = False
_cgroup_dir: str | None = None


def _cgroup_parent() -> str | None:
    """A pids cgroup folder we may create children in (root with cgroup v1 or v2), or None."""
    global _cgroup_checked, _cgroup_dir
    if _cgroup_checked:
        return _cgroup_dir
    _cgroup_checked = True
    for root in _CGROUP_ROOTS:
        if root == "/sys/fs/cgroup" and "pids" not in _read("/sys/fs/cgroup/cgroup.subtree_control"):
            continue
        parent = os.path.join(root, "autocomp")
        try:
            os.makedirs(parent, exist_ok=True)
            probe_dir = os.path.join(parent, f"probe-{os.getpid()}")
            os.mkdir(probe_dir)
            ok = os.path.exists(os.path.join(probe_dir, "pids.max"))
            os.rmdir(probe_dir)
        except OSError:
            continue
        if ok:
            _cgroup_dir = parent
            return parent
    return None


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _new_cgroup(max_processes: int) -> str | None:
    parent = _cgroup_parent()
    if parent is None:
        return None
    path = os.path.join(parent, f"run-{os.getpid()}-{secrets.token_hex(6)}")
    try:
        os.mkdir(path)
        with open(os.path.join(path, "pids.max"), "w") as f:
            f.write(str(max_processes))
    except OSError:
        return None
    return path


def _drop_cgroup(path: str | None) -> None:
    if not path:
        return
    for _ in range(50):
        for pid in _read(os.path.join(path, "cgroup.procs")).split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
        try:
            os.rmdir(path)
            return
        except OSError:
            time.sleep(0.01)


def _preexec(memory_bytes: int | None, cpu_seconds: float | None, max_processes: int, cgroup: str | None,
             channel_w: int | None):
    def apply() -> None:
        os.setsid()
        if cgroup:
            with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        elif os.geteuid() != 0:
            resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
        if memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if cpu_seconds:
            cpu = int(cpu_seconds) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (DEFAULT_FILE_BYTES, DEFAULT_FILE_BYTES))
        if channel_w is not None:
            if channel_w != CHANNEL_FD:
                os.dup2(channel_w, CHANNEL_FD)
            else:
                os.set_inheritable(CHANNEL_FD, True)

    return apply


# -- running -----------------------------------------------------------------------------


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _close_transport(proc: asyncio.subprocess.Process) -> None:
    """Close the subprocess transport now: left to the garbage collector it may be
    finalized after its event loop has closed, which raises "Event loop is closed"."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        transport.close()


async def _read_bounded(stream: asyncio.StreamReader | None, limit: int) -> tuple[bytes, bool]:
    """Read a stream to its end, keeping at most ``limit`` bytes (the rest is drained so the
    child never blocks, and dropped)."""
    if stream is None:
        return b"", False
    kept = bytearray()
    dropped = False
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            return bytes(kept), dropped
        room = limit - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > max(room, 0):
            dropped = True


# Linux's F_SETPIPE_SZ (fcntl has the name from Python 3.10 on; the number is the ABI's).
_F_SETPIPE_SZ = 1031
CHANNEL_PIPE_BYTES = 1 << 20


def _widen_pipe(fd: int) -> None:
    """Give the channel pipe 1 MiB (the default limit of /proc/sys/fs/pipe-max-size) instead
    of 64 KiB: the parent's reader thread then takes a large result in a few hundred reads,
    not thousands, and each read waits for the GIL, which an estimate on another thread holds
    for up to the switch interval at a time. Where the kernel refuses, the pipe stays as it was."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", _F_SETPIPE_SZ), CHANNEL_PIPE_BYTES)
    except (OSError, ImportError):
        pass


def _read_fd_bounded(fd: int, limit: int, sink: Callable[[bytes], None] | None = None) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes from ``fd`` (and whether more came). With ``sink``, the kept
    bytes go to it as they arrive (on this reader's thread, while the child still runs)
    instead of being returned."""
    kept = bytearray()
    size = 0
    dropped = False
    try:
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            room = limit - size
            if room > 0:
                piece = chunk[:room]
                size += len(piece)
                if sink is None:
                    kept += piece
                else:
                    sink(piece)
            if len(chunk) > max(room, 0):
                dropped = True
    finally:
        os.close(fd)
    return bytes(kept), dropped


async def run_limited(
    argv: Sequence[str],
    cwd: str,
    timeout: float,
    memory_bytes: int | None = DEFAULT_MEMORY_BYTES,
    env: Mapping[str, str] | None = None,
    stdin_data: bytes | None = None,
    output_limit: int = 1 << 20,
    isolation: Isolation | None = None,
    channel: bool = False,
    max_processes: int = DEFAULT_MAX_PROCESSES,
    channel_limit: int = CHANNEL_LIMIT,
    channel_sink: Callable[[bytes], None] | None = None,
) -> ProcessResult:
    """Run ``argv`` in ``cwd`` inside the jail (see the module docstring); never raises for
    the program's own failures. Raises :class:`SandboxUnavailable` when isolation is
    required and cannot be set up. With ``channel_sink``, the channel's bytes (up to
    ``channel_limit``) are handed to it as they arrive, from another thread, and
    ``ProcessResult.channel`` stays empty: a caller can parse while the child runs."""
    active = require()
    full_env = child_env(cwd, env)
    if active == "off":
        command, spawn_env = list(argv), full_env
    else:
        command, spawn_env = jail_argv(argv, cwd, isolation or Isolation(), full_env), {}
    return await _run(command, cwd, timeout, spawn_env, active, memory_bytes, stdin_data, output_limit,
                      channel, max_processes, channel_limit, channel_sink)


# What a transport (ssh, srun) needs from the user's environment to reach a remote host.
TRANSPORT_VARIABLES = ("HOME", "USER", "LOGNAME", "PATH", "SSH_AUTH_SOCK", "KRB5CCNAME", "SLURM_CONF", "LANG")


async def run_transport(
    argv: Sequence[str],
    cwd: str,
    timeout: float,
    stdin_data: bytes | None = None,
    output_limit: int = 1 << 20,
) -> ProcessResult:
    """Run a transport command the *user* configured (``ssh gpuhost ...``, ``srun ...``)
    that carries candidate code to a remote worker as data, never running it here. It needs
    the network and the user's SSH setup, so it runs outside the jail, but still without the
    user's other variables (no API keys travel to the remote host). The remote worker
    isolates the candidate on its own host."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in TRANSPORT_VARIABLES or k.startswith("AUTOCOMP_")) and not _SECRET_NAME.search(k)
    }
    return await _run(list(argv), cwd, timeout, env, "transport", None, stdin_data, output_limit, False,
                      DEFAULT_MAX_PROCESSES, CHANNEL_LIMIT)


async def _run(
    command: list[str],
    cwd: str,
    timeout: float,
    spawn_env: dict[str, str],
    label_: str,
    memory_bytes: int | None,
    stdin_data: bytes | None,
    output_limit: int,
    channel: bool,
    max_processes: int,
    channel_limit: int,
    channel_sink: Callable[[bytes], None] | None = None,
) -> ProcessResult:
    start = time.monotonic()
    cgroup = _new_cgroup(max_processes)
    channel_r = channel_w = None
    if channel:
        channel_r, channel_w = os.pipe()
        _widen_pipe(channel_w)
    channel_task: asyncio.Future | None = None
    try:
        proc = await asyncio.create_subprocess_exec(
            *command,
            cwd=cwd,
            env=spawn_env,
            stdin=asyncio.subprocess.PIPE if stdin_data is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=_preexec(memory_bytes, timeout * 2, max_processes, cgroup, channel_w),
            pass_fds=(CHANNEL_FD,) if channel else (),
        )
    except BaseException:
        for fd in (channel_r, channel_w):
            if fd is not None:
                os.close(fd)
        _drop_cgroup(cgroup)
        raise
    if channel_w is not None:
        os.close(channel_w)
        channel_task = asyncio.get_running_loop().run_in_executor(None, _read_fd_bounded, channel_r, channel_limit,
                                                                       channel_sink)
    timed_out = False
    readers = asyncio.gather(_read_bounded(proc.stdout, output_limit), _read_bounded(proc.stderr, output_limit))

    async def feed_and_wait() -> int:
        if stdin_data is not None and proc.stdin is not None:
            try:
                proc.stdin.write(stdin_data)
                await proc.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass
            proc.stdin.close()
        return await proc.wait()

    try:
        await asyncio.wait_for(feed_and_wait(), timeout=timeout)
    except asyncio.TimeoutError:
        timed_out = True
    except asyncio.CancelledError:
        _kill_group(proc)
        _drop_cgroup(cgroup)
        readers.cancel()
        # Nobody awaits these any more: their outcome is taken here, or a finalizer would log
        # it whenever the garbage collector runs (on CPython 3.11, inside an ast.parse that
        # then fails with "AST constructor recursion depth mismatch").
        for pending in (readers, channel_task):
            if pending is not None:
                pending.add_done_callback(_outcome_taken)
        _close_transport(proc)
        raise
    finally:
        if proc.returncode is None:
            _kill_group(proc)
    # A candidate may have left children behind (fork bombs, background sleeps): the PID
    # namespace dies with its first process, the cgroup and the process group are killed.
    _kill_group(proc)
    _drop_cgroup(cgroup)
    try:
        (out, out_cut), (err, err_cut) = await asyncio.wait_for(readers, timeout=10)
    except asyncio.TimeoutError:
        (out, out_cut), (err, err_cut) = (b"", True), (b"", True)
    if proc.returncode is None:
        await proc.wait()
    channel_data = b""
    if channel_task is not None:
        channel_data, _cut = await channel_task
    _close_transport(proc)
    return ProcessResult(
        returncode=None if timed_out else proc.returncode,
        stdout=out.decode("utf-8", "replace"),
        stderr=err.decode("utf-8", "replace"),
        seconds=time.monotonic() - start,
        timed_out=timed_out,
        channel=channel_data,
        isolation=label_,
        truncated=out_cut or err_cut,
    )


def _outcome_taken(future: "asyncio.Future[Any]") -> None:
    """Mark a future's exception as retrieved (it ended after its run was cancelled)."""
    if not future.cancelled():
        future.exception()


def cpu_slots() -> int:
    """How many candidates to evaluate at once on this machine."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)
