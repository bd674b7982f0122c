"""Slurm conformance, a job's life: submit, poll, exit codes, signals, time limit, environment.

The same scenarios run on the emulated Slurm and on a real Slurm 24.11 (``slurm_backend``), through
the project's own client and the ``:callSlurmRestApi`` proxy, so what passes here is what the
training step relies on.
"""

from __future__ import annotations

import os
import pwd
import time

import pytest

from tests.conformance.scenario_jobs import job, sh, stepd_lines
from vsp.components.runtime.slurm import script

pytestmark = pytest.mark.slurm_conformance


# The SLURM_* names Slurm 24.11.7 gives the batch step of `job()` below (measured through
# slurmrestd v0.0.42, no accounting); the emulator gives the same, less NOT_MODELLED.
REAL_SLURM_NAMES = {
    "SLURMD_NODENAME",
    "SLURM_CLUSTER_NAME",
    "SLURM_CONF",
    "SLURM_CPUS_ON_NODE",
    "SLURM_GTIDS",
    "SLURM_JOBID",
    "SLURM_JOB_CPUS_PER_NODE",
    "SLURM_JOB_END_TIME",
    "SLURM_JOB_GID",
    "SLURM_JOB_ID",
    "SLURM_JOB_NAME",
    "SLURM_JOB_NODELIST",
    "SLURM_JOB_NUM_NODES",
    "SLURM_JOB_PARTITION",
    "SLURM_JOB_START_TIME",
    "SLURM_JOB_UID",
    "SLURM_JOB_USER",
    "SLURM_LOCALID",
    "SLURM_MEM_PER_CPU",
    "SLURM_NNODES",
    "SLURM_NODEID",
    "SLURM_NODELIST",
    "SLURM_NPROCS",
    "SLURM_NTASKS",
    "SLURM_OOM_KILL_STEP",
    "SLURM_OPEN_MODE",
    "SLURM_PROCID",
    "SLURM_TASKS_PER_NODE",
    "SLURM_TASK_PID",
    "SLURM_TOPOLOGY_ADDR",
    "SLURM_TOPOLOGY_ADDR_PATTERN",
}
NOT_MODELLED = {"SLURM_CONF", "SLURM_MEM_PER_CPU", "SLURM_TASK_PID"}
# Set where accounting runs (the emulated cluster, like Vertex's, has it; the local real Slurm
# has no slurmdbd).
WITH_ACCOUNTING = {"SLURM_JOB_ACCOUNT"}


def test_submit_poll_complete(slurm_backend):
    desc = job(slurm_backend, "done", sh('echo "hello $SLURM_JOB_NAME" > out.txt'))
    job_id = slurm_backend.client.submit(desc)
    seen = []
    done = slurm_backend.wait(job_id, lambda j: j.is_terminal, seen=seen)
    assert done.state == ("COMPLETED",) and done.outcome().value == "SUCCEEDED"
    assert done.return_code == 0 and done.name == desc.run_key and done.source == "live"
    assert done.carries_run_key(desc.run_key) and done.partition == "spot"
    assert {s.base_state for s in seen} <= {"PENDING", "RUNNING", "COMPLETED"}
    assert (slurm_backend.workdir / "out.txt").read_text() == f"hello {desc.run_key}\n"
    found = slurm_backend.client.find_jobs(desc.run_key, include_accounting=True)
    assert [j.job_id for j in found] == [job_id]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("payload", "code"),
    # A payload that ends 143 (SIGTERM) with no notice sent to the job ends it with exit 1:
    # 143 says "saved on a notice", and read so it was requeued as preempted over and over.
    [("exit 3", 3), ("kill -KILL $$", 137), ("kill -TERM $$", 1), ("exit 143", 1)],
)
def test_user_failure_exit_codes(slurm_backend, payload, code):
    job_id = slurm_backend.client.submit(job(slurm_backend, "fail", sh(payload)))
    failed = slurm_backend.finish(job_id)
    assert failed.state == ("FAILED",) and failed.return_code == code
    assert failed.outcome().value == "USER_FAILURE"


def test_signal_term_to_the_job_is_not_a_user_failure(slurm_backend):
    # DELETE ?signal=TERM signals every process of the job: the batch shell and its payload
    # both get it. The job ends FAILED 143 (not 255), which the client reads as a preemption.
    desc = job(slurm_backend, "term", sh("echo up > term-up.txt; sleep 300"))
    job_id = slurm_backend.client.submit(desc)
    up = slurm_backend.workdir / "term-up.txt"
    slurm_backend.wait(job_id, lambda j: j.state == ("RUNNING",) and up.exists())
    path = slurm_backend.client.slurm_path(f"job/{job_id}?signal=TERM")
    answer = slurm_backend.client.call("DELETE", path, idempotent=True)
    assert answer.ok and answer.payload["status"] == []
    failed = slurm_backend.finish(job_id)
    assert failed.state == ("FAILED",) and failed.state_reason == "NonZeroExitCode"
    assert failed.exit_status == ("ERROR",) and failed.return_code == 143
    assert failed.outcome().value == "PREEMPTED"
    log = slurm_backend.workdir / f"term-{job_id}.out"
    assert stepd_lines(log, job_id) == ["CANCELLED"]
    assert "vsp: forwarding SIGTERM to payload" in log.read_text()


