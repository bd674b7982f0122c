"""Tests of the Slurm job description: its exact submit request and its validation.

The generated batch script is run for real in ``test_slurm_batch``.
"""

from __future__ import annotations

import sys

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import batch, script

PY = sys.executable
DEFAULT_PATH = script.DEFAULT_PATH


def make(**overrides) -> script.JobDescription:
    fields = dict(
        run_key="run-1",
        partition="spot",
        working_directory="/home/alice/runs",
        command=["python", "-m", "vsp.examples.trainer", "--steps", "100"],
    )
    fields.update(overrides)
    return script.JobDescription(**fields)


# ----- the request ----------------------------------------------------------------------------


def test_to_request_is_the_exact_v0042_body():
    desc = make(
        environment={"WANDB_MODE": "offline", "MSG": "a b=c"},
        nodes=2,
        tasks_per_node=8,
        gpus_per_node=8,
        cpus_per_task=4,
        time_limit_minutes=120,
        standard_output="/home/alice/runs/%j.out",
        standard_error="/home/alice/runs/%j.err",
        account="ml",
        qos="normal",
        warning_signal="USR1",
        warning_seconds=90,
        extra_fields={"memory_per_node": {"set": True, "infinite": False, "number": 4096}},
    )
    assert desc.to_request() == {
        "job": {
            "name": "run-1",
            "comment": "vsp-run-key=run-1",
            "partition": "spot",
            "account": "ml",
            "qos": "normal",
            "current_working_directory": "/home/alice/runs",
            "standard_output": "/home/alice/runs/%j.out",
            "standard_error": "/home/alice/runs/%j.err",
            "environment": [
                "WANDB_MODE=offline",
                "MSG=a b=c",
                f"PATH={DEFAULT_PATH}",
                "VSP_RUN_KEY=run-1",
            ],
            "minimum_nodes": 2,
            "maximum_nodes": 2,
            "tasks_per_node": 8,
            "tasks": 16,
            "cpus_per_task": 4,
            "tres_per_node": "gres/gpu:8",
            "time_limit": {"set": True, "infinite": False, "number": 120},
            "requeue": True,
            "open_mode": ["APPEND"],
            "kill_warning_signal": "USR1",
            "kill_warning_delay": {"set": True, "infinite": False, "number": 90},
            "kill_warning_flags": ["BATCH_JOB"],
            "memory_per_node": {"set": True, "infinite": False, "number": 4096},
            "script": desc.batch_script(),
        }
    }


def test_minimal_request_omits_unset_optional_fields():
    job = make(requeue=False).to_request()["job"]
    assert set(job) == {
        "name",
        "comment",
        "partition",
        "current_working_directory",
        "environment",
        "minimum_nodes",
        "maximum_nodes",
        "tasks_per_node",
        "tasks",
        "requeue",
        "open_mode",
        "script",
    }
    assert job["requeue"] is False and job["open_mode"] == ["APPEND"]
    assert job["environment"] == [f"PATH={DEFAULT_PATH}", "VSP_RUN_KEY=run-1"]


def test_user_path_and_run_key_variables_are_kept():
    env = make(environment={"PATH": "/opt/bin", "VSP_RUN_KEY": "mine"}).environment_list()
    assert env == ["PATH=/opt/bin", "VSP_RUN_KEY=mine"]


def test_legacy_v0038_request_shape():
    desc = make(time_limit_minutes=5, warning_signal="B:USR1@30", environment={"FOO": "bar"})
    request = desc.to_request("v0.0.38")
    assert request["script"] == desc.batch_script(warning_reaches_batch=False)
    job = request["job"]
    assert job["environment"] == {"FOO": "bar", "PATH": DEFAULT_PATH, "VSP_RUN_KEY": "run-1"}
    assert job["time_limit"] == 5
    assert job["signal"] == "USR1@30"  # v0.0.38 rejects the B: prefix
    assert job["open_mode"] == "append"  # a word in v0.0.38, a flag list in v0.0.42
    assert "kill_warning_signal" not in job and "script" not in job


@pytest.mark.parametrize(
    "spec, word, seconds",
    [("USR1", "USR1", 60), ("SIGUSR2", "USR2", 60), ("usr1@30", "USR1", 30), ("10", "USR1", 60)],
)
def test_warning_signal_forms(spec, word, seconds):
    desc = make(warning_signal=spec, time_limit_minutes=10)
    assert (desc.warning_signal, desc.warning_seconds) == (word, seconds)


def test_warning_signal_is_forwarded_by_the_script():
    assert "trap '_vsp_forward USR2' USR2" in make(warning_signal="USR2").batch_script()


def test_script_mode_request_runs_bash_with_the_text():
    desc = make(command=None, script="echo 'hi'\n")
    assert "exec -- /bin/bash -c 'echo '\"'\"'hi'\"'\"'\n' vsp-payload" in desc.batch_script()


