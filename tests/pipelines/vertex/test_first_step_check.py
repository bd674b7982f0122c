"""`vsp submit` and `vsp schedule` run the pipeline's first step's check before sending."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from vsp.pipelines.cli import main
from vsp.pipelines.local import run
from vsp.pipelines.vertex import first_step_check

TEMPLATE = str(run.COMPILED_DIR / "pipelines" / "slurm_spot_training.yaml")
LOC = ["--project", "test-project", "--location", "us-central1"]
GOOD = [
    'command=["python3"]', "working_directory=/home/r", "checkpoint_dir=/home/r/c",
    "model_dir=gs://b/m", "model_id=m", "serving_image=i", "project=test-project",
]  # fmt: skip


def submit(*params: str, dry_run: bool = True):
    args = ["submit", *LOC, "--template", TEMPLATE, "--pipeline-root", "gs://bucket/root"]
    for param in (*GOOD, *params):
        args += ["--param", param]
    return CliRunner().invoke(main.main, [*args, *(["--dry-run"] if dry_run else [])])


def test_the_check_task_inputs_come_from_parameters_defaults_and_constants():
    spec = yaml.safe_load(open(TEMPLATE))
    params = first_step_check.check_task_inputs(spec, {"model_id": "m", "nodes": 3})
    assert params["model_id"] == "m" and params["nodes"] == 3
    assert params["spot_max_nodes"] == 2 and isinstance(params["spot_max_nodes"], int)
    assert params["check_training"] is True and params["check_teardown"] is True


def test_a_dry_run_refuses_what_the_first_step_would(monkeypatch):
    result = submit("environment={1BAD: x}", "poll_seconds=-1", "failure_keep_minutes=1e30")
    assert result.exit_code == 2, result.output
    assert "environment['1BAD'] = '1BAD': is not a valid variable name." in result.output
    assert "poll_seconds = -1" in result.output
    assert "failure_keep_minutes" in result.output
    assert "dry run" not in result.output


def test_a_good_dry_run_says_it_was_checked():
    result = submit()
    assert result.exit_code == 0, result.output
    assert "checked: the parameters pass the pipeline's first step" in result.stderr
    assert json.loads(result.stdout)["runtimeConfig"]["parameterValues"]["model_id"] == "m"
