"""Run keys: one per training task of a run, and a re-attach only to a job of the same spec."""

from __future__ import annotations

import pathlib
import sys

import pytest

from vsp.components.runtime.core import errors, polling
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training import driver
from vsp.components.runtime.training.backends import slurm

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "keys"
SUBMIT = "/slurm/v0.0.42/job/submit"
TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--steps", "5", "--samples", "64"]


def test_derived_keys_differ_by_task_and_stay_within_the_limit():
    run = "slurm-spot-training-20261203081500"
    first = driver.run_key_for(run, "vsptrain", task="train-on-cluster")
    second = driver.run_key_for(run, "vsptrain", task="train-on-cluster-2")
    assert first == f"vsp-vsptrain-{run}-train-on-cluster"
    assert first != second
    assert driver.run_key_for(run, "vsptrain", "mine", "train-on-cluster") == "mine"
    long_run = "r" * 63
    a = driver.run_key_for(long_run, "c", task="t" * 60 + "-a")
    b = driver.run_key_for(long_run, "c", task="t" * 60 + "-b")
    assert len(a) == len(b) == driver.MAX_RUN_KEY and a != b


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster(CLUSTER)


def _train(tmp_path, folder: str, command: list[str], **keys):
    work = tmp_path / folder
    spec = slurm.SlurmTraining(
        command=command,
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        account="ml",
    )
    return train_on_cluster.train_on_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        training=spec,
        spot_partition="spot",
        poll_backoff=polling.Backoff(initial=0.1, maximum=0.2, jitter=0),
        timeout_seconds=120,
        **keys,
    )


def _submits(cluster):
    return [e for e in cluster.journal() if (e.get("body") or {}).get("path") == SUBMIT]


def test_two_training_tasks_of_one_run_submit_two_jobs(cluster, tmp_path):
    run = {"pipeline_run": "slurm-spot-training-20261203"}
    first = _train(tmp_path, "a", TRAINER, task_id="train-a", **run)
    second = _train(tmp_path, "b", TRAINER, task_id="train-b", **run)
    assert len(_submits(cluster)) == 2
    assert first.result.job_ids != second.result.job_ids
    for folder in ("a", "b"):
        assert (tmp_path / folder / "model" / "model.npz").is_file()


def test_a_key_held_by_a_job_of_another_command_is_a_clear_error(cluster, tmp_path):
    _train(tmp_path, "a", TRAINER, run_key="shared-key")
    other = [*TRAINER[:-1], "32"]
    with pytest.raises(errors.UserError) as raised:
        _train(tmp_path, "b", other, run_key="shared-key")
    message = str(raised.value)
    assert "run key 'shared-key' already belongs to Slurm job" in message
    assert str(tmp_path / "a") in message and str(tmp_path / "b") in message
    assert "Fix: give this task its own run_key" in message
    assert len(_submits(cluster)) == 1  # nothing was submitted for the second step


def test_a_retry_of_the_same_step_still_reattaches(cluster, tmp_path):
    _train(tmp_path, "a", TRAINER, run_key="same-key")
    again = _train(tmp_path, "a", TRAINER, run_key="same-key")
    assert len(_submits(cluster)) == 1
    assert again.result.job_ids


@pytest.mark.slow
def test_two_training_tasks_in_one_pipeline_run_submit_two_jobs(cluster, tmp_path):
    """The reproduction at pipeline level: two train_on_cluster tasks, no run keys, one run;
    each derives its key from the run's and its task's unique ids and trains for itself."""
    from kfp import dsl, local  # noqa: PLC0415

    from vsp.components import catalog, packaging  # noqa: PLC0415
    from vsp.pipelines.definitions import catalog as pipeline_catalog  # noqa: PLC0415

    train = catalog.component_set(packaging.PREINSTALLED)["train_on_cluster"]
    # kfp.local rewrites "python3" in task arguments; a launcher without that word is safe.
    command = [pipeline_catalog.local_python(str(tmp_path / "shared")), *TRAINER[1:]]

    def task(folder: str):
        work = str(tmp_path / folder)
        return train(
            project=PROJECT, location=LOCATION, cluster_id=CLUSTER, command=command,
            working_directory=work, checkpoint_dir=work + "/ckpt", model_dir=work + "/model",
            account="ml", poll_seconds=0.2, pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            task_id=dsl.PIPELINE_TASK_ID_PLACEHOLDER,
        )  # fmt: skip

    @dsl.pipeline(name="two-trainings")
    def two_trainings():
        task("a")
        task("b")

    local.init(local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path / "out"))
    two_trainings()
    submits = _submits(cluster)
    assert len(submits) == 2
    names = [s["body"]["body"]["job"]["name"] for s in submits]
    # vsp-CLUSTER-RUNID-TASKID: one run id, two task ids.
    runs = {name.split("-")[2] for name in names}
    tasks = {name.split("-")[3] for name in names}
    assert len(runs) == 1 and len(tasks) == 2
    for folder in ("a", "b"):
        assert (tmp_path / folder / "model" / "model.npz").is_file()
