"""The CustomJob backend of the training supervisor: attempts are Vertex AI CustomJobs.

Vertex restarts a preempted Spot job in place up to six times and then fails it with a stockout;
the supervisor sees the in-place restarts as RUNNING -> PENDING transitions (counted as
preemptions) and a stockout failure as a preemption to recover by submitting a new job with the
same ``baseOutputDirectory``, hence the same ``AIP_CHECKPOINT_DIR``. Jobs carry the run key as a
label, so a retried step finds them again instead of submitting.

Why REST by hand and not google-cloud-aiplatform, which covers this service: the step would have
to install it at start on a stock image, 56 s and 302 MB more (46 packages, with grpcio and
google-cloud-storage/-bigquery) and 8 s to import, measured on 2 cores; the few calls made here
need only ``core.rest`` (requests + google-auth). The SDK is checked against the emulator in
``tests/emulator/test_emu_google_sdk.py``.
"""

from __future__ import annotations

import logging
import re
import time
import urllib.parse
from typing import Any

from vsp.components.runtime.core import errors, gcp_labels, rest
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training.backends.custom_job_spec import CustomJobTraining
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.recovery import Attempt, Target

log = logging.getLogger(__name__)

_STOCKOUT_WORDS = ("STOCKOUT", "stockout", "preempt", "Preempt")
# How Vertex words a replica's exit: "The replica workerpool0-0 exited with a non-zero status of
# 1. To find out more ..." (the job resource has no exit code field).
_REPLICA_STATUS = re.compile(r"exited with a non-zero status of (?P<code>\d+)")


def classify(job: dict[str, Any]) -> Outcome:
    """Maps a CustomJob's state (and error) to an outcome."""
    state = str(job.get("state", "")).removeprefix("JOB_STATE_")
    if state in ("QUEUED", "PENDING", "UNSPECIFIED", ""):
        return Outcome.PENDING
    if state in ("RUNNING", "CANCELLING", "UPDATING"):
        return Outcome.RUNNING
    if state == "SUCCEEDED":
        return Outcome.SUCCEEDED
    if state == "CANCELLED":
        return Outcome.CANCELLED
    error = job.get("error") or {}
    message = str(error.get("message", ""))
    if error.get("code") == 8 or any(word in message for word in _STOCKOUT_WORDS):
        return Outcome.PREEMPTED
    return Outcome.USER_FAILURE  # FAILED, EXPIRED, PAUSED, PARTIALLY_SUCCEEDED


