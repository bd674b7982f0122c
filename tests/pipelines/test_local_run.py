"""`vsp run-local` on the emulator through kfp.local: the cluster lifecycle from the sources
(in-process mode), and the main pipeline as Vertex runs it (compiled template, a venv per step)."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import vertex_emulator
from pipelines import local_run, registry

FAST = vertex_emulator.EmulatorSettings(
    provisioning_delay_seconds=0.3, delete_delay_seconds=0.1, tick_interval_seconds=0.05
)


def _run(tmp_path, monkeypatch, **overrides):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = {
        **registry.local_arguments("cluster-lifecycle", str(tmp_path / "shared")),
        **overrides,
    }
    return local_run.run_local(
        "cluster-lifecycle",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=FAST,
        in_process=True,
    )


def test_cluster_lifecycle_creates_then_deletes_exactly_once(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch)
    assert result.succeeded, result.error
    assert result.calls["create cluster"] == 1
    assert result.calls["delete cluster"] == 1
    writes = [
        (e["method"], e["status"], (e.get("body") or {}).get("path", ""))
        for e in result.journal
        if e["method"] != "GET"
    ]
    # create; the in-use check reads the live Slurm queue right before the delete; delete
    assert writes == [
        ("POST", 200, ""),
        ("POST", 200, "/slurm/v0.0.42/jobs"),
        ("DELETE", 200, ""),
    ]
    create = next(e for e in result.journal if e["method"] == "POST")
    assert create["query"] == {"model_development_cluster_id": "vsplocal"}
    assert create["body"]["labels"]["vsp-pipeline-run"].startswith("cluster-lifecycle-")
    assert [p["id"] for p in create["body"]["nodePools"]] == ["login", "spot", "ondemand"]
    # The run leaves no cluster behind.
    assert [e for e in result.journal if e["method"] == "GET"][-1]["status"] == 404


def test_exit_handler_deletes_even_when_the_create_step_fails(tmp_path, monkeypatch):
    result = _run(tmp_path, monkeypatch, cluster_id="Bad-Id")
    assert not result.succeeded
    assert "create-cluster" in result.error
    # The create step failed validation before any request; the exit task still ran.
    assert [(e["method"], e["status"]) for e in result.journal] == [("GET", 404)]
    assert result.journal[0]["path"].endswith("/modelDevelopmentClusters/Bad-Id")


def test_compiled_slurm_spot_training_survives_three_preemptions_bit_identically(
    tmp_path, monkeypatch
):
    """The faithful mode: compiled/pipelines/slurm_spot_training.yaml, each step in a fresh
    venv with only what its YAML installs (no numpy), as on Vertex AI Pipelines."""
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = registry.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    result = local_run.run_local(
        "slurm-spot-training",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=local_run.local_settings(0.3, preemptions=3, preempt_after=2.5),
    )
    assert result.succeeded, result.error
    assert result.mode == "faithful"
    submits = [
        e for e in result.journal if (e.get("body") or {}).get("path", "").endswith("/job/submit")
    ]
    assert len(submits) == 1  # requeued in place three times: no resubmission
    metrics = json.loads(pathlib.Path(result.outputs["train-on-cluster/metrics"]).read_text())
    assert metrics["preemptions"] == 3 and metrics["resubmissions"] == 0
    assert result.calls["create cluster"] == 1 and result.calls["delete cluster"] == 1
    report = pathlib.Path(result.outputs["train-on-cluster/report"]).read_text()
    assert report.count("<title>requeued</title>") == 3
    # The same trainer, uninterrupted, ends with the same bytes.
    reference = tmp_path / "reference"
    env = {
        **os.environ,
        "VSP_CHECKPOINT_DIR": str(reference / "ckpt"),
        "VSP_MODEL_DIR": str(reference / "model"),
    }
    command = [sys.executable, *arguments["command"][1:]]
    subprocess.run(command, env=env, check=True, capture_output=True)
    trained = pathlib.Path(arguments["model_dir"]) / "model.npz"
    assert trained.read_bytes() == (reference / "model" / "model.npz").read_bytes()
