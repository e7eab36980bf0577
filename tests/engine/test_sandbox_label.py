"""Every result says how its candidate was isolated; opting out is announced in the run."""

from __future__ import annotations

import json

from autocomp.cli.main import main
from autocomp.testing.fake_llm import FakeLLMServer

from .helpers import KERNEL, halving_rules

FLAGS = ["--target", "scripted", "--iterations", "1", "--beam", "1", "--plans", "1", "--implementations", "1"]


def _events(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_every_evaluation_names_its_isolation(tmp_path, monkeypatch, capsys):
    kernel = tmp_path / "scale.kern"
    kernel.write_text(KERNEL)
    with FakeLLMServer(halving_rules()) as server:
        for key, value in server.env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("AUTOCOMP_SANDBOX", raising=False)
        assert main(["optimize", str(kernel), "--llm", "openai:fake", "--json", *FLAGS]) == 0
        isolated = _events(capsys.readouterr().out)
        monkeypatch.setenv("AUTOCOMP_SANDBOX", "off")
        assert main(["optimize", str(kernel), "--llm", "openai:fake", "--json", *FLAGS]) == 0
        unisolated = _events(capsys.readouterr().out)
    assert not any(e["type"] == "notice" and "sandbox is off" in e["message"] for e in isolated)
    assert any(e["type"] == "notice" and "sandbox is off" in e["message"] for e in unisolated)
    baseline_on = next(e for e in isolated if e["type"] == "baseline_evaluated")
    baseline_off = next(e for e in unisolated if e["type"] == "baseline_evaluated")
    assert "'sandbox': 'bwrap'" in repr(baseline_on) and "'sandbox': 'off'" in repr(baseline_off)
    # An unisolated evaluation is never reused for an isolated run (different cache key).
    assert baseline_off["candidate"]["evaluation"]["sandbox"] == "off"
