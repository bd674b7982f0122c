"""Tests of JobInfo: parsing live/slurmdb/legacy payloads, state properties, outcome table."""

from __future__ import annotations

import pytest

from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.slurm import job as slurm_job
from vsp.components.runtime.slurm.job import JobInfo


def nv(number=0, *, set_=True, infinite=False):
    return {"set": set_, "infinite": infinite, "number": number}


def exit_code(status, rc=None, sig_id=None, sig_name=""):
    return {
        "status": status,
        "return_code": nv(0, set_=False) if rc is None else nv(rc),
        "signal": {"id": nv(0, set_=False) if sig_id is None else nv(sig_id), "name": sig_name},
    }


REQUEUED_PENDING = {
    "job_id": 101,
    "name": "run-1",
    "comment": "vsp-run-key=run-1",
    "job_state": ["PENDING", "REQUEUED"],
    "state_reason": "BeginTime",
    "restart_cnt": 1,
    "priority": nv(10801),
    "partition": "spot",
    "account": "ml",
    "user_name": "alice",
    "nodes": "",
    "submit_time": nv(1_700_000_100),
    "start_time": nv(0),
    "end_time": nv(0),
    "exit_code": exit_code(["PENDING"]),
}

COMPLETING = {
    "job_id": 102,
    "job_state": ["COMPLETED", "COMPLETING"],
    "state_reason": "None",
    "restart_cnt": 0,
    "priority": nv(0),
    "nodes": "a4-[0-1]",
    "node_count": nv(2),
    "exit_code": exit_code(["SUCCESS"], rc=0),
}

FAILED_RC = {
    "job_id": 103,
    "job_state": ["FAILED"],
    "state_reason": "NonZeroExitCode",
    "exit_code": exit_code(["ERROR"], rc=2),
    "start_time": nv(1_700_000_200),
    "end_time": nv(1_700_000_300),
}

SIGNAL_KILLED = {
    "job_id": 104,
    "job_state": ["FAILED"],
    "state_reason": "NonZeroExitCode",
    "exit_code": exit_code(["SIGNALED"], rc=0, sig_id=9, sig_name="KILL"),
}

SLURMDB_ONLY = {
    "job_id": 105,
    "name": "run-1",
    "comment": {"administrator": "", "job": "vsp-run-key=run-1", "system": ""},
    "state": {"current": ["COMPLETED"], "reason": "None"},
    "exit_code": exit_code(["SUCCESS"], rc=0),
    "restart_cnt": 2,
    "time": {"submission": 1_700_000_000, "start": 1_700_000_050, "end": 1_700_000_900},
    "user": "alice",
    "partition": "spot",
    "priority": nv(4242),
    "nodes": "a4-0",
    "allocation_nodes": 1,
}

LEGACY_LIVE = {
    "job_id": 9,
    "job_state": "RUNNING",
    "restart_cnt": 0,
    "start_time": 1_796_232_476,
    "exit_code": 0,
    "priority": 10801,
    "time_limit": 5,
}

LEGACY_DB = {
    "job_id": 9,
    "state": {"current": "COMPLETED", "reason": "None"},
    "exit_code": {"status": "SUCCESS", "return_code": 0},
}


def test_requeued_pending_job():
    job = JobInfo.parse(REQUEUED_PENDING)
    assert job.job_id == 101 and job.source == "live"
    assert job.state == ("PENDING", "REQUEUED")
    assert job.base_state == "PENDING" and job.flags == ("REQUEUED",)
    assert not job.is_terminal and job.is_requeued and not job.is_held
    assert job.priority == 10801 and job.restart_cnt == 1
    assert job.return_code is None and job.signal is None
    assert job.submit_time == 1_700_000_100 and job.start_time is None and job.end_time is None
    assert job.outcome() is Outcome.PENDING
    assert job.describe() == "job 101 PENDING+REQUEUED reason=BeginTime priority=10801 restarts=1"
    assert job.carries_run_key("run-1") and not job.carries_run_key("run-10")


def test_completing_job_is_not_terminal_yet():
    job = JobInfo.parse(COMPLETING)
    assert job.base_state == "COMPLETED" and job.flags == ("COMPLETING",)
    assert not job.is_terminal and job.node_count == 2
    assert job.outcome() is Outcome.RUNNING
    assert job.describe() == "job 102 COMPLETED+COMPLETING priority=0 restarts=0 nodes=a4-[0-1]"


def test_failed_job_with_return_code():
    job = JobInfo.parse(FAILED_RC)
    assert job.is_terminal and job.return_code == 2 and job.exit_status == ("ERROR",)
    assert job.outcome() is Outcome.USER_FAILURE
    assert job.describe() == "job 103 FAILED reason=NonZeroExitCode restarts=0 exit=2"
    assert (job.start_time, job.end_time) == (1_700_000_200, 1_700_000_300)


def test_signal_killed_job():
    job = JobInfo.parse(SIGNAL_KILLED)
    assert job.signal == "SIGKILL" and job.exit_status == ("SIGNALED",)
    assert job.outcome() is Outcome.USER_FAILURE
    assert "signal=SIGKILL" in job.describe()


def test_slurmdb_only_record():
    job = JobInfo.parse(SLURMDB_ONLY)
    assert job.source == "slurmdb"
    assert job.state == ("COMPLETED",) and job.is_terminal
    assert job.comment == "vsp-run-key=run-1" and job.carries_run_key("run-1")
    assert job.user_name == "alice" and job.restart_cnt == 2 and job.priority == 4242
    assert job.node_count == 1
    assert (job.submit_time, job.start_time, job.end_time) == (
        1_700_000_000,
        1_700_000_050,
        1_700_000_900,
    )
    assert job.outcome() is Outcome.SUCCEEDED
    assert job.describe() == "job 105 COMPLETED priority=4242 restarts=2 exit=0 nodes=a4-0"


