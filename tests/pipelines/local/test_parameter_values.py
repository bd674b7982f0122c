"""A parameter value holding the word python3 reaches the step as given (kfp.local rewrites it)."""

from __future__ import annotations

import json
import pathlib

import pytest
from kfp.local import subprocess_task_handler as handler

from tests.pipelines.local import run_arguments
from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import parameter_values

EXECUTOR_INPUT = json.dumps({"inputs": {"parameterValues": {"model_dir": "gs://b/python3/m"}}})
LAUNCHER = 'sh -c "python3 -m pip install kfp" && python3 -m kfp.dsl.executor_main "$@"'


def test_the_executor_input_is_kept_and_the_launcher_still_rewritten():
    command = ["sh", "-c", LAUNCHER, "--executor_input", EXECUTOR_INPUT, "--function_to_execute"]
    original = handler.replace_python_executable
    assert original(command, "/venv/bin/python")[4] != EXECUTOR_INPUT  # kfp.local's own rewrite
    with parameter_values.kept_as_given():
        replaced = handler.replace_python_executable(command, "/venv/bin/python")
    assert replaced == [
        "sh",
        "-c",
        LAUNCHER.replace("python3", "/venv/bin/python"),
        "--executor_input",
        EXECUTOR_INPUT,
        "--function_to_execute",
    ]
    assert handler.replace_python_executable is original  # restored


@pytest.mark.slow
def test_a_model_dir_with_python3_in_it_is_where_the_model_is_registered(tmp_path, monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    model_dir = str(pathlib.Path(arguments["model_dir"]).parent / "python3-models" / "m1")
    arguments["command"] = [*arguments["command"][:3], "--steps", "20", "--step-seconds", "0.02"]
    arguments = run_arguments.with_overrides(arguments, model_dir=model_dir)
    result = run_arguments.run_main(tmp_path, arguments, in_process=True)
    assert result.succeeded, result.error
    assert (pathlib.Path(model_dir) / "model.npz").is_file()
    [upload] = [e for e in result.journal if e["path"].endswith("/models:upload")]
    assert upload["body"]["model"]["artifactUri"].endswith("/python3-models/m1")
