"""A signal to the process running a local pipeline reaches its steps, as a Vertex cancel does."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time
import types

import pytest

from vsp.pipelines.local import interrupts

CHILD = """
import pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1])
signal.signal(signal.SIGTERM, lambda *_: (out.write_text("SIGTERM"), sys.exit(0)))
out.write_text("ready")
time.sleep(60)
"""


def _wait_for(path: pathlib.Path, text: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not (path.exists() and path.read_text() == text):
        assert time.monotonic() < deadline, f"{path} never said {text!r}"
        time.sleep(0.05)


def test_the_first_signal_reaches_the_step_and_a_second_stops_at_once(tmp_path):
    mark = tmp_path / "mark"
    step = subprocess.Popen([sys.executable, "-c", CHILD, str(mark)])  # this process group
    try:
        _wait_for(mark, "ready")
        with interrupts.forwarded() as state:
            assert step.pid in interrupts.step_processes()
            os.kill(os.getpid(), signal.SIGTERM)
            _wait_for(mark, "SIGTERM")
            assert (state.signum, state.exit_code, state.name) == (15, 143, "SIGTERM")
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGINT)
        assert step.wait(timeout=10) == 0
    finally:
        step.kill()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # restored


def test_once_cancelled_steps_that_create_or_train_are_not_started():
    from kfp.local import status
    from kfp.local import subprocess_task_handler as handler

    def task(step: str) -> types.SimpleNamespace:
        program = f"from vsp.components.runtime.steps import {step}\n{step}.main()"
        return types.SimpleNamespace(full_command=["sh", "-c", program])

    with interrupts.forwarded():
        os.kill(os.getpid(), signal.SIGINT)
        refused = handler.SubprocessTaskHandler.run(task("train_on_cluster"))
        assert refused == status.Status.FAILURE
    assert interrupts.started_step(task("finalize_cluster").full_command) == "finalize_cluster"
    assert "finalize_cluster" not in interrupts.STARTS
    assert "delete_cluster" not in interrupts.STARTS


def _run_local_in_its_group(tmp_path, out):
    """``vsp run-local --in-process`` from ``tmp_path`` in its own process group (as a shell's
    background job), its output in ``out``; returns once its training job runs."""
    vsp = pathlib.Path(sys.executable).parent / "vsp"  # the entry point pip installed
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("VERTEX_EMULATOR_HOST", None)
    run = subprocess.Popen(
        [str(vsp), "run-local", "--in-process"], cwd=tmp_path, stdout=out.open("w"),
        stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    _wait_for_output(run, out, "train-on-cluster: job 1: RUNNING", 240)
    return run


def _wait_for_output(run, out, text: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while text not in out.read_text():
        assert run.poll() is None, out.read_text()
        assert time.monotonic() < deadline, out.read_text()
        time.sleep(0.05)


@pytest.mark.slow  # a pipeline run on the emulator: about 20 s
def test_sigterm_to_run_local_cancels_the_job_runs_the_exit_task_and_leaves_no_process(tmp_path):
    out = tmp_path / "out.txt"
    run = _run_local_in_its_group(tmp_path, out)
    try:
        os.kill(run.pid, signal.SIGTERM)  # the pid only, as `kill PID` or a CI cancel
        assert run.wait(timeout=120) == 143, out.read_text()
    finally:
        with_group = subprocess.run(["pgrep", "-g", str(run.pid)], capture_output=True)
        left = with_group.stdout.split()
        if run.poll() is None or left:
            os.killpg(run.pid, signal.SIGKILL)
    text = out.read_text()
    assert left == [], text  # no step, no trainer left running
    assert "train-on-cluster: warning: step cancelled: cancelling job 1" in text
    assert "finalize-cluster: succeeded" in text
    assert "register-model: skipped" in text
    assert "error: cancelled by SIGTERM" in text
    journal = [
        json.loads(line)
        for line in (tmp_path / ".vsp" / "emulator" / "journal.jsonl").read_text().splitlines()
    ]
    cancels = [
        e for e in journal
        if (e.get("body") or {}).get("method") == "HTTP_METHOD_DELETE"
        and (e.get("body") or {}).get("path", "").endswith("/job/1")
    ]  # fmt: skip
    assert cancels, "the step did not cancel its Slurm job"


@pytest.mark.slow  # a pipeline run on the emulator: about 15 s
def test_a_second_signal_stops_at_once_and_labels_the_cluster_to_expire(tmp_path):
    # It stopped without the exit task and left the cluster with no expiry, which no reaper
    # deletes; two SIGINTs also exited 143 instead of 130.
    out = tmp_path / "out.txt"
    run = _run_local_in_its_group(tmp_path, out)
    try:
        os.kill(run.pid, signal.SIGINT)
        _wait_for_output(run, out, "Send it again to stop at once", 30)
        os.kill(run.pid, signal.SIGINT)
        assert run.wait(timeout=60) == 130, out.read_text()
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    text = out.read_text()
    assert (
        "run-local: stopped at once, without the exit task; cluster vsplocal is labelled to "
        "expire now" in text
    ), text[-2000:]
    journal = (tmp_path / ".vsp" / "emulator" / "journal.jsonl").read_text().splitlines()
    labelled = [
        entry["body"]["labels"]
        for entry in map(json.loads, journal)
        if entry["method"] in ("POST", "PATCH") and "labels" in (entry["body"] or {})
    ]
    labels = labelled[-1]
    assert labels["vsp-teardown"] == "teardown-failed" and labels["vsp-expires-at"]
    # The run's own claim ends with it: the reaper took it for another run's and kept the
    # cluster 30 minutes more.
    assert any(key.startswith("vsp-lease-") for key in labelled[0]), labelled[0]
    assert not [key for key in labels if key.startswith("vsp-lease-")], labels


STEP = """
import time
from vsp.components.runtime.core import step
def body():
    with step.cancel_on_sigterm():
        time.sleep(60)
step.run_step("probe", body)
"""


def test_a_step_whose_local_run_is_killed_outright_stops_as_a_cancelled_step(tmp_path):
    # After a SIGKILL of vsp run-local its training step polled the dead emulator for 28 min.
    parent = subprocess.Popen(["sleep", "1"])  # not reaped while the probe runs: a zombie
    env = {**os.environ, "VSP_LOCAL_RUN_PID": str(parent.pid)}
    started = time.monotonic()
    probe = subprocess.run(
        [sys.executable, "-c", STEP], env=env, capture_output=True, text=True, timeout=30
    )
    parent.wait()
    assert probe.returncode == 143, probe.stderr
    assert time.monotonic() - started < 10
    assert f"the local run that started this step (pid {parent.pid}) is gone: stopping" in (
        probe.stderr
    )
