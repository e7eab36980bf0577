"""Autocomp's recorded Trainium search against our NKI evaluator, candidate by candidate.

ucb-bar/autocomp ships a recorded search run (``visualizer/**/sample_run``: LayerNorm,
``trn-tutorial-nki1`` problem 1, four LLMs, two iterations): for every candidate, its code
and what the real Neuron toolchain and a trn1 NeuronCore said: correct with a measured P99
latency, or refused with the compiler's error. That is ground truth both ways, so this
script asks of each candidate:

- **verdict**: does our interpreter (the harness's own ``test_nki`` on its own inputs, as
  ``bench/nki_autocomp_suite.py`` runs it) accept what the hardware ran and refuse what the
  toolchain refused? A refused kernel we accept is the costly direction: a search would keep
  code that does not compile.
- **estimate**: over the candidates both accept, Spearman of our estimate against the
  measurement, each candidate's direction against its parent, and the share within 2x.

It cannot be committed here; point it at a checkout (PyTorch is not needed)::

    python bench/nki_sample_run.py --autocomp /path/to/autocomp [--timeout S]

A candidate whose kernel is named ``test`` (the older naming) is renamed ``solution`` for
the harness, as the harness expects.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nki_autocomp_suite as suite  # noqa: E402
from nki_fidelity import _Cand, direction_right, spearman  # noqa: E402


def _build(node):
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "CodeCandidate":
        return _Cand(**{k.arg: _build(k.value) for k in node.keywords})
    return ast.literal_eval(node)


def candidates(run: Path) -> list[dict]:
    """The run's root and every evaluated candidate: label, code, parent code, and the
    hardware's answer (``ms`` or ``refused``)."""
    out: list[dict] = []
    root = None
    for full in sorted(run.glob("eval-results-iter-*/code_*_result_full.txt"),
                       key=lambda p: (p.parent.name, int(re.search(r"code_(\d+)", p.name).group(1)))):
        text = full.read_text(encoding="utf-8", errors="replace")
        start = text.find("\nCodeCandidate(")
        if start < 0:
            continue
        cand = _build(ast.parse(text[start + 1:], mode="eval").body)
        result = json.loads(full.with_name(full.name.replace("_full", "")).read_text(encoding="utf-8"))
        node = cand
        while node.parent is not None:
            node = node.parent
        if root is None:
            root = {"label": "original", "code": node.code, "parent": None, "ms": float(node.score), "refused": ""}
        refused = ""
        if not result.get("correct"):
            lines = [ln.strip() for ln in (result.get("stderr") or "").splitlines() if ln.strip()]
            refused = (lines[-1] if lines else "incorrect")[:160]
        out.append({"label": f"{full.parent.name[len('eval-results-'):]}/{full.name.split('_result')[0]}",
                    "code": cand.code, "parent": cand.parent.code if cand.parent else None,
                    "ms": float(result["latency"]) if result.get("correct") and result.get("latency") else None,
                    "refused": refused})
    return ([root] if root else []) + out


def harness_of(root: Path, run: Path) -> Path:
    problem = json.loads((run / "run_metadata.json").read_text(encoding="utf-8"))["problem"]
    m = re.match(r"Prob\(\s*([\w-]+)\s*,\s*(\d+)\s*\)", problem)
    if not m:
        raise SystemExit(f"{run}: cannot read the problem {problem!r}")
    found = sorted((root / "harnesses" / m.group(1)).glob(f"{m.group(2)}_*.py"))
    if not found:
        raise SystemExit(f"{run}: no harness for {problem} under {root / 'harnesses'}")
    return found[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--autocomp", required=True, help="a ucb-bar/autocomp checkout")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per candidate")
    args = ap.parse_args()
    root = Path(args.autocomp)
    runs = sorted(p.parent for p in root.glob("visualizer/**/run_metadata.json"))
    if not runs:
        print("no recorded run (visualizer/**/run_metadata.json) under --autocomp")
        return 2
    for run in runs:
        harness = harness_of(root, run)
        cands = candidates(run)
        print(f"== {run.relative_to(root)}: {len(cands)} kernels, harness {harness.relative_to(root)}")
        print(f"{'kernel':14} {'hardware':>12} {'ours':>12}  verdict")
        estimates: dict[str, float] = {}
        agree = 0
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for c in cands:
                code = c["code"]
                if not re.search(r"^def solution\(", code, re.M):
                    code = re.sub(r"^def test\(", "def solution(", code, count=1, flags=re.M)
                sol = Path(tmp) / "solution.py"
                sol.write_text(code, encoding="utf-8")
                status, said, _ = suite.check(harness, sol, args.timeout)
                est = suite.estimate_of(said) if status == 0 else None
                ours_ok = status == 0
                hw_ok = not c["refused"]
                agree += ours_ok == hw_ok
                hw = f"{c['ms']:.3f} ms" if hw_ok else "refused"
                mine = f"{est['us'] / 1000:.3f} ms" if est else ("refused" if status in (1, 2) else "skipped")
                if est:
                    estimates[c["code"]] = est["us"] / 1000
                why = ""
                if not hw_ok:
                    why = f"  toolchain: {c['refused']}"
                if status in (1, 2):
                    why += f"  ours: {(said.splitlines() or [''])[-1][:160]}"
                note = "agree" if ours_ok == hw_ok else ("WE ACCEPT WHAT THE TOOLCHAIN REFUSED" if ours_ok else
                                                         "we refuse what the hardware ran")
                print(f"{c['label']:14} {hw:>12} {mine:>12}  {note}{why}", flush=True)
                rows.append((c, est))
        timed = [(c["ms"], est["us"] / 1000) for c, est in rows if c["ms"] is not None and est]
        print(f"\nverdicts agree on {agree} of {len(cands)} kernels "
              f"({sum(1 for c, _ in rows if c['refused'])} refused by the toolchain)")
        if len(timed) >= 2:
            meas, mine = [m for m, _ in timed], [e for _, e in timed]
            w2 = sum(1 for m, e in timed if 0.5 <= e / m <= 2.0)
            pairs = [(c["ms"], est["us"] / 1000, next(p["ms"] for p in cands if p["code"] == c["parent"]),
                      estimates[c["parent"]]) for c, est in rows
                     if c["ms"] is not None and est and c["parent"] in estimates
                     and any(p["code"] == c["parent"] and p["ms"] is not None for p in cands)]
            d_ok = sum(direction_right([pe, e], [pm, m])[0] for m, e, pm, pe in pairs)
            print(f"estimate vs measurement over {len(timed)} timed kernels (cycles (nki estimate) vs P99 ms on trn1): "
                  f"Spearman {spearman(mine, meas):.2f}, direction against the parent right {d_ok}/{len(pairs)}, "
                  f"within 2x {w2}/{len(timed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
