"""The NKI evaluators' scratch folders never outlive the process: a CLI run that exits
without closing its backend used to leave one ``autocomp-nki-*`` folder in /tmp per run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _leftovers(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith(("autocomp-nki-", "autocomp-neuron-")))


def test_cli_eval_leaves_no_scratch_folder(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "autocomp", "eval", str(ROOT / "examples" / "nki" / "rmsnorm.py")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _leftovers(tmp_path) == []


def test_scratch_root_is_removed_at_exit_and_on_close(tmp_path):
    code = ("from autocomp.backends.nki.harness import Harness\n"
            "from autocomp.backends.nki.neuron import NeuronTools\n"
            "import os\n"
            "h = Harness(); n = NeuronTools()\n"
            "for r in (h._root, n._root):\n"
            "    open(os.path.join(r, 'x'), 'w').close()\n"
            "g = Harness(); first = g._root; g.close()\n"
            "assert not os.path.exists(first)\n"
            "assert g._root != first  # usable again after close\n"
            "print('ok')\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]
    assert _leftovers(tmp_path) == []


def test_roots_of_killed_processes_are_swept_by_the_next_one(tmp_path):
    """A process killed outright leaves its root behind; the next one removes it once it is
    old, and never a root whose process lives or that is recent."""
    import time

    from autocomp.scratch import STALE_AFTER, sweep_stale

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    old = time.time() - STALE_AFTER - 60
    roots = {"dead_old": f"autocomp-nki-{dead_pid}-abc", "dead_new": f"autocomp-nki-{dead_pid}-def",
             "alive_old": f"autocomp-nki-{os.getpid()}-ghi", "other": "autocomp-nkiother", "legacy": "autocomp-nki-xyz"}
    for key, name in roots.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "work.txt").write_text("x")
        if key != "dead_new":
            os.utime(tmp_path / name, (old, old))
    removed = sweep_stale("autocomp-nki-", str(tmp_path))
    assert removed == [str(tmp_path / roots["dead_old"])]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(n for k, n in roots.items() if k != "dead_old")


def test_a_killed_cli_run_leaves_a_root_the_next_run_sweeps(tmp_path):
    code = ("from autocomp.backends.nki.harness import Harness\n"
            "import os, signal\n"
            "h = Harness(); print(h._root, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    left = _leftovers(tmp_path)
    assert len(left) == 1 and proc.stdout.strip().endswith(left[0]), (left, proc.stdout)
    old = os.path.getmtime(tmp_path / left[0]) - 7200
    os.utime(tmp_path / left[0], (old, old))
    again = subprocess.run([sys.executable, "-c", "from autocomp.backends.nki.harness import Harness\n"
                            "h = Harness(); h._root; h.close(); print('ok')\n"],
                           env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert again.stdout.strip() == "ok", again.stderr[-2000:]
    assert _leftovers(tmp_path) == []