def test_unknown_version_form_is_a_user_error():
    with pytest.raises(errors.UserError, match="v0.0.N"):
        make().to_request("0.0.42")


# ----- validation -----------------------------------------------------------------------------


def test_every_problem_is_reported_with_field_value_and_fix():
    with pytest.raises(errors.SpecValidationError) as caught:
        make(
            run_key="bad key",
            partition="",
            working_directory="relative/dir",
            nodes=0,
            gpus_per_node=-1,
            requeue="yes",
            environment={"1BAD": "x", "GOOD": 5},
            warning_signal="KILL",
        )
    error = caught.value
    assert error.fields == [
        "run_key",
        "partition",
        "working_directory",
        "nodes",
        "gpus_per_node",
        "requeue",
        "warning_signal",
        "environment['1BAD']",
        "environment['GOOD']",
    ]
    text = str(error)
    assert "run_key = 'bad key': is not a valid run key. Fix: use 1-128 characters" in text
    assert "working_directory = 'relative/dir'" in text and "Fix: pass a directory" in text
    assert "nodes = 0: must be an integer >= 1" in text


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"command": None}, "command"),
        ({"script": "echo hi"}, "command"),
        ({"command": []}, "command"),
        ({"command": "python train.py"}, "command"),
        ({"command": ["python", "a\0b"]}, "command"),
        ({"command": None, "script": "  "}, "script"),
        (
            {"time_limit_minutes": 1, "warning_signal": "USR1", "warning_seconds": 60},
            "warning_seconds",
        ),
        ({"warning_signal": "USR1@abc"}, "warning_seconds"),
        ({"warning_seconds": 70000}, "warning_seconds"),
        ({"cpus_per_task": True}, "cpus_per_task"),
        ({"account": "has space"}, "account"),
        ({"standard_output": "a\nb"}, "standard_output"),
        ({"extra_fields": {"script": "x"}}, "extra_fields"),
        ({"environment": {"A-B": "x"}}, "environment['A-B']"),
        ({"environment": {"A": "nul\0"}}, "environment['A']"),
    ],
)
def test_invalid_inputs_name_the_field(overrides, field):
    with pytest.raises(errors.SpecValidationError) as caught:
        make(**overrides)
    assert field in caught.value.fields


def test_unknown_extra_field_is_refused_with_the_closest_names():
    with pytest.raises(errors.SpecValidationError) as caught:
        make(extra_fields={"kill_on_node_fial": True, "script": "x"})
    assert caught.value.fields == ["extra_fields", "extra_fields['kill_on_node_fial']"]
    (problem,) = [p for p in caught.value.problems if p.value == "kill_on_node_fial"]
    assert "not a field of Slurm's v0.0.42 job description" in problem.problem
    assert "closest: 'kill_on_node_fail'" in problem.fix and "drop the key" in problem.fix
    nothing_close = make_problems(extra_fields={"zzzz": 1})
    assert nothing_close[0].field == "extra_fields['zzzz']"
    assert "closest" not in nothing_close[0].fix and "job_fields" in nothing_close[0].fix


def test_known_extra_fields_pass_as_given():
    extra = {"kill_on_node_fail": False, "constraints": "a100", "mail_type": ["END"]}
    job = make(extra_fields=extra).to_request()["job"]
    assert {k: job[k] for k in extra} == extra


def make_problems(**overrides) -> list[errors.SpecProblem]:
    with pytest.raises(errors.SpecValidationError) as caught:
        make(**overrides)
    return caught.value.problems


def test_environment_values_may_hold_anything_but_nul():
    hostile = '\'; rm -rf / #\n$(reboot) `id` "x" ü'
    env = make(environment={"HOSTILE": hostile}).environment_list()
    assert env[0] == f"HOSTILE={hostile}"


def test_oversized_request_is_refused_with_size_and_fix():
    with pytest.raises(errors.SpecValidationError) as caught:
        make(command=None, script="#" * 1_000_000)
    text = str(caught.value)
    assert caught.value.fields == ["script"]
    assert "bytes" in text and "under 1 MB" in text and "shared storage" in text


def test_render_refuses_nul_and_missing_payload():
    with pytest.raises(ValueError):
        batch.render(["a\0"])
    with pytest.raises(ValueError):
        batch.render()


@pytest.mark.parametrize(
    "name", ["BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE", "BASH_FUNC_f"]
)
def test_variables_that_steer_the_shell_are_refused(name):
    with pytest.raises(errors.SpecValidationError) as caught:
        make(environment={name: "x"})
    assert caught.value.fields == [f"environment[{name!r}]"]
    assert "changes how the job's shell runs" in str(caught.value)
