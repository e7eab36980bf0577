"""Executor choice without a cluster: spec validation (CLI flag and editor setting), the
resources a task asks for, and the local executor as the default."""

from __future__ import annotations

import pytest

from autocomp.cli.main import main as cli_main
from autocomp.evaluator import Evaluator
from autocomp.executor import DEVICE_RESOURCES, ExecutorError, LocalExecutor, make_executor, task_resources, validate_spec
from autocomp.server.settings import parse_settings
from autocomp.testing.scripted_backend import ScriptedBackend


@pytest.mark.parametrize("spec", ["local", "ray", "ray://10.0.0.5:10001", "ray://head.cluster:10001"])
def test_valid_specs(spec):
    assert validate_spec(spec) == spec


@pytest.mark.parametrize("spec", ["", "dask", "ray://", "ray://host", "ray://host:port", "http://h:1"])
def test_invalid_specs_say_what_is_allowed(spec):
    with pytest.raises(ExecutorError, match=r"local .*ray .*ray://HOST:PORT"):
        validate_spec(spec or "nonsense")


def test_local_is_the_default():
    assert isinstance(make_executor(None), LocalExecutor)
    assert isinstance(Evaluator(ScriptedBackend({}), None).executor, LocalExecutor)


def test_cli_refuses_a_bad_executor_before_doing_anything(tmp_path, capsys):
    kernel = tmp_path / "k.kern"
    kernel.write_text("kernel gemm {\n  result = 1\n  cost = 10\n}\n")
    status = cli_main(["optimize", str(kernel), "--target", "scripted", "--llm", "openai:x", "--executor", "spark://x"])
    assert status == 2
    assert "executor must be local" in capsys.readouterr().err


def test_editor_setting():
    settings, problems = parse_settings({"autocomp": {"executor": "ray://10.1.2.3:10001"}})
    assert settings.executor == "ray://10.1.2.3:10001" and not problems
    kept, problems = parse_settings({"autocomp.executor": "kubernetes"}, settings)
    assert kept.executor == "ray://10.1.2.3:10001"  # a bad value keeps the previous one
    assert problems and problems[0].startswith("autocomp.executor must be")
    assert parse_settings({})[0].executor == "local"


class _Named:
    settings: dict = {}

    def __init__(self, name):
        self.name = name


def test_task_resources_ask_for_the_device_where_the_cluster_has_it():
    gpu_cluster = {"CPU": 64.0, "GPU": 8.0}
    cpu_cluster = {"CPU": 64.0}
    assert task_resources(_Named("cuda"), gpu_cluster) == {"num_cpus": 1.0, "num_gpus": 1.0}
    assert task_resources(_Named("cuda"), cpu_cluster) == {"num_cpus": 1.0, "num_gpus": 0.0}  # compile tier on CPU workers
    assert task_resources(_Named("nki"), {"CPU": 8.0, "trainium": 2.0}) == {"num_cpus": 1.0, "num_gpus": 0.0, "resources": {"trainium": 1.0}}
    assert task_resources(_Named("gemmini"), {"CPU": 8.0, "gemmini_sim": 4.0})["resources"] == {"gemmini_sim": 1.0}
    assert task_resources(_Named("scripted"), gpu_cluster) == {"num_cpus": 1.0, "num_gpus": 0.0}
    assert DEVICE_RESOURCES == {"cuda": "GPU", "nki": "trainium", "gemmini": "gemmini_sim"}


def test_a_backend_may_declare_its_own_resources():
    class Custom(_Named):
        def executor_resources(self, cluster):
            return {"CPU": 4.0, "fpga": 1.0}

    assert task_resources(Custom("x"), {}) == {"num_cpus": 4.0, "num_gpus": 0.0, "resources": {"fpga": 1.0}}
