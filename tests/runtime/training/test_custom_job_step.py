"""Spot CustomJob training end to end against the emulator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import requests

from vsp.components.runtime.core import errors, gcs_paths, polling
from vsp.components.runtime.steps import train_custom_job
from vsp.components.runtime.training.backends.custom_job_spec import CustomJobTraining

PROJECT, LOCATION = "test-project", "us-central1"
POLL = polling.Backoff(initial=0.1, maximum=0.15, jitter=0)
TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--seed", "5", "--samples", "256"]


@pytest.fixture
def emulator(emulator_factory, tmp_path, monkeypatch):
    server = emulator_factory(
        custom_job_queue_delay_seconds=0.05,
        custom_job_pending_delay_seconds=0.8,
        custom_job_preempt_notice_seconds=0.3,
        custom_job_kill_wait_seconds=0.3,
    )
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(server.state_dir / "gcs"))
    yield server
    server.app.custom_jobs.shutdown()


def spec(steps: int, **changes) -> CustomJobTraining:
    return CustomJobTraining(
        **{
            "display_name": "spot",
            "base_output_directory": "gs://bucket/runs/r1",
            "machine_type": "n1-standard-8",
            "container_image": "python:3.11-slim",
            "command": [*TRAINER, "--steps", str(steps), "--step-seconds", "0.05"],
            **changes,
        }
    )


def train(training, **options):
    return train_custom_job.train_custom_job(
        project=PROJECT,
        location=LOCATION,
        training=training,
        run_key=options.pop("run_key", "run-1"),
        poll_backoff=POLL,
        timeout_seconds=180,
        **options,
    )


def creates(emulator):
    return [
        e for e in emulator.journal() if e["method"] == "POST" and e["path"].endswith("/customJobs")
    ]


@pytest.mark.slow
def test_eight_preemptions_need_two_jobs_and_end_bit_identical(emulator, tmp_path):
    emulator.app.custom_jobs.set_preemption_plan(mode="fixed", after_seconds=1.2, max_count=8)
    outcome = train(spec(240), max_preemptions=10)
    assert outcome.metrics["preemptions"] == 8
    assert outcome.metrics["attempts"] == 2
    assert [a.outcome.value for a in outcome.result.attempts] == ["PREEMPTED", "SUCCEEDED"]
    assert len(creates(emulator)) == 2
    trained = gcs_paths.to_local_path("gs://bucket/runs/r1/model/") / "model.npz"
    reference = tmp_path / "reference"
    env = {
        **os.environ,
        "VSP_CHECKPOINT_DIR": str(reference / "ckpt"),
        "VSP_MODEL_DIR": str(reference / "model"),
    }
    done = subprocess.run([*TRAINER, "--steps", "240"], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert trained.read_bytes() == (reference / "model" / "model.npz").read_bytes()


@pytest.mark.slow
def test_capacity_deadline_falls_back_to_standard(emulator):
    emulator.update_settings(custom_job_spot_no_capacity=True)
    outcome = train(spec(5), fallback_strategy="STANDARD", capacity_wait_seconds=1.0)
    strategies = [c["body"]["jobSpec"]["scheduling"]["strategy"] for c in creates(emulator)]
    assert strategies == ["SPOT", "STANDARD"]
    cancels = [e for e in emulator.journal() if e["path"].endswith(":cancel")]
    assert len(cancels) == 1
    assert outcome.result.attempts[0].detail.startswith("switch: no Spot capacity")


@pytest.mark.slow
def test_trainer_failure_is_not_resubmitted_beyond_its_budget(emulator):
    crash = CustomJobTraining(
        display_name="crash",
        base_output_directory="gs://bucket/runs/crash",
        machine_type="n1-standard-8",
        container_image="python:3.11-slim",
        command=[sys.executable, "-c", "raise SystemExit(4)"],
    )
    with pytest.raises(errors.UserError, match=r"the trainer failed \(exit code 4, FAILED The "):
        train(crash)  # the code from Vertex's message: a CustomJob has no exit code field
    assert len(creates(emulator)) == 1


@pytest.mark.slow
def test_retried_step_reattaches_to_its_job(emulator):
    emulator.app.custom_jobs.set_preemption_plan(mode="fixed", after_seconds=30, max_count=1)
    first = train(spec(5), run_key="run-2")
    again = train(spec(5), run_key="run-2")
    assert again.result.reattached and again.result.job_ids == first.result.job_ids
    assert len(creates(emulator)) == 1


STEP = """
import sys
import time
from vsp.components.runtime.steps import train_custom_job
from vsp.components.runtime.core import polling, step
from vsp.components.runtime.training.backends.custom_job_spec import CustomJobTraining
step.configure_logging()
training = CustomJobTraining(
    display_name="cancel", base_output_directory="gs://bucket/runs/cancel",
    machine_type="n1-standard-8", container_image="python:3.11-slim",
    command=[sys.executable, "-m", "vsp.examples.trainer",
             "--steps", "400", "--step-seconds", "0.05"])
