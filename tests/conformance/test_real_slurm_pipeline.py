"""`vsp run-local --real-slurm`: the main pipeline's training on a real Slurm 24.11.

The pipeline runs in-process here (`vsp run-local --real-slurm` runs the compiled template, a
venv per step, as tests/pipelines/test_local_run.py does on the emulated Slurm); the emulator
forwards the Slurm Job API to the real slurmrestd, whose job is preempted three times by
partition priority (Slurm's own REQUEUE). The model must be bit-identical to an uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.job_log_files import job_log
from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import run

pytestmark = pytest.mark.slurm_conformance


@pytest.mark.slow
def test_main_pipeline_on_real_slurm_survives_three_preemptions_bit_identically(
    tmp_path, monkeypatch, held_real_slurm
):
    address = held_real_slurm
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = catalog.local_arguments(
        "slurm-spot-training", str(tmp_path / "shared"), real_slurm=True
    )
    settings = run.local_settings(0.3, preemptions=3, preempt_after=2.5)
    settings = dataclasses.replace(settings, slurmrestd=address)
    result = run.run_local(
        "slurm-spot-training",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=settings,
        in_process=True,  # the faithful mode runs on the emulated Slurm in tests/pipelines
    )
    assert result.succeeded, result.error
    submits = [
        e for e in result.journal if (e.get("body") or {}).get("path", "").endswith("/job/submit")
    ]
    assert len(submits) == 1  # requeued in place by the real Slurm: no resubmission
    job_id = int(result.parameters["train-on-cluster"]["job_ids"][0])
    metrics = json.loads(pathlib.Path(result.outputs["train-on-cluster/metrics"]).read_text())
    assert metrics["preemptions"] == 3 and metrics["resubmissions"] == 0
    # Whose preemptions: the injector's record of the three partition-priority preemptions.
    timeline = tmp_path / "emulator" / "slurm" / "real-slurm" / "preemptions.jsonl"
    events = [json.loads(line) for line in timeline.read_text().splitlines()]
    assert [(e["kind"], e["jobId"], e["restartCount"]) for e in events] == [
        ("partition_prio", job_id, n) for n in range(3)
    ]
    log = (job_log(arguments["training_options"]["log_directory"], job_id)).read_text()
    # Appended across the real Slurm's restarts (it truncates without open_mode APPEND); the
    # first run has no SLURM_RESTART_COUNT, which the trainer reads as 0.
    assert [f"SLURM_RESTART_COUNT={n}" in log for n in range(4)] == [True] * 4
    assert log.count("resumed from ckpt-") == 3
    reference = tmp_path / "reference"
    env = {
        **os.environ,
        "VSP_CHECKPOINT_DIR": str(reference / "ckpt"),
        "VSP_MODEL_DIR": str(reference / "model"),
    }
    # Unpaced (--step-seconds only sleeps; the model is the same).
    command = [sys.executable, *arguments["command"][1:], "--step-seconds", "0"]
    subprocess.run(command, env=env, check=True, capture_output=True)
    trained = pathlib.Path(arguments["model_dir"]) / "model.npz"
    assert trained.read_bytes() == (reference / "model" / "model.npz").read_bytes()
