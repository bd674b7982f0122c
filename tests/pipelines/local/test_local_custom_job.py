"""spot-custom-job-training from its compiled template through kfp.local, a venv per step as on
Vertex AI Pipelines: eight preemptions, two jobs, one model version."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import run, summary


def _arguments(tmp_path, steps: int) -> dict:
    """The local CustomJob run's arguments: the example trainer for ``steps`` steps of 0.05 s,
    polled every 0.2 s."""
    arguments = catalog.local_arguments("spot-custom-job-training", str(tmp_path / "shared"))
    arguments["command"] = [
        *arguments["command"][:3],
        *["--steps", str(steps), "--seed", "7", "--step-seconds", "0.05"],
    ]
    arguments["poll_seconds"] = 0.2
    return arguments


@pytest.mark.slow
def test_eight_preemptions_then_one_registered_version(tmp_path, monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = _arguments(tmp_path, steps=200)
    result = run.run_local(
        "spot-custom-job-training",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=run.local_settings(0.3, preemptions=8, preempt_after=1.0),
    )
    assert result.succeeded, result.error
    assert result.mode == "faithful"
    assert result.calls["create custom job"] == 2  # Vertex's six restarts, then one resubmission
    metrics = json.loads(pathlib.Path(result.outputs["train-custom-job/metrics"]).read_text())
    assert metrics["preemptions"] == 8 and metrics["resubmissions"] == 1
    [upload] = [e for e in result.journal if e["path"].endswith("models:upload")]
    model = upload["body"]["model"]
    base = arguments["base_output_directory"]
    assert model["artifactUri"] == f"{base}/model"
    assert model["labels"]["vsp-preemptions"] == "8"
    assert model["labels"]["vsp-job-count"] == "2"
    assert model["labels"]["vsp-checkpoint-step"] == "200"
    assert result.parameters["register-model"]["model_resource_name"].endswith(
        "/models/custom-job-example@1"
    )
    facts = dict(summary.facts(result))
    assert facts["preemptions survived"].startswith("8 (resubmissions 1")
    # The registered model is bit-identical to an uninterrupted run of the same seed (the
    # step delay only sleeps).
    gcs = tmp_path / "emulator" / "gcs"
    trained = gcs / base.removeprefix("gs://") / "model" / "model.npz"
    reference = tmp_path / "reference"
    env = {
        **os.environ,
        "VSP_CHECKPOINT_DIR": str(reference / "ckpt"),
        "VSP_MODEL_DIR": str(reference / "model"),
    }
    steps = ["--steps", "200", "--seed", "7", "--step-seconds", "0"]
    command = [sys.executable, "-m", "vsp.examples.trainer", *steps]
    subprocess.run(command, env=env, check=True, capture_output=True)
    assert trained.read_bytes() == (reference / "model" / "model.npz").read_bytes()


@pytest.mark.slow
def test_a_second_run_on_the_same_state_folder_gets_its_preemptions_too(tmp_path, monkeypatch):
    # The plan's count of fired preemptions was kept in the state folder: the second run saw
    # none of its --preemptions and "survived" 0.
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = _arguments(tmp_path, steps=100)
    # {run}: a folder per run (with one folder, the second run resumed the first's final
    # checkpoint and trained nothing).
    arguments["base_output_directory"] += "/{run}"
    survived, folders = [], []
    for _run in range(2):
        result = run.run_local(
            "spot-custom-job-training",
            arguments,
            state_dir=str(tmp_path / "emulator"),
            pipeline_root=str(tmp_path / "outputs"),
            settings=run.local_settings(0.3, preemptions=2, preempt_after=1.0),
            in_process=True,
        )
        assert result.succeeded, result.error
        metrics = json.loads(pathlib.Path(result.outputs["train-custom-job/metrics"]).read_text())
        survived.append(metrics["preemptions"])
        folders.append(result.parameters["train-custom-job"]["checkpoint_dir"])
    assert survived == [2, 2]
    assert folders[0] != folders[1] and "{run}" not in "".join(folders)
