"""Is there an NVIDIA GPU here? Asked once per process through ``nvidia-smi`` (no CUDA
library is loaded into the editor's or CLI's process)."""

from __future__ import annotations

import os
import shutil
import subprocess
from functools import lru_cache


@lru_cache(maxsize=1)
def gpu_names() -> tuple[str, ...]:
    """Names of the visible NVIDIA GPUs; empty when none (or nvidia-smi is missing)."""
    tool = shutil.which("nvidia-smi")
    if not tool:
        return ()
    try:
        out = subprocess.run([tool, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ()
    if out.returncode != 0:
        return ()
    return tuple(line.strip() for line in out.stdout.splitlines() if line.strip())


def gpu_enabled(setting: object = None) -> bool:
    """The GPU tier runs when a GPU is visible, unless turned off by the ``gpu = "off"``
    setting or ``AUTOCOMP_CUDA_GPU=off``."""
    wanted = str(setting if setting is not None else os.environ.get("AUTOCOMP_CUDA_GPU", "auto")).lower()
    if wanted in ("off", "0", "false", "no"):
        return False
    return bool(gpu_names())


def device_nodes() -> tuple[str, ...]:
    """The NVIDIA device nodes a GPU child needs bound into its sandbox (empty without a GPU)."""
    import glob

    nodes = sorted(glob.glob("/dev/nvidia[0-9]*")) + [p for p in ("/dev/nvidiactl", "/dev/nvidia-uvm",
                                                                 "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
                                                       if os.path.exists(p)]
    nodes += sorted(glob.glob("/dev/nvidia-caps/*"))
    return tuple(nodes)


def short_name(name: str) -> str:
    """``NVIDIA H200`` -> ``H200``: what the metric source shows."""
    for prefix in ("NVIDIA ", "Tesla "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name.strip() or "GPU"


@lru_cache(maxsize=1)
def native_arch() -> str | None:
    """``sm_90`` for the first visible GPU (from its compute capability), or None."""
    tool = shutil.which("nvidia-smi")
    if not tool:
        return None
    try:
        out = subprocess.run([tool, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.stdout.strip().splitlines()[:1]
    if out.returncode != 0 or not first:
        return None
    major, _, minor = first[0].strip().partition(".")
    return f"sm_{major}{minor or '0'}" if major.isdigit() and (minor or "0").isdigit() else None


def driver_env() -> dict[str, str]:
    """``LD_LIBRARY_PATH`` for a sandboxed GPU child when the host finds the NVIDIA driver
    library (libcuda) only through that variable, which the sandbox clears; empty when the
    loader finds it anyway (ld.so.cache, which the sandbox binds)."""
    import glob

    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
            if d and os.path.isabs(d) and glob.glob(os.path.join(d, "libcuda.so*"))]
    return {"LD_LIBRARY_PATH": os.pathsep.join(dict.fromkeys(dirs))} if dirs else {}
