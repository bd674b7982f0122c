"""The training step's parameters are checked (types, bounds, names) before anything is sent.

Found by a fault campaign: a bad environment variable name reached Slurm only after the
cluster was created; ``fallback_after_preemptions=-3`` moved a healthy Spot job to on-demand;
``poll_seconds=-1`` polled without pause; ``environment=None`` ended in an AttributeError.
"""

from __future__ import annotations

import types

import pytest

from vsp.components import catalog
from vsp.components.runtime.core import errors, step
from vsp.components.runtime.training import options_check

GOOD = {
    "command": ["python", "-m", "train"],
    "working_directory": "/home/me/run",
    "environment": {"SEED": "7"},
    "nodes": 1,
    "gpus_per_node": 8,
    "time_limit_minutes": 0,
    "max_preemptions": 10,
    "max_user_failures": 0,
    "fallback_after_preemptions": 5,
    "capacity_wait_seconds": 3600.0,
    "poll_seconds": 20.0,
    "spot_price_per_node_hour": 35.4,
    "ondemand_price_per_node_hour": 88.49,
}


def test_good_parameters_pass():
    assert options_check.problems(**GOOD) == []


@pytest.mark.parametrize(
    ("field", "value", "reported_field", "text"),
    [
        ("fallback_after_preemptions", -3, "fallback_after_preemptions", "from 0 to 10000"),
        ("poll_seconds", -1, "poll_seconds", "must be a number from 0.1 to 3600"),
        ("poll_seconds", float("nan"), "poll_seconds", "from 0.1 to 3600"),
        ("max_preemptions", 2.5, "max_preemptions", "must be a whole number"),
        ("max_preemptions", "abc", "max_preemptions", "must be a whole number"),
        ("nodes", 0, "nodes", "from 1 to 1024"),
        ("nodes", True, "nodes", "whole number"),
        ("capacity_wait_seconds", float("inf"), "capacity_wait_seconds", "a number"),
        ("environment", {"1BAD": "x"}, "environment['1BAD']", "not a valid variable name"),
        ("environment", {"BASH_ENV": "/x"}, "environment['BASH_ENV']", "changes how"),
        ("environment", None, "environment", "must be a mapping"),
        ("command", [], "command", "non-empty list of strings"),
        ("command", "python train.py", "command", "non-empty list of strings"),
        ("command", ["python", "train.py", "--steps", 300], "command[3]", "is int, not a string"),
        # As a pipeline's JSON brings it: the fix quotes what the user typed, not 30.0.
        ("command", ["python", "t.py", "--steps", 30.0], "command[3]", 'quote it, e.g. "30".'),
        ("command", ["python", "t.py", "--lr", 0.5], "command[3]", 'quote it, e.g. "0.5".'),
        ("command", ["python", "a\0b"], "command[1]", "NUL character"),
        # Found by a user: the job's own check refused it only after the cluster was created.
        ("command", [""], "command[0]", "is blank: the first item is the program"),
        ("command", ["  ", "train.py"], "command[0]", "is blank"),
        ("working_directory", "run", "working_directory", "absolute path"),
        ("working_directory", 3, "working_directory", "absolute path"),
        ("working_directory", "/home/x\nEOF", "working_directory", "on one line"),
    ],
)
def test_each_bad_value_is_named_with_its_fix(field, value, reported_field, text):
    found = options_check.problems(**{**GOOD, field: value})
    assert [p.field for p in found] == [reported_field]
    assert text in f"{found[0].problem} {found[0].fix}"


def test_huge_values_are_cut_in_messages():
    with pytest.raises(errors.SpecValidationError) as caught:
        options_check.check_training(**{**GOOD, "command": "x" * 100_000})
    assert len(str(caught.value)) < 1000
    assert "..." in str(caught.value)


def test_the_component_refuses_wrong_types_cleanly_before_any_request(tmp_path, monkeypatch):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "127.0.0.1:9")  # nothing may be sent
    # The step's own logging setup would stop log propagation for the rest of this process.
    monkeypatch.setattr(step, "configure_logging", lambda: None)
    output = types.SimpleNamespace(path=str(tmp_path / "out"), metadata={})
    with pytest.raises(SystemExit) as exited:
        catalog.declarations()["train_on_cluster"](
            project="test-project", location="us-central1", cluster_id="c1",
            command=["python"], working_directory="/home/me/run",
            model_dir="/gcs/bucket/model", gcp_resources=str(tmp_path / "gcp_resources"),
            metrics=output, report=output, environment=None, poll_seconds=-1,
        )  # fmt: skip
    assert exited.value.code == errors.EXIT_USER_ERROR == 2
