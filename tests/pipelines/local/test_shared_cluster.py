"""Two pipeline runs on one cluster: B finishes first and does not delete A's cluster under A.

Both runs are `vsp run-local --in-process` processes against one emulator (as two runs on
Vertex share one service). B reuses the cluster A created, trains its own job, and decides to
delete; the in-use check finds A's job still running, so B keeps the cluster with an expiry
instead. A then finishes, and its own delete goes through.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from vsp.pipelines.definitions import catalog

CLUSTER = "sharedc"


def _start(tmp_path, name: str, steps: int, environment: dict) -> subprocess.Popen:
    shared = str(tmp_path / "shared")
    arguments = catalog.local_arguments("slurm-spot-training", shared)
    command = [*arguments["command"][:3], "--steps", str(steps), "--step-seconds", "0.1"]
    params = {
        "cluster_id": CLUSTER,
        "command": json.dumps(command),
        "working_directory": f"{shared}/{name}",
        "training_options": json.dumps({"checkpoint_dir": f"{shared}/{name}/ckpt"}),
        "model_dir": f"{environment['VSP_GCS_FUSE_ROOT']}/local-bucket/{name}/model",
        "teardown_policy": "delete",
    }
    args = ["run-local", "--in-process", "--state-dir", str(tmp_path / "emulator")]
    args += ["--outputs", str(tmp_path / f"out-{name}"), "--preemptions", "0"]
    for key, value in params.items():
        args += ["--param", f"{key}={value}"]
    log = open(tmp_path / f"{name}.log", "w")  # noqa: SIM115 - closed by the process end
    return subprocess.Popen(
        [sys.executable, "-c", "from vsp.pipelines.cli.main import main; main()", *args],
        env=environment, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip


@pytest.fixture
def runs():
    """The ``run-local`` processes a test starts; any still running at its end is killed (a
    failed assertion must not leave a run training on behind the suite)."""
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=30)


@pytest.mark.slow
def test_run_b_keeps_the_cluster_run_a_is_training_on(slurm_emulator_factory, tmp_path, runs):
    server = slurm_emulator_factory(tmp_path / "emulator")
    environment = {
        **os.environ,
        "VERTEX_EMULATOR_HOST": server.address,
        "VSP_GCS_FUSE_ROOT": str(tmp_path / "emulator" / "gcs"),
    }
    run_a = _start(tmp_path, "a", 250, environment)
    runs.append(run_a)
    deadline = time.monotonic() + 120
    while "RUNNING" not in json.dumps(server.app.slurm.jobs(CLUSTER) if _exists(server) else []):
        assert run_a.poll() is None, (tmp_path / "a.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "A never started training"
        time.sleep(0.2)
    run_b = _start(tmp_path, "b", 5, environment)
    runs.append(run_b)
    assert run_b.wait(timeout=240) == 0, (tmp_path / "b.log").read_text()[-3000:]
    assert run_a.poll() is None, "A should still be training when B ends"
    deletes = [e for e in server.journal() if e["method"] == "DELETE"]
    assert deletes == []  # B kept the cluster: A's job was running
    b_log = (tmp_path / "b.log").read_text()
    said = " ".join(b_log.split())  # the console wraps long lines
    # A's claim (from its create_cluster) and A's running job both hold the cluster.
    assert f"not deleting cluster {CLUSTER}: in use by claim vsp-lease-" in said
    assert "of another run until " in said and ", job 1 (RUNNING, user" in said
    assert run_a.wait(timeout=240) == 0, (tmp_path / "a.log").read_text()[-3000:]
    deletes = [e for e in server.journal() if e["method"] == "DELETE"]
    assert len(deletes) == 1 and deletes[0]["path"].endswith(f"/{CLUSTER}")
    uploads = [e for e in server.journal() if e["path"].endswith("models:upload")]
    assert len(uploads) == 2  # both runs trained and registered


def _exists(server) -> bool:
    try:
        server.app.slurm.jobs(CLUSTER)
    except Exception:  # noqa: BLE001 - the cluster is not there yet
        return False
    return True
