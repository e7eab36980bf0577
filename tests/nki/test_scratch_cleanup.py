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
