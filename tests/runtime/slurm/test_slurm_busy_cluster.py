"""A cluster busy updating refuses the Slurm Job API; calls wait it out instead of failing."""

from __future__ import annotations

import pytest
from slurm_fakes import make_job

from vsp.components.runtime.core import errors, polling
from vsp.components.runtime.slurm import error_codes

SUBMIT = "/slurm/v0.0.42/job/submit"


def _busy(state: str = "UPDATING") -> errors.InvalidArgumentError:
    return errors.InvalidArgumentError(
        f'ModelDevelopmentCluster "c" is {state}; the Slurm API needs a RUNNING cluster.',
        http_status=400,
        status="FAILED_PRECONDITION",
    )


def test_a_submit_refused_while_updating_is_sent_again_once_the_cluster_is_back(fake, client):
    client.clock = polling.FakeClock()
    fake.on("POST", SUBMIT, _busy(), _busy("REPAIRING"), {"job_id": 9, "errors": []})
    assert client.submit(make_job()) == 9
    assert len(fake.calls) == 3  # nothing was proxied while busy, so resending is safe
    assert client.clock.sleeps and all(s <= 15.0 for s in client.clock.sleeps)


def test_a_cluster_busy_for_longer_than_busy_wait_is_transient(fake, client):
    client.clock = polling.FakeClock()
    client.busy_wait = 60.0
    fake.on("GET", "/slurm/v0.0.42/jobs", _busy())
    with pytest.raises(errors.TransientError, match="cluster busy"):
        client.list_jobs()
    assert sum(client.clock.sleeps) <= 60.0


def test_other_failed_preconditions_and_transients_are_not_retried_here(fake, client):
    client.clock = polling.FakeClock()
    stopping = errors.InvalidArgumentError(
        "cluster is STOPPING", http_status=400, status="FAILED_PRECONDITION"
    )
    fake.on("GET", "/slurm/v0.0.42/jobs", stopping)
    with pytest.raises(errors.InvalidArgumentError, match="STOPPING"):
        client.list_jobs()
    fake.on("POST", SUBMIT, errors.UnavailableError("down", http_status=503, status="UNAVAILABLE"))
    with pytest.raises(error_codes.SlurmSubmitUnknownError):
        client.submit(make_job())
    assert client.clock.sleeps == []
