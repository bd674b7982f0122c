"""A submission whose answer is lost is looked up, then sent again; racing copies converge.

Against the emulated Slurm: a reset before the server applied the submit leaves no job (the
backend finds none and submits again, once); a reset after it leaves the job (found, not sent
again); two copies of one training step submitting at once end with one active job, the same
in both copies, the other cancelled.
"""

from __future__ import annotations

import sys
import threading
import time

import pytest

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import polling, rest
from vsp.components.runtime.slurm import api
from vsp.components.runtime.training.backends import slurm
from vsp.components.runtime.training.recovery import Target

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "llmtrain"
SUBMIT = "/slurm/v0.0.42/job/submit"
SPOT = Target("spot", spot=True)
FAST = polling.Backoff(initial=0.05, maximum=0.1, jitter=0)


@pytest.fixture
def cluster(slurm_cluster, monkeypatch):
    monkeypatch.setattr(slurm, "SUBMIT_BACKOFF", FAST)
    return slurm_cluster(CLUSTER)


def backend(tmp_path) -> slurm.SlurmBackend:
    client = api.SlurmClient(
        rest.VertexRestClient(LOCATION), resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
    )
    work = tmp_path / "shared"
    training = slurm.SlurmTraining(
        command=[sys.executable, "-c", "import time; time.sleep(30)"],
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
    )
    return slurm.SlurmBackend(client, training, [SPOT], pipeline_run="run-1")


def submits(emulator) -> list[int]:
    return [
        e["status"] if isinstance(e["status"], int) else 0
        for e in emulator.journal()
        if (e.get("body") or {}).get("path", "").startswith(SUBMIT)
    ]


def active(the_backend, run_key: str) -> list[str]:
    jobs = the_backend.client.find_jobs(run_key)
    return sorted(str(j.job_id) for j in jobs if not j.is_terminal)


def test_a_submit_reset_before_it_was_applied_is_sent_again(cluster, tmp_path):
    cluster.add_fault(action="reset_before", method="POST", body=SUBMIT.replace("/", "\\/"))
    the_backend = backend(tmp_path)
    attempt = the_backend.submit("key-a", 0, SPOT)
    assert submits(cluster) == [0, 200]
    assert active(the_backend, "key-a") == [attempt.job_id]
    the_backend.cancel(attempt)


def test_a_submit_applied_but_unanswered_is_found_not_sent_again(cluster, tmp_path):
    cluster.add_fault(action="reset_after", method="POST", body=SUBMIT.replace("/", "\\/"))
    the_backend = backend(tmp_path)
    attempt = the_backend.submit("key-b", 0, SPOT)
    assert len(submits(cluster)) == 1
    assert active(the_backend, "key-b") == [attempt.job_id]
    the_backend.cancel(attempt)


def test_two_copies_of_one_step_converge_on_one_job(cluster, tmp_path):
    barrier = threading.Barrier(2)
    copies = [backend(tmp_path), backend(tmp_path)]
    for copy in copies:
        original = copy.client.submit

        def held(job, original=original):
            barrier.wait(timeout=30)
            return original(job)

        copy.client.submit = held
    results: list = [None, None]

    def run(index: int) -> None:
        results[index] = copies[index].submit("key-c", 0, SPOT)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(submits(cluster)) == 2
    ids = {r.job_id for r in results}
    assert len(ids) == 1, results
    # The loser was cancelled (it ends after Slurm's kill wait); the winner runs on.
    deadline = time.monotonic() + 15
    while active(copies[0], "key-c") != sorted(ids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert active(copies[0], "key-c") == sorted(ids)
    copies[0].cancel(results[0])


def test_a_copy_whose_job_the_other_copy_cancelled_adopts_the_survivor(cluster, tmp_path):
    """The other copy lists both jobs and cancels this copy's job before this copy lists."""
    first, second = backend(tmp_path), backend(tmp_path)
    kept = first.submit("key-d", 0, SPOT)
    original = second.client.submit

    def submitted_then_cancelled_by_the_first_copy(job):
        job_id = original(job)
        assert first._converge("key-d", set(), kept).job_id == kept.job_id
        return job_id

    second.client.submit = submitted_then_cancelled_by_the_first_copy
    adopted = second.submit("key-d", 0, SPOT)
    assert adopted.job_id == kept.job_id
    assert adopted.target == SPOT
    assert len(submits(cluster)) == 2
    deadline = time.monotonic() + 15
    while active(first, "key-d") != [kept.job_id] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert active(first, "key-d") == [kept.job_id]
    first.cancel(kept)