def test_legacy_plain_shapes():
    live = JobInfo.parse(LEGACY_LIVE)
    assert live.state == ("RUNNING",) and live.priority == 10801 and live.return_code == 0
    assert live.start_time == 1_796_232_476 and live.outcome() is Outcome.RUNNING
    db = JobInfo.parse(LEGACY_DB)
    assert db.source == "slurmdb" and db.exit_status == ("SUCCESS",)
    assert db.outcome() is Outcome.SUCCEEDED


@pytest.mark.parametrize(
    "raw, rc, sig",
    [
        (143 << 8, 143, None),  # wait status: exit 143
        (1 << 8, 1, None),
        (7, 7, None),
        ({"status": ["SIGNALED"], "signal": {"id": 15}}, None, "SIGTERM"),
        ({"signal": {"name": "SIGUSR1"}}, None, "SIGUSR1"),
        ({"signal": {"name": "Terminated", "id": nv(15)}}, None, "SIGTERM"),
        (None, None, None),
    ],
)
def test_exit_code_shapes(raw, rc, sig):
    job = JobInfo.parse({"job_id": 1, "job_state": ["FAILED"], "exit_code": raw})
    assert (job.return_code, job.signal) == (rc, sig)


@pytest.mark.parametrize(
    "state, parsed",
    [
        ("CANCELLED by 1000", ("CANCELLED",)),
        ("FAILED+", ("FAILED",)),
        (["running", "CONFIGURING"], ("RUNNING", "CONFIGURING")),
        ([], ()),
    ],
)
def test_state_strings_are_normalised(state, parsed):
    assert JobInfo.parse({"job_id": 1, "job_state": state}).state == parsed


def test_unknown_state_is_not_terminal():
    job = JobInfo.parse({"job_id": 1, "job_state": ["WEIRD"]})
    assert job.base_state == "UNKNOWN" and not job.is_terminal
    assert job.outcome() is Outcome.RUNNING


def test_requeue_hold_is_held_and_requeued():
    job = JobInfo.parse(
        {"job_id": 1, "job_state": ["PENDING", "REQUEUE_HOLD"], "state_reason": "JobHeldAdmin"}
    )
    assert job.is_held and job.is_requeued and job.outcome() is Outcome.PENDING


def test_number_struct_forms():
    assert slurm_job.number(nv(5)) == 5
    assert slurm_job.number(nv(5, set_=False)) is None
    assert slurm_job.number(nv(5, infinite=True)) is None
    assert slurm_job.number("12") == 12
    assert slurm_job.number("x") is None
    assert slurm_job.number(None) is None


def job(state, rc=None, sig=None, reason=""):
    raw = {"job_id": 1, "job_state": state, "state_reason": reason}
    raw["exit_code"] = exit_code([], rc=rc, sig_id=sig)
    return JobInfo.parse(raw)


@pytest.mark.parametrize(
    "state, rc, sig, reason, outcome",
    [
        (["COMPLETED"], 0, None, "None", Outcome.SUCCEEDED),
        (["COMPLETED"], None, None, "", Outcome.SUCCEEDED),
        (["PREEMPTED"], None, None, "", Outcome.PREEMPTED),
        (["NODE_FAIL"], None, None, "", Outcome.PREEMPTED),
        (["BOOT_FAIL"], None, None, "", Outcome.PREEMPTED),
        (["FAILED"], 143, None, "NonZeroExitCode", Outcome.PREEMPTED),  # EXIT_PREEMPTED
        (["FAILED"], 0, 15, "", Outcome.PREEMPTED),  # killed by SIGTERM, no shell
        (["FAILED"], 1, None, "JobLaunchFailure", Outcome.PREEMPTED),
        (["FAILED"], 1, None, "NonZeroExitCode", Outcome.USER_FAILURE),
        (["FAILED"], 0, 9, "", Outcome.USER_FAILURE),
        (["OUT_OF_MEMORY"], 0, None, "", Outcome.USER_FAILURE),
        (["TIMEOUT"], 0, None, "TimeLimit", Outcome.USER_FAILURE),
        (["DEADLINE"], None, None, "", Outcome.USER_FAILURE),
        (["CANCELLED"], 143, None, "", Outcome.CANCELLED),
        (["CANCELLED"], None, None, "", Outcome.CANCELLED),
        (["PENDING"], None, None, "Priority", Outcome.PENDING),
        (["RUNNING"], None, None, "", Outcome.RUNNING),
        (["SUSPENDED"], None, None, "", Outcome.RUNNING),
        (["PREEMPTED", "REQUEUED"], None, None, "", Outcome.RUNNING),
        (["CANCELLED", "COMPLETING"], None, None, "", Outcome.RUNNING),
        (["FAILED", "CONFIGURING"], 1, None, "", Outcome.RUNNING),
    ],
)
def test_outcome_table(state, rc, sig, reason, outcome):
    assert job(state, rc, sig, reason).outcome() is outcome


def test_outcome_values_are_plain_strings():
    assert [o.value for o in Outcome] == [
        "PENDING",
        "RUNNING",
        "SUCCEEDED",
        "PREEMPTED",
        "USER_FAILURE",
        "CANCELLED",
    ]
    assert Outcome.PREEMPTED == "PREEMPTED"
