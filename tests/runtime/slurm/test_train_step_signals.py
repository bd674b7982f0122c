"""The training step under signals: a cancel (SIGTERM) ends its job, bounded even when the
service is silent, and interrupts a held pull; a killed step's rerun reattaches to its job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.runtime.slurm.test_train_step import CLUSTER, SUBMIT, slurm_calls


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster(CLUSTER)


STEP = """
import os, sys
from vsp.components.runtime.core import polling, step
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training import poll_plan, progress_feed
from vsp.components.runtime.training.backends import slurm
step.configure_logging()
work, topic = sys.argv[1], sys.argv[2]
ckpt = os.environ["VSP_GCS_FUSE_ROOT"] + "/bucket/ckpt" if topic else work + "/ckpt"
push = {"progress_topic": topic, "poll_settings": poll_plan.PlanSettings.for_poll_seconds(0.4),
        "feed_settings": progress_feed.FeedSettings(pull_seconds=120)} if topic else {}
spec = slurm.SlurmTraining(
    command=[sys.executable, "-m", "vsp.examples.trainer",
             "--steps", "400", "--step-seconds", "0.05"],
    working_directory=work, checkpoint_dir=ckpt, model_dir=work + "/model")
step.run_step("train", lambda: train_on_cluster.train_on_cluster(
    project="test-project", location="us-central1", cluster_id="llmtrain", training=spec,
    spot_partition="spot", run_key="run-x", gcp_resources_path=work + "/gcp_resources",
    poll_backoff=polling.Backoff(initial=0.1, maximum=0.2, jitter=0), **push))
"""


def _start_step(tmp_path, topic=""):
    return subprocess.Popen(
        [sys.executable, "-c", STEP, str(tmp_path / "shared"), topic],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_running(cluster, count=1):
    deadline = time.monotonic() + 30
    while True:
        jobs = cluster.app.slurm.jobs(CLUSTER)
        if len(jobs) >= count and any("RUNNING" in json.dumps(j) for j in jobs):
            return jobs
        assert time.monotonic() < deadline, "no job started"
        time.sleep(0.1)


def test_cancel_sends_delete_and_the_job_ends_cancelled(cluster, tmp_path):
    step_process = _start_step(tmp_path)
    _wait_running(cluster)
    step_process.send_signal(signal.SIGTERM)
    output, _ = step_process.communicate(timeout=30)
    assert step_process.returncode == 143, output
    deletes = [
        e
        for e in slurm_calls(cluster, "/slurm/v0.0.42/job/")
        if e["body"]["method"] == "HTTP_METHOD_DELETE"
    ]
    assert len(deletes) == 1, output
    deadline = time.monotonic() + 10
    while "CANCELLED" not in json.dumps(cluster.app.slurm.jobs(CLUSTER)):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def test_a_cancel_against_a_service_gone_silent_ends_within_its_bound(cluster, tmp_path):
    # Its requests were retried for minutes while the step ignored further signals (the local
    # run that started it, and the emulator with it, had been killed).
    bounded = STEP.replace(
        "step.configure_logging()",
        "step.configure_logging()\n"
        "from vsp.components.runtime.training import cancel_run\n"
        "cancel_run.CANCEL_SECONDS = 3.0",
    )
    step_process = subprocess.Popen(
        [sys.executable, "-c", bounded, str(tmp_path / "shared"), ""],
        env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    _wait_running(cluster)
    cluster.stop()  # no answer from here on: connections refused
    started = time.monotonic()
    step_process.send_signal(signal.SIGTERM)
    output, _ = step_process.communicate(timeout=60)
    assert step_process.returncode == 143, output
    assert time.monotonic() - started < 15, output


def test_cancel_interrupts_a_held_pull_and_the_subscription_is_deleted(
    cluster, tmp_path, monkeypatch
):
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(tmp_path / "gcs"))
    cluster.app.update_settings(pubsub_pull_hold_seconds=60.0)
    topic = "projects/test-project/topics/progress"
    step_process = _start_step(tmp_path, topic)
    _wait_running(cluster)
    deadline = time.monotonic() + 30
    while not any(e["path"].endswith(":pull") for e in cluster.journal()):
        assert time.monotonic() < deadline, "the step never pulled"
        time.sleep(0.1)
    time.sleep(0.5)  # inside a pull the emulator holds for 60 s
    started = time.monotonic()
    step_process.send_signal(signal.SIGTERM)
    output, _ = step_process.communicate(timeout=50)
    assert step_process.returncode == 143, output
    assert time.monotonic() - started < 20, output  # not at the end of the 60 s hold
    assert "CANCELLED" in json.dumps(cluster.app.slurm.jobs(CLUSTER)) or any(
        e["body"]["method"] == "HTTP_METHOD_DELETE"
        for e in slurm_calls(cluster, "/slurm/v0.0.42/job/")
    )
    # The journal logs a call when it ends: the held pull, answered once its subscription is
    # gone, can be logged after the delete. The delete is the last call to arrive.
    subscriptions = [e for e in cluster.journal() if "/subscriptions/" in e["path"]]
    last = max(subscriptions, key=lambda e: e["time"])
    assert (last["method"], last["status"]) == ("DELETE", 200), subscriptions


@pytest.mark.slow
def test_killed_step_reattaches_to_the_running_job_when_rerun(cluster, tmp_path):
    first = _start_step(tmp_path)
    _wait_running(cluster)
    first.kill()
    first.communicate(timeout=10)
    second = _start_step(tmp_path)
    output, _ = second.communicate(timeout=60)
    assert second.returncode == 0, output
    assert "found 1 earlier attempt(s) of run run-x" in output
    assert len(slurm_calls(cluster, SUBMIT)) == 1
