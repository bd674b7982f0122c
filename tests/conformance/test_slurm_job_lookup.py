"""Slurm conformance, accounting: finding a job after it left the live queue, and the answer
of a Slurm without accounting (the local real Slurm runs no slurmdbd).
"""

from __future__ import annotations

import pytest

from tests.conformance.scenario_jobs import job, sh

pytestmark = pytest.mark.slurm_conformance


def test_job_lookup_after_it_left_the_live_queue(slurm_backend):
    if slurm_backend.kind == "real":
        pytest.skip(
            "the local real Slurm runs without slurmdbd (no /slurmdb endpoints): a finished job "
            "stays in its live queue for MinJobAge=300 s and is then gone; Vertex clusters have "
            "accounting. The fallback without accounting is covered by test_submit_poll_complete."
        )
    slurm_backend.server.app.update_settings(slurm_min_job_age_seconds=0.5)
    desc = job(slurm_backend, "aged", sh("true"))
    job_id = slurm_backend.client.submit(desc)
    slurm_backend.finish(job_id)
    aged = slurm_backend.wait(job_id, lambda j: j.source == "slurmdb")
    assert aged.base_state == "COMPLETED" and aged.return_code == 0
    found = slurm_backend.client.find_jobs(desc.run_key, include_accounting=True)
    assert [(j.job_id, j.source) for j in found] == [(job_id, "slurmdb")]


def test_without_accounting_slurmdb_is_a_plain_text_404(slurm_backend):
    # The local real Slurm runs no slurmdbd; the emulated one is switched to match.
    if slurm_backend.kind == "emulated":
        slurm_backend.server.app.update_settings(slurm_accounting=False)
    client = slurm_backend.client
    answer = client.call("GET", client.slurmdb_path("jobs"), idempotent=True)
    assert (answer.status, answer.payload, answer.text) == (
        404,
        {},
        "Unable find requested URL. Please view /openapi/v3 for API reference.",
    )
    desc = job(slurm_backend, "noacct", sh("true"))
    job_id = client.submit(desc)
    slurm_backend.finish(job_id)
    found = client.find_jobs(desc.run_key, include_accounting=True)
    assert [(j.job_id, j.source) for j in found] == [(job_id, "live")]
