"""`autocomp tune`'s contract, on the real evaluators (Gemmini on Spike with the timing model,
the NKI interpreter) and small kernels: no evaluator double."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autocomp.cli.main import main

from tests.tuning.test_space import GEMMINI

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def _json(capsys) -> dict:
    out = capsys.readouterr().out.strip().splitlines()
    return json.loads(out[-1])


def test_gemmini_grid_json_contract_resume_and_write(tmp_path, capsys):
    kernel = tmp_path / "gemm.c"
    kernel.write_text(GEMMINI)
    assert main(["tune", str(kernel), "--strategy", "grid", "--json"]) == 0
    first = _json(capsys)
    for key in ("speedup", "confirmed", "primary_metric", "best", "baseline", "configs", "run_id", "tier", "pruned",
                "evaluated_total", "replay", "usage"):
        assert key in first, key
    assert first["primary_metric"] == "cycles" and first["confirmed"] is True and first["replay"] is False
    assert first["strategy"] == "grid" and first["valid_configs"] == len(first["configs"]) > 1
    assert first["pruned"] > 0  # the divisibility and accumulator rules ruled some out unevaluated
    assert all(c["verdict"] == "correct" and c["metric"]["source"] == "gemmini timing model" for c in first["configs"])
    best = min(first["configs"], key=lambda c: c["metric"]["value"])
    assert first["best"]["config"] == best["config"]
    assert first["speedup"] == pytest.approx(first["baseline"]["metric"]["value"] / best["metric"]["value"])
    # the constants as written are one grid point, answered by the baseline's evaluation
    assert first["cache_hits"] == 1 and first["evaluations_run"] == len(first["configs"]) - 1
    assert first["written"] is False
    assert kernel.read_text() == GEMMINI  # nothing written without --write

    # Run again: the same configurations come from the store's evaluation cache (resume).
    assert main(["tune", str(kernel), "--strategy", "grid", "--json"]) == 0
    again = _json(capsys)
    assert again["evaluations_run"] == 0 and again["cache_hits"] == len(again["configs"])
    assert again["best"]["config"] == first["best"]["config"]

    # TPE with a budget, seeded: same seed, same configurations; --write writes the confirmed best.
    assert main(["tune", str(kernel), "--budget-evals", "3", "--seed", "3", "--json"]) == 0
    tpe = _json(capsys)
    assert tpe["strategy"] == "tpe" and len(tpe["configs"]) == 3
    assert main(["tune", str(kernel), "--budget-evals", "3", "--seed", "3", "--json"]) == 0
    assert [c["config"] for c in _json(capsys)["configs"]] == [c["config"] for c in tpe["configs"]]
    assert main(["tune", str(kernel), "--strategy", "grid", "--write"]) == 0
    out = capsys.readouterr().out
    assert "configuration" in out and "verdict" in out and "cycles" in out
    written = kernel.read_text()
    if first["improved"]:
        cfg = first["best"]["config"]
        assert f"#define TI {cfg['TI']}" in written and f"#define TJ {cfg['TJ']}" in written and "wrote" in out
    else:
        assert written == GEMMINI


NKI = (ROOT / "examples/nki/gemm_tiled.py").read_text().replace("(256, 256)", "(128, 128)").replace(
    "TILE_M = 32  # stationary", "# autocomp: tune TILE_N in 32, 64, 128\nTILE_M = 32  # stationary")


def test_nki_estimate_is_not_written_without_accept_unconfirmed(tmp_path, capsys):
    kernel = tmp_path / "gemm_tiled.py"
    kernel.write_text(NKI)
    assert main(["tune", str(kernel), "--strategy", "random", "--seed", "1", "--json"]) == 0
    result = _json(capsys)
    assert result["confirmed"] is False and result["primary_metric"] == "cycles"
    assert [t["name"] for t in result["space"]["tunables"]] == ["TILE_N"]
    assert {c["config"]["TILE_N"] for c in result["configs"]} == {32, 64, 128}
    assert all(c["metric"]["source"] == "nki estimate" for c in result["configs"])
    assert result["improved"] and result["best"]["config"]["TILE_N"] != 64
    assert main(["tune", str(kernel), "--strategy", "random", "--seed", "1", "--write"]) == 1
    assert kernel.read_text() == NKI and "not written" in capsys.readouterr().out
    assert main(["tune", str(kernel), "--strategy", "random", "--seed", "1", "--write", "--accept-unconfirmed"]) == 0
    assert f"TILE_N = {result['best']['config']['TILE_N']}  # moving" in kernel.read_text()


def test_clear_errors(tmp_path, capsys):
    kernel = tmp_path / "gemm.c"
    kernel.write_text((ROOT / "examples/gemmini/gemm_64.c").read_text())
    assert main(["tune", str(kernel)]) == 2  # no tunables: exit 2 with how to declare some
    assert "autocomp: tune TI in" in capsys.readouterr().err
    assert main(["tune", str(tmp_path / "missing.c")]) == 2
    with pytest.raises(SystemExit):
        main(["tune", str(kernel), "--strategy", "anneal"])
