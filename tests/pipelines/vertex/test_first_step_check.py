"""`vsp submit` and `vsp schedule` run the pipeline's first step's check before sending."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from tests.pipelines.cluster_place import PLACE_PARAM
from vsp.pipelines.cli import main
from vsp.pipelines.definitions import slurm_spot_training
from vsp.pipelines.local import run
from vsp.pipelines.vertex import first_step_check

TEMPLATE = str(run.COMPILED_DIR / "pipelines" / "slurm_spot_training.yaml")
LOC = ["--project", "test-project", "--location", "us-central1"]
GOOD = [
    'command=["python3"]', "working_directory=/home/r", "model_dir=gs://b/m", "model_id=m",
    "serving_image=i", "project=test-project", PLACE_PARAM,
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
    group = 'training_options={"environment": {"1BAD": "x"}, "poll_seconds": -1}'
    result = submit(group, "failure_keep_minutes=1e30")
    assert result.exit_code == 2, result.output
    assert "environment['1BAD'] = '1BAD': is not a valid variable name." in result.output
    assert "poll_seconds = -1" in result.output
    assert "failure_keep_minutes" in result.output
    assert "dry run" not in result.output


def test_an_unknown_name_in_a_group_is_refused_with_the_names_it_takes():
    result = submit('training_options={"max_preemption": 3, "checkpoint_dir": "/home/r/c"}')
    assert result.exit_code == 2, result.output
    assert (
        "training_options.max_preemption = 3: is not known. Fix: did you mean 'max_preemptions'? "
        "Else use one of " in result.output
    )
    assert "max_preemptions" in result.output and "dry run" not in result.output


def test_a_group_parameter_given_alone_is_named_with_its_group():
    result = submit("checkpoint_dir=/home/r/c")
    assert result.exit_code == 2, result.output
    assert "Is not a parameter of the pipeline but of training_options." in result.output
    assert """--param 'training_options={"checkpoint_dir": ...}'""" in result.output


def test_a_good_dry_run_says_it_was_checked():
    result = submit()
    assert result.exit_code == 0, result.output
    assert "checked: the parameters pass the pipeline's first step" in result.stderr
    assert json.loads(result.stdout)["runtimeConfig"]["parameterValues"]["model_id"] == "m"


def test_a_dry_run_refuses_each_group_value_its_component_would():
    result = submit(
        'cluster_options={"slurm_config": "x"}',
        'training_options={"log_directory": "/home/r/logs\\nx"}',
        'model_options={"labels": ["a"]}',
        'teardown_options={"interval_hours": 1000000000000000.0}',
        "model_dir=gs://b/run/../../other/model",
        "schedule_cron=0 0 30 2 *",
    )
    assert result.exit_code == 2, result.output
    for text in (
        "cluster_options.slurm_config = 'x': is not a dict.",
        "training_options.log_directory = '/home/r/logs\\nx': holds a line break or NUL.",
        "model_options.labels = ['a']: is not a dict.",
        "teardown_options.interval_hours = 1000000000000000.0: must be a number of hours from 0",
        "model_dir = 'gs://b/run/../../other/model': has a '.' or '..' segment.",
    ):
        assert text in result.output
    assert "dry run" not in result.output
    # The cron is checked after the values' shapes: alone, it is refused too.
    alone = submit("schedule_cron=0 0 30 2 *")
    assert alone.exit_code == 2 and "names a date that never comes" in alone.output


def test_no_group_of_the_slurm_pipeline_may_set_a_pipeline_parameter_again():
    spec = yaml.safe_load(open(TEMPLATE))
    inputs = set(spec["root"]["inputDefinitions"]["parameters"])
    groups = set(slurm_spot_training.OPTION_GROUPS)
    assert slurm_spot_training.TOP_LEVEL == inputs - groups - {"teardown_policy"}
    names = first_step_check.check_task_inputs(spec, {})["option_names"]
    assert set(names) == groups
    for group, allowed in names.items():
        assert allowed and not set(allowed) & slurm_spot_training.BOUND, group
    assert "timeout_seconds" in names["training_options"]
    result = submit('training_options={"command": ["python3", "x.py"]}')
    assert result.exit_code == 2, result.output
    assert "Fix: set the pipeline parameter command." in " ".join(result.output.split())
