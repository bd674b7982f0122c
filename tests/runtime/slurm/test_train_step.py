"""Spot training on a cluster end to end: the train step against the emulated Slurm."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.job_log_files import job_log
from vsp.components.runtime.core import errors, polling
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training.backends import slurm

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "llmtrain"
SUBMIT = "/slurm/v0.0.42/job/submit"
POLL = polling.Backoff(initial=0.1, maximum=0.2, jitter=0)
TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--seed", "3", "--samples", "256"]


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster(CLUSTER)


def training(tmp_path, command, **changes) -> slurm.SlurmTraining:
    work = tmp_path / "shared"
    return slurm.SlurmTraining(
        command=command,
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        **changes,
    )


def train(emulator_training, **options):
    return train_on_cluster.train_on_cluster(
        project=PROJECT,
        location=LOCATION,
        cluster_id=CLUSTER,
        training=emulator_training,
        spot_partition="spot",
        fallback_partition=options.pop("fallback_partition", "ondemand"),
        run_key=options.pop("run_key", "run-1"),
        poll_backoff=POLL,
        timeout_seconds=120,
        **options,
    )


def slurm_calls(emulator, path):
    return [e for e in emulator.journal() if (e.get("body") or {}).get("path", "").startswith(path)]


def model_bytes(model_dir) -> bytes:
    return (pathlib.Path(model_dir) / "model.npz").read_bytes()


@pytest.mark.slow
def test_three_requeues_end_bit_identical_to_an_uninterrupted_run(cluster, tmp_path):
    steps = ["--steps", "120", "--step-seconds", "0.05"]
    cluster.app.slurm.set_preemption_plan(CLUSTER, mode="fixed", after_seconds=1.5, max_count=3)
    spec = training(tmp_path, [*TRAINER, *steps])
    outcome = train(spec, max_preemptions=5)
    assert outcome.metrics["preemptions"] == 3
    assert outcome.metrics["resubmissions"] == 0
    assert len(slurm_calls(cluster, SUBMIT)) == 1
    reference = tmp_path / "reference"
    env = {
        **os.environ,
        "VSP_CHECKPOINT_DIR": str(reference / "ckpt"),
        "VSP_MODEL_DIR": str(reference / "model"),
    }
    done = subprocess.run([*TRAINER, *steps[:2]], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert model_bytes(spec.model_dir) == model_bytes(reference / "model")
    # The timeline marks each of the three preemptions as a requeue in place (P1..P3).
    marks = re.findall(r"<title>preemption (\d): job \S+ (\w+) at ", outcome.report_html)
    assert marks == [("1", "requeued"), ("2", "requeued"), ("3", "requeued")]


@pytest.mark.slow
def test_non_requeue_job_is_resubmitted_with_the_same_checkpoints(cluster, tmp_path):
    # Periodic saves too: the resubmission must find the checkpoints whether or not the notice
    # save fits the test cluster's 0.4 s notice on a loaded machine (it once did not, in CI).
    steps = ["--steps", "60", "--step-seconds", "0.05", "--checkpoint-every-steps", "10"]
    cluster.app.slurm.set_preemption_plan(CLUSTER, mode="fixed", after_seconds=1.5, max_count=1)
    spec = training(tmp_path, [*TRAINER, *steps], requeue=False)
    outcome = train(spec, max_preemptions=3)
    assert [a.outcome.value for a in outcome.result.attempts] == ["PREEMPTED", "SUCCEEDED"]
    submits = slurm_calls(cluster, SUBMIT)
    assert len(submits) == 2
    assert [s["body"]["body"]["job"]["partition"] for s in submits] == ["spot", "spot"]
    log = job_log(spec.working_directory, outcome.result.job_ids[1])
    assert "resumed from ckpt-" in log.read_text()


@pytest.mark.slow
def test_fallback_to_on_demand_after_k_preemptions(cluster, tmp_path):
    steps = ["--steps", "60", "--step-seconds", "0.05"]
    cluster.app.slurm.set_preemption_plan(CLUSTER, mode="fixed", after_seconds=1.0, max_count=2)
    spec = training(tmp_path, [*TRAINER, *steps])
    outcome = train(spec, max_preemptions=5, fallback_after_preemptions=2)
    submits = slurm_calls(cluster, SUBMIT)
    assert [s["body"]["body"]["job"]["partition"] for s in submits] == ["spot", "ondemand"]
    cancels = [
        e
        for e in slurm_calls(cluster, "/slurm/v0.0.42/job/")
        if e["body"]["method"] == "HTTP_METHOD_DELETE"
    ]
    assert len(cancels) == 1
    assert outcome.result.attempts[0].detail.startswith("switch: 2 preemptions")


def test_user_error_budget_exhausted_reports_exit_code_and_log_tail(cluster, tmp_path):
    crash = [sys.executable, "-c", "import sys; print('loss is nan at step 7'); sys.exit(3)"]
    with pytest.raises(errors.UserError) as info:
        train(training(tmp_path, crash), max_user_failures=1)
    assert "exit code 3" in str(info.value)
    assert "loss is nan at step 7" in str(info.value)
    last = job_log(tmp_path / "shared", 2)  # the second and last job
    assert str(info.value).endswith(f"(the whole log: {last})")  # where the rest of it is
    assert len(slurm_calls(cluster, SUBMIT)) == 2


def test_hostile_parameters_reach_the_trainer_unchanged(cluster, tmp_path):
    marker = tmp_path / "pwned"
    hostile = ["it's", '"$(touch ' + str(marker) + ')"', "`id`", "a\nb", "; rm -rf /", "ünï"]
    dump = (
        "import json, os, sys; "
        "json.dump([sys.argv[1:], os.environ['HOSTILE']], open('args.json', 'w')); "
        "os.makedirs(os.environ['VSP_MODEL_DIR']); open(os.environ['VSP_MODEL_DIR'] + '/m', 'w')"
    )
    spec = training(
        tmp_path, [sys.executable, "-c", dump, *hostile], environment={"HOSTILE": "$(id)'\n"}
    )
    train(spec)
    received = json.loads((pathlib.Path(spec.working_directory) / "args.json").read_text())
    assert received == [hostile, "$(id)'\n"]
    assert not marker.exists()


def train_on_emulated_storage(cluster, tmp_path, monkeypatch, **options):
    """60 steps preempted once, checkpoints and model under ``tmp_path/gcs`` standing in for
    Cloud Storage, a 1.2 s FUSE cache modelled; the outcome and the counted reads."""
    from vsp.components.runtime.training import poll_plan

    gcs = tmp_path / "gcs"
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(gcs))
    cluster.app.slurm.set_preemption_plan(CLUSTER, mode="fixed", after_seconds=1.0, max_count=1)
    spec = dataclasses.replace(
        training(tmp_path, [*TRAINER, "--steps", "60", "--step-seconds", "0.05"]),
        checkpoint_dir=str(gcs / "bucket" / "ckpt"),
        model_dir=str(gcs / "bucket" / "model"),
    )
    settings = poll_plan.PlanSettings.for_poll_seconds(0.4, cache_seconds=1.2)
    opened = count_storage_reads(monkeypatch)
    return train(spec, max_preemptions=3, poll_settings=settings, **options), opened


@pytest.mark.slow
def test_beacon_on_cloud_storage_drives_the_polls_and_the_calls_are_counted(
    cluster, tmp_path, monkeypatch
):
    from vsp.components.runtime.training import beacon

    gcs = tmp_path / "gcs"
    before = len(cluster.journal())
    outcome, opened = train_on_emulated_storage(cluster, tmp_path, monkeypatch)
    assert outcome.metrics["preemptions"] == 1
    job_id = outcome.result.job_ids[0]
    final = beacon.read(str(gcs / "bucket" / "ckpt.beacon"), job_id)
    assert (final.state, final.rc, final.restart) == ("exiting", 0, 1)
    # Every request the step sent is counted, and the emulator saw exactly those; every read
    # of Cloud Storage the cache let through is counted, and exactly those were made.
    assert outcome.metrics["vertex_calls"] == len(cluster.journal()) - before
    assert outcome.metrics["storage_calls"] == sum(opened.values()) > 0
    assert outcome.metrics["api_calls"] == (
        outcome.metrics["vertex_calls"] + outcome.metrics["storage_calls"]
    )
    assert {o["channel"] for o in outcome.result.observations} == {"beacon"}
    assert outcome.metrics["vertex_calls_per_job_hour"] > 0


def count_storage_reads(monkeypatch) -> dict[str, int]:
    """Counts the step's reads of Cloud Storage as they happen: beacon files opened, progress
    folders listed and progress records opened, job logs read (under the FUSE root)."""
    from vsp.components.runtime.core import gcs_paths
    from vsp.components.runtime.trainer import progress
    from vsp.components.runtime.training import job_logs, storage_reads

    opened = {"beacon": 0, "progress": 0, "log": 0}
    root = gcs_paths.fuse_root()

    def spy_open(path, *args, **kwargs):
        if str(path).startswith(root):
            opened["beacon"] += 1
        return open(path, *args, **kwargs)

    real_read_job, real_new_lines = progress.read_job, job_logs.LogFollower.new_lines

    def read_job(folder, job):
        found = real_read_job(folder, job)
        if str(gcs_paths.to_local_path(folder)).startswith(root):
            opened["progress"] += 1 + len(found)
        return found

    def new_lines(self, path):
        if str(gcs_paths.to_local_path(path)).startswith(root):
            opened["log"] += 1
        return real_new_lines(self, path)

    monkeypatch.setattr(storage_reads, "open", spy_open, raising=False)
    monkeypatch.setattr(progress, "read_job", read_job)
    monkeypatch.setattr(job_logs.LogFollower, "new_lines", new_lines)
    return opened


@pytest.mark.slow
def test_an_unwritable_beacon_folder_falls_back_to_the_job_comment(cluster, tmp_path, monkeypatch):
    gcs = tmp_path / "gcs"
    (gcs / "bucket").mkdir(parents=True)
    (gcs / "bucket" / "ckpt.beacon").write_text("a file where the beacon folder would be")
    before = len(cluster.journal())
    outcome, opened = train_on_emulated_storage(cluster, tmp_path, monkeypatch)
    assert outcome.metrics["preemptions"] == 1
    [job_id] = outcome.result.job_ids
    log_text = job_log(tmp_path / "shared", job_id).read_text()
    assert "cannot write the progress beacon in" in log_text
    assert "keeping it in the job's comment instead" in log_text
    # The step noticed the channel, and saw the run's states in the comment.
    seen = outcome.result.observations
    assert seen[-1]["channel"] == "comment"
    assert [1, "running"] in [o["beacon"] for o in seen if o["channel"] == "comment"]
    assert seen[-1]["beacon"] == [1, "exiting"] and seen[-1]["outcome"] == "SUCCEEDED"
    # The calls are counted: Vertex exactly as the emulator saw them; Cloud Storage exactly
    # the reads made (the beacon file is no longer read once the comment carries it).
    assert outcome.metrics["vertex_calls"] == len(cluster.journal()) - before
    assert outcome.metrics["storage_calls"] == sum(opened.values())
    assert opened["beacon"] <= 2


@pytest.mark.slow
def test_progress_messages_bring_each_change_and_their_calls_are_counted(
    cluster, tmp_path, monkeypatch
):
    from vsp.components.runtime.training import progress_feed

    topic = f"projects/{PROJECT}/topics/progress"
    cluster.app.update_settings(pubsub_pull_hold_seconds=0.5)
    feed = progress_feed.FeedSettings(
        pull_seconds=5.0, ack_seconds=2.0, least_wait_seconds=0.2, gap_seconds=0.2, soon_seconds=5
    )
    outcome, _ = train_on_emulated_storage(
        cluster, tmp_path, monkeypatch, progress_topic=topic, feed_settings=feed
    )
    assert outcome.metrics["preemptions"] == 1
    [job_id] = outcome.result.job_ids
    sent = [
        (m["attributes"]["restart"], m["attributes"]["state"])
        for m in cluster.published()
        if m["attributes"]["job"] == job_id
    ]
    assert sorted(sent) == [("0", "exiting"), ("0", "notice"), ("0", "started"),
                            ("1", "exiting"), ("1", "started")]  # fmt: skip
    seen = {tuple(o["beacon"]) for o in outcome.result.observations if o["beacon"]}
    assert {(0, "notice"), (1, "started"), (1, "exiting")} <= seen
    pubsub = [e for e in cluster.journal() if "/subscriptions/" in e["path"]]
    assert outcome.metrics["pubsub_calls"] == len(pubsub)
    assert pubsub[0]["method"] == "PUT" and pubsub[-1]["method"] == "DELETE"
    assert any(e["path"].endswith(":pull") for e in pubsub)
    assert outcome.metrics["api_calls"] == sum(
        outcome.metrics[k] for k in ("vertex_calls", "storage_calls", "pubsub_calls")
    )
