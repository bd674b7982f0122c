"""With the emulator, a job gets the emulated Cloud Storage folder; against Vertex, nothing."""

from __future__ import annotations

import pytest

from vsp.components.runtime.training.backends import slurm

TRAINING = slurm.SlurmTraining(
    command=["python", "-m", "train"],
    working_directory="/home/me/run",
    checkpoint_dir="gs://bucket/run/checkpoints",
    model_dir="gs://bucket/run/model",
)


def job_environment(training=TRAINING) -> dict[str, str]:
    (spot,) = slurm.targets("spot", "")
    backend = slurm.SlurmBackend(None, training, [spot], pipeline_run="run-1")
    return backend.description("key-1", 0, spot).environment


@pytest.mark.parametrize(
    ("emulator", "root", "expected"),
    [
        ("127.0.0.1:8618", "/state/gcs", {"VSP_GCS_FUSE_ROOT": "/state/gcs"}),
        ("", "/state/gcs", {}),  # Vertex AI: the cluster mounts /gcs itself
        ("127.0.0.1:8618", "", {}),  # no emulated storage folder known
    ],
)
def test_the_emulated_storage_folder_reaches_the_job(monkeypatch, emulator, root, expected):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", emulator)
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", root)
    assert job_environment() == {
        **expected,
        "VSP_CHECKPOINT_DIR": "gs://bucket/run/checkpoints",
        "VSP_MODEL_DIR": "gs://bucket/run/model",
        "VSP_ATTEMPT": "0",
    }


def test_the_trainers_own_environment_wins(monkeypatch):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "127.0.0.1:8618")
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", "/state/gcs")
    mine = slurm.SlurmTraining(
        **{**TRAINING.__dict__, "environment": {"VSP_GCS_FUSE_ROOT": "/mnt"}}
    )
    assert job_environment(mine)["VSP_GCS_FUSE_ROOT"] == "/mnt"
