"""Jobs an earlier `vsp run-local` left unfinished in its state folder (it was killed) are
cancelled when the next run starts the emulator there, and the run says so."""

from __future__ import annotations

import logging
import os
import time

import requests

from tests.conftest import SLURM_SETTINGS
from vsp.pipelines.local import emulator_session
from vsp.vertex_emulator.slurm.testing import SlurmTestClient

PARENT = "projects/local-project/locations/us-central1"
SESSION_LOGGER = "vsp.pipelines.local.emulator_session"


def _custom_job(base_url: str) -> str:
    spec = {
        "workerPoolSpecs": [
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": 1,
                "containerSpec": {"imageUri": "gcr.io/x/y:1", "command": ["sleep", "30"]},
            }
        ],
        "scheduling": {"strategy": "SPOT"},
    }
    body = {"displayName": "train", "jobSpec": spec}
    created = requests.post(f"{base_url}/v1/{PARENT}/customJobs", json=body, timeout=5)
    assert created.status_code == 200, created.text
    return created.json()["name"]


def _wait(read, condition, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not condition(value := read()):
        assert time.monotonic() < deadline, f"still {value}"
        time.sleep(0.05)
    return value


def test_jobs_a_killed_run_left_are_cancelled_not_requeued(
    slurm_emulator_factory, cluster_body, tmp_path, caplog, monkeypatch
):
    state = tmp_path / "state"
    first = slurm_emulator_factory(state)
    slurm = SlurmTestClient.create_cluster(first.base_url, "vsplocal", cluster_body)
    job_id = slurm.submit("#!/bin/bash\nsleep 30\n", requeue=True)
    slurm.wait_state(job_id, "RUNNING")
    custom = _custom_job(first.base_url)
    _wait(
        lambda: requests.get(f"{first.base_url}/v1/{custom}", timeout=5).json()["state"],
        lambda s: s == "JOB_STATE_RUNNING",
    )
    # The run dies: its emulator stops serving and its job processes go (the orphan guard's
    # work), while the stored jobs still say they run.
    first.stop()
    first.app.slurm.shutdown()
    first.app.custom_jobs.shutdown()
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)

    caplog.set_level(logging.WARNING, logger=SESSION_LOGGER)
    with emulator_session.emulator_for_run(str(state), SLURM_SETTINGS):
        address = os.environ["VERTEX_EMULATOR_HOST"]
        again = SlurmTestClient(f"http://{address}", slurm.cluster_name)
        ended = again.wait_state(job_id, "CANCELLED")
        assert ended["restart_cnt"] == 0  # not requeued as a lost node's job
        ongoing = ("JOB_STATE_RUNNING", "JOB_STATE_CANCELLING")
        custom_state = _wait(
            lambda: requests.get(f"http://{address}/v1/{custom}", timeout=5).json()["state"],
            lambda s: s not in ongoing,
        )
        assert custom_state == "JOB_STATE_CANCELLED"
    assert caplog.messages == [
        f"cancelled Slurm job {job_id} on vsplocal: an earlier run in this folder ended without "
        "stopping it, and nothing supervises it now",
        f"cancelled CustomJob {custom.rsplit('/', 1)[-1]}: an earlier run in this folder ended "
        "without stopping it",
    ]


def test_a_folder_without_unfinished_jobs_starts_without_a_word(tmp_path, caplog, monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    caplog.set_level(logging.WARNING, logger=SESSION_LOGGER)
    with emulator_session.emulator_for_run(str(tmp_path / "state"), SLURM_SETTINGS):
        pass
    assert caplog.messages == []
