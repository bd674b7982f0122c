"""Following a job's log file from the step: new lines per poll, bounded, truncation, absence."""

from __future__ import annotations

import logging

from vsp.components.runtime.training import job_logs


def test_new_lines_arrive_once_and_a_partial_line_waits_for_its_end(tmp_path):
    path = tmp_path / "slurm-1.out"
    follower = job_logs.LogFollower()
    assert follower.new_lines(str(path)) == []  # not written yet
    path.write_text("step 1 loss 0.9\nstep 2 lo")
    assert follower.new_lines(str(path)) == ["step 1 loss 0.9"]
    with path.open("a") as handle:
        handle.write("ss 0.8\nstep 3 loss 0.7\n")
    assert follower.new_lines(str(path)) == ["step 2 loss 0.8", "step 3 loss 0.7"]
    assert follower.new_lines(str(path)) == []


def test_a_truncated_log_is_read_from_the_start_again(tmp_path):
    path = tmp_path / "slurm-1.out"
    follower = job_logs.LogFollower()
    path.write_text("first run, a long line before the requeue\n")
    assert follower.new_lines(str(path)) == ["first run, a long line before the requeue"]
    path.write_text("resumed\n")
    assert follower.new_lines(str(path)) == ["resumed"]


def test_a_chatty_job_is_bounded_per_poll(tmp_path):
    path = tmp_path / "slurm-1.out"
    path.write_text("".join(f"line {i}\n" for i in range(120)))
    lines = job_logs.LogFollower(max_lines=5).new_lines(str(path))
    assert lines == ["... (115 lines not shown)", *[f"line {i}" for i in range(115, 120)]]


def test_a_log_on_the_cluster_is_named_once(tmp_path):
    follower = job_logs.LogFollower()
    where = "/home/nowhere-on-this-host/run/slurm-7.out"
    # A starting job may not have made its folder yet: the note waits a few polls.
    shown = [follower.new_lines(where) for _ in range(job_logs.NOTE_AFTER_POLLS + 2)]
    note = f"(the job's log is at {where} on the cluster, not visible from this step)"
    assert shown == [[]] * (job_logs.NOTE_AFTER_POLLS - 1) + [[note], [], []]
    assert "not readable from this step" in job_logs.tail(where)


def test_a_folder_that_appears_late_is_followed(tmp_path):
    follower = job_logs.LogFollower()
    path = tmp_path / "later" / "slurm-1.out"
    assert [follower.new_lines(str(path)) for _ in range(job_logs.NOTE_AFTER_POLLS)][-1] != []
    path.parent.mkdir()
    path.write_text("started\n")
    assert follower.new_lines(str(path)) == ["started"]


def test_gcs_paths_are_read_through_the_fuse_root(tmp_path, monkeypatch):
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(tmp_path))
    (tmp_path / "bucket" / "logs").mkdir(parents=True)
    (tmp_path / "bucket" / "logs" / "slurm-3.out").write_text("hello\n")
    assert job_logs.LogFollower().new_lines("gs://bucket/logs/slurm-3.out") == ["hello"]


def test_the_supervisor_shows_trainer_lines_while_it_polls(slurm_cluster, tmp_path, caplog):
    import sys  # noqa: PLC0415

    from vsp.components.runtime.core import polling  # noqa: PLC0415
    from vsp.components.runtime.steps import train_on_cluster
    from vsp.components.runtime.training.backends import slurm

    slurm_cluster("logs")
    work = tmp_path / "run"
    spec = slurm.SlurmTraining(
        command=[sys.executable, "-m", "vsp.examples.trainer", "--steps", "5", "--samples", "64"],
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
        account="ml",
    )
    with caplog.at_level(logging.INFO, logger="vsp.components.runtime.training.supervisor"):
        train_on_cluster.train_on_cluster(
            project="test-project", location="us-central1", cluster_id="logs", training=spec,
            spot_partition="spot", run_key="logs-1", timeout_seconds=120,
            poll_backoff=polling.Backoff(initial=0.1, maximum=0.2, jitter=0),
        )  # fmt: skip
    shown = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[job ")]
    written = (work / "slurm-1-logs-1.out").read_text().splitlines()
    assert written and [line.split("] ", 1)[1] for line in shown] == written


def test_slurms_missing_working_directory_line_says_it_is_expected(tmp_path):
    chdir = (
        "slurmstepd: error: couldn't chdir to `/home/run': No such file or directory: going "
        "to /tmp instead"
    )
    # Real Slurm 24.11 names the node in the prefix (slurmstepd-NODE:), once per node.
    on_node = chdir.replace("slurmstepd:", "slurmstepd-vsp-node0:")
    path = tmp_path / "slurm-1.out"
    path.write_text(
        f"{chdir}\n{on_node}\nTraceback (most recent call last):\nslurmstepd: other error\n"
    )
    expected = [
        chdir + job_logs.CHDIR_NOTE,
        on_node + job_logs.CHDIR_NOTE,
        "Traceback (most recent call last):",
        "slurmstepd: other error",  # any other line as it is
    ]
    assert job_logs.LogFollower().new_lines(str(path)) == expected
    assert job_logs.tail(str(path)) == "\n".join(expected) + f"\n(the whole log: {path})"