@pytest.mark.slow
def test_time_limit_warns_then_times_out(slurm_backend):
    scale = 1.0
    if slurm_backend.kind == "emulated":  # a minute of emulated time in 3 s
        scale = 0.05
        slurm_backend.server.app.update_settings(time_scale=scale)
    payload = sh("trap 'echo warned >> warn.txt' USR1; while :; do sleep 0.2; done")
    desc = job(slurm_backend, "limit", payload, time_limit_minutes=1, warning_signal="USR1@30")
    job_id = slurm_backend.client.submit(desc)
    timed_out = slurm_backend.finish(job_id, timeout=200)
    assert timed_out.state == ("TIMEOUT",) and timed_out.outcome().value == "USER_FAILURE"
    assert (slurm_backend.workdir / "warn.txt").read_text().startswith("warned")
    # slurmctld looks for jobs past their limit every 30 s: the limit holds from 60 s to 90 s
    # after the start (87.9 s measured once), then KillWait (5 s on the real Slurm).
    ran = timed_out.end_time - timed_out.start_time
    assert 60 * scale - 1 <= ran <= (60 + 30 + 5) * scale + 2, ran
    log = slurm_backend.workdir / f"limit-{job_id}.out"
    assert stepd_lines(log, job_id) == ["CANCELLED DUE TO TIME LIMIT"]


@pytest.mark.slow
def test_environment_seen_by_the_job(slurm_backend, monkeypatch):
    monkeypatch.setenv("VSP_LEAK_PROBE", "secret")
    desc = job(slurm_backend, "env", sh("env > env.txt"), environment={"A": "two words=3"})
    job_id = slurm_backend.client.submit(desc)
    slurm_backend.finish(job_id)
    lines = (slurm_backend.workdir / "env.txt").read_text().splitlines()
    env = dict(line.split("=", 1) for line in lines if "=" in line)
    account = pwd.getpwuid(os.getuid())
    assert env["USER"] == env["LOGNAME"] == account.pw_name
    assert env["HOME"] == account.pw_dir and env["SHELL"] == account.pw_shell
    path = env["PATH"]
    if slurm_backend.kind == "emulated":  # its srun and scontrol first (docs/emulator.md)
        tools, _, path = path.partition(":")
        assert tools.endswith("/slurm/conf/bin")
    assert path == script.DEFAULT_PATH and env["A"] == "two words=3"
    assert env["VSP_RUN_KEY"] == desc.run_key and "VSP_LEAK_PROBE" not in env
    assert env["SLURM_JOB_ID"] == str(job_id) and env["SLURM_JOB_NAME"] == desc.run_key
    assert env["SLURM_JOB_PARTITION"] == "spot" and env["SLURM_OPEN_MODE"] == "a"
    assert "SLURM_RESTART_COUNT" not in env  # set only once the job was requeued
    names = {k for k in env if k.startswith(("SLURM_", "SLURMD_"))}
    expected = REAL_SLURM_NAMES
    if slurm_backend.kind == "emulated":
        expected = expected - NOT_MODELLED | WITH_ACCOUNTING
    assert names == expected


@pytest.mark.slow
def test_missing_working_directory(slurm_backend):
    # Slurm 24.11 creates the output file's folder, but starts the script in /tmp when the
    # working directory is missing (older Slurm fails the launch); the batch script makes it.
    work = slurm_backend.workdir / "not" / "yet"
    desc = script.JobDescription(
        run_key=f"conf-nowork-{os.getpid()}-{time.monotonic_ns() % 10**6}",
        partition="spot",
        working_directory=str(work),
        command=sh("pwd > where.txt"),
        standard_output=str(slurm_backend.workdir / "logs" / "nowork-%j.out"),
    )
    job_id = slurm_backend.client.submit(desc)
    done = slurm_backend.finish(job_id)
    assert done.state == ("COMPLETED",)
    assert (work / "where.txt").read_text() == f"{work}\n"
    log = (slurm_backend.workdir / "logs" / f"nowork-{job_id}.out").read_text()
    assert f"slurmstepd: error: couldn't chdir to `{work}': No such file or directory" in log
