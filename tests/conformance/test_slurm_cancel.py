"""Slurm conformance, holds and cancels: a held job (the user's and the administrator's hold),
cancelling it pending and running, and cancelling what is already gone.
"""

from __future__ import annotations

import time

import pytest

from tests.conformance.scenario_jobs import job, sh, stepd_lines

pytestmark = pytest.mark.slurm_conformance


def test_cancel_while_pending(slurm_backend):
    desc = job(slurm_backend, "held", sh("true"), extra_fields={"hold": True})
    job_id = slurm_backend.client.submit(desc)
    pending = slurm_backend.client.get_job(job_id)
    assert pending.state == ("PENDING",) and pending.state_reason == "JobHeldUser"
    assert pending.exit_status == ("SUCCESS",) and pending.return_code == 0
    path = slurm_backend.client.slurm_path(f"job/{job_id}")
    # A job update reads its fields at the top: wrapped as a submit's, nothing changes.
    wrapped = slurm_backend.client.call("POST", path, {"job": {"hold": False}}, idempotent=True)
    assert wrapped.ok and [w["source"] for w in wrapped.payload["warnings"]] == ["#/job/hold/"]
    assert slurm_backend.client.get_job(job_id).state_reason == "JobHeldUser"
    later = {"set": True, "infinite": False, "number": int(time.time()) + 3600}
    desc = job(slurm_backend, "admin-held", sh("true"), extra_fields={"begin_time": later})
    other = slurm_backend.client.submit(desc)
    other_path = slurm_backend.client.slurm_path(f"job/{other}")
    held = slurm_backend.client.call("POST", other_path, {"hold": True}, idempotent=True)
    assert held.ok
    # Held by a job update, which the Slurm Job API makes as root: the administrator's hold.
    assert slurm_backend.client.get_job(other).state_reason == "JobHeldAdmin"
    assert slurm_backend.client.cancel(other) is True
    assert slurm_backend.client.cancel(job_id) is True
    cancelled = slurm_backend.finish(job_id)
    assert cancelled.base_state == "CANCELLED" and cancelled.outcome().value == "CANCELLED"
    assert slurm_backend.client.cancel(job_id) is False  # already finished: Slurm error 2021


def test_cancel_while_running(slurm_backend):
    desc = job(slurm_backend, "long", sh("echo up > up.txt; sleep 300"))
    job_id = slurm_backend.client.submit(desc)
    slurm_backend.wait(job_id, lambda j: j.state == ("RUNNING",))
    up = slurm_backend.workdir / "up.txt"
    slurm_backend.wait(job_id, lambda j: up.exists())
    assert slurm_backend.client.cancel(job_id) is True
    cancelled = slurm_backend.finish(job_id)
    assert cancelled.state == ("CANCELLED",) and cancelled.outcome().value == "CANCELLED"
    log = slurm_backend.workdir / f"long-{job_id}.out"
    assert stepd_lines(log, job_id) == ["CANCELLED"]
    assert slurm_backend.client.cancel(job_id) is False
    assert slurm_backend.client.cancel(99_999_999) is False  # unknown job: nothing to cancel