step.run_step("train", lambda: train_custom_job.train_custom_job(
    project="test-project", location="us-central1", training=training, run_key="run-c",
    poll_backoff=polling.Backoff(initial=0.1, maximum=0.2, jitter=0)))
"""


@pytest.mark.slow
def test_sigterm_cancels_the_custom_job(emulator):
    step_process = subprocess.Popen(
        [sys.executable, "-c", STEP],
        env=dict(os.environ),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not _running(emulator):
        assert time.monotonic() < deadline, "the job never ran"
        time.sleep(0.1)
    step_process.send_signal(signal.SIGTERM)
    output, _ = step_process.communicate(timeout=30)
    assert step_process.returncode == 143, output
    cancels = [e for e in emulator.journal() if e["path"].endswith(":cancel")]
    assert len(cancels) == 1, output
    job_path = cancels[0]["path"].removesuffix(":cancel")
    deadline = time.monotonic() + 10
    while requests.get(f"http://{emulator.address}{job_path}").json()["state"] != (
        "JOB_STATE_CANCELLED"
    ):
        assert time.monotonic() < deadline
        time.sleep(0.1)


def _running(emulator) -> bool:
    listing = requests.get(
        f"http://{emulator.address}/v1/projects/{PROJECT}/locations/{LOCATION}/customJobs"
    ).json()
    return any(j.get("state") == "JOB_STATE_RUNNING" for j in listing.get("customJobs", []))


CONTRACT_PROBE = """
import json, os, pathlib
from vsp.components.runtime.core import gcs_paths
names = ("VSP_CHECKPOINT_DIR", "VSP_MODEL_DIR", "VSP_ATTEMPT", "VSP_RUN_KEY",
         "AIP_CHECKPOINT_DIR", "AIP_MODEL_DIR")
model = gcs_paths.to_local_path(os.environ["VSP_MODEL_DIR"])
model.mkdir(parents=True, exist_ok=True)
(model / "env.json").write_text(json.dumps({n: os.environ.get(n) for n in names}))
"""


def test_a_custom_job_gets_the_trainer_contract_variables(emulator):
    # A trainer written to the contract reads VSP_CHECKPOINT_DIR and VSP_MODEL_DIR on a
    # CustomJob too: the same directories as Vertex's AIP_* variables.
    outcome = train(spec(1, command=[sys.executable, "-c", CONTRACT_PROBE]), run_key="run-env")
    assert [a.outcome.value for a in outcome.result.attempts] == ["SUCCEEDED"]
    seen = json.loads(
        (gcs_paths.to_local_path("gs://bucket/runs/r1/model/") / "env.json").read_text()
    )
    assert seen == {
        "VSP_CHECKPOINT_DIR": "gs://bucket/runs/r1/checkpoints/",
        "VSP_MODEL_DIR": "gs://bucket/runs/r1/model/",
        "VSP_ATTEMPT": "0",
        "VSP_RUN_KEY": "run-env",
        "AIP_CHECKPOINT_DIR": "gs://bucket/runs/r1/checkpoints/",
        "AIP_MODEL_DIR": "gs://bucket/runs/r1/model/",
    }