class CustomJobBackend(TrainingBackend):
    """Attempts as CustomJobs; targets are scheduling strategies (SPOT, STANDARD, FLEX_START).

    Args:
        client: REST client of the job's location.
        parent: ``projects/P/locations/L``.
        training: What every attempt runs.
        pipeline_run: Pipeline run name, put on every job as ``vsp-pipeline-run`` so the run's
            exit task finds all of its jobs ('' = no such label).
    """

    resource_type = "CustomJob"
    preempted_then = "restarted in place"

    def __init__(
        self,
        client: rest.VertexRestClient,
        parent: str,
        training: CustomJobTraining,
        pipeline_run: str = "",
    ):
        self.client = client
        self.parent = parent
        self.training = training
        self.run_labels = (
            {gcp_labels.PIPELINE_RUN: gcp_labels.unique_value(pipeline_run)} if pipeline_run else {}
        )
        self._seen: dict[str, Outcome] = {}

    def find(self, run_key: str) -> list[Attempt]:
        mine = run_jobs(self.client, self.parent, run_key)
        mine.sort(key=lambda j: int((j.get("labels") or {}).get(gcp_labels.ATTEMPT, "0") or 0))
        return [Attempt(j["name"].rsplit("/", 1)[-1], _target(j)) for j in mine if j.get("name")]

    def submit(self, run_key: str, index: int, target: Target) -> Attempt:
        labels = {
            **self.run_labels,
            gcp_labels.RUN_KEY: gcp_labels.unique_value(run_key),
            gcp_labels.ATTEMPT: str(index),
        }
        body = self.training.request_body(target.name, labels, index, run_key)
        try:
            job = self.client.post(f"v1/{self.parent}/customJobs", body)
        except errors.TransientError as exc:
            log.warning("create got no usable answer (%s): looking the job up first", exc)
            for attempt in self.find(run_key):
                job_labels = self._labels(attempt.job_id)
                if job_labels.get(gcp_labels.ATTEMPT) == str(index):
                    return attempt
            raise
        return Attempt(job["name"].rsplit("/", 1)[-1], target)

    def _path(self, job_id: str) -> str:
        return f"v1/{self.parent}/customJobs/{job_id}"

    def _labels(self, job_id: str) -> dict[str, str]:
        return self.client.get(self._path(job_id)).get("labels") or {}

    def refresh(self, attempt: Attempt) -> None:
        job = self.client.get(self._path(attempt.job_id))
        outcome = classify(job)
        before = self._seen.get(attempt.job_id)
        if before is Outcome.RUNNING and outcome is Outcome.PENDING:
            attempt.requeues += 1  # Vertex restarted the preempted job in place
        self._seen[attempt.job_id] = outcome
        attempt.outcome = outcome
        attempt.nodes = self.training.replica_count
        error = job.get("error") or {}
        state = str(job.get("state", "")).removeprefix("JOB_STATE_")
        attempt.detail = f"{state} {error.get('message', '')}".strip()
        status = _REPLICA_STATUS.search(str(error.get("message", "")))
        if status and outcome is Outcome.USER_FAILURE:
            attempt.exit_code = int(status["code"])

    def cancel(self, attempt: Attempt) -> None:
        cancel_job(self.client, self._path(attempt.job_id))

    def uri(self, attempt: Attempt) -> str:
        return self.client.url(self._path(attempt.job_id))

    def limit_requests(self, seconds: float) -> None:
        self.client.deadline_at = time.monotonic() + seconds

    def log_tail(self, attempt: Attempt) -> str:
        project = self.parent.split("/")[1]
        query = urllib.parse.quote(
            f'resource.type="ml_job"\nresource.labels.job_id="{attempt.job_id}"', safe=""
        )
        return (
            f"(the job's log is in Cloud Logging, resource ml_job, job_id {attempt.job_id}: "
            f"https://console.cloud.google.com/logs/query;query={query}?project={project})"
        )

    def api_calls(self) -> int | None:
        sent = getattr(self.client, "requests_sent", None)  # None: a stand-in client
        return sent if isinstance(sent, int) else None


def labelled_jobs(
    client: rest.VertexRestClient, parent: str, label: str, value: str
) -> list[dict[str, Any]]:
    """The CustomJobs of ``parent`` whose ``label`` is ``value``, found with the API's label
    filter (and checked again here, so a service that ignored the filter gives the right set)."""
    query = {"pageSize": 100, "filter": f'labels.{label}="{value}"'}
    jobs = client.list_all(f"v1/{parent}/customJobs", "customJobs", query)
    return [j for j in jobs if (j.get("labels") or {}).get(label) == value]


def run_jobs(client: rest.VertexRestClient, parent: str, run_key: str) -> list[dict[str, Any]]:
    """The CustomJobs of ``parent`` that carry ``run_key``."""
    return labelled_jobs(client, parent, gcp_labels.RUN_KEY, gcp_labels.unique_value(run_key))


def cancel_unfinished(client: rest.VertexRestClient, parent: str, pipeline_run: str) -> list[str]:
    """Sends ``:cancel`` to every job of the pipeline run still queued, pending or running.

    Returns:
        The names of the jobs cancelled. A job that finished meanwhile is skipped (logged).
    """
    cancelled = []
    for job in labelled_jobs(
        client, parent, gcp_labels.PIPELINE_RUN, gcp_labels.unique_value(pipeline_run)
    ):
        if classify(job) not in (Outcome.PENDING, Outcome.RUNNING) or not job.get("name"):
            continue
        if cancel_job(client, f"v1/{job['name']}"):
            log.info("cancelled %s", job["name"])
            cancelled.append(job["name"])
    return cancelled


def cancel_job(client: rest.VertexRestClient, path: str) -> bool:
    """Sends ``:cancel`` to the job at ``path``; False when it had finished or is gone."""
    try:
        client.post(f"{path}:cancel", {}, idempotent=True)
    except (errors.NotFoundError, errors.InvalidArgumentError) as exc:
        log.info("cancel of %s: %s (already finished?)", path, exc.message)
        return False
    return True


def _target(job: dict[str, Any]) -> Target:
    strategy = ((job.get("jobSpec") or {}).get("scheduling") or {}).get("strategy", "STANDARD")
    return Target(strategy, spot=strategy == "SPOT")
