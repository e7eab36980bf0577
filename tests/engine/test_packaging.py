"""The built wheel (not the checkout) carries every file a target needs at run time
(issue 13, item 7): e.g. the Gemmini extension's sim/loop_conv.inc."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_SUFFIXES = {".py", ".h", ".c", ".cc", ".cpp", ".inc", ".toml", ".md"}


@pytest.mark.slow
def test_wheel_holds_every_runtime_file_of_every_target(tmp_path):
    # Build from a clean copy of the tree (a stale build/ folder could hide a missing file).
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    for name in filter(None, files):
        if name.startswith(("editors/vscode/node_modules", "examples/")) or not (ROOT / name).is_file():
            continue
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    out = tmp_path / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        capture_output=True, text=True, timeout=600,
    )
    assert build.returncode == 0, build.stderr
    (wheel,) = out.glob("autocomp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = []
    for folder, package in (("backends", "autocomp/backends"), ("prompts", "autocomp/prompts"), ("server", "autocomp/server")):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in RUNTIME_SUFFIXES and "__pycache__" not in path.parts:
                rel = path.relative_to(ROOT / folder).as_posix()
                if f"{package}/{rel}" not in names:
                    missing.append(f"{folder}/{rel}")
    assert not missing, f"not in the wheel: {missing}"
    assert "autocomp/backends/gemmini/sim/loop_conv.inc" in names
