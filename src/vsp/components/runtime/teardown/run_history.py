"""Earlier runs of a pipeline, listed from Vertex AI Pipelines: when each one started and ended.

The teardown decision predicts the next run from them when there is no cron or interval, and
with a cron sees from them how often runs were missed or started late. The end times of the
finished runs make each idle gap exact (a run's end to the next start) instead of estimated.
"""

from __future__ import annotations

import datetime
import itertools
import logging
from collections.abc import Sequence

from vsp.components.runtime.core import errors, rest

log = logging.getLogger(__name__)

HISTORY_PAGE_SIZE = 50
# Runs read at most, newest first, across pages: older runs add little to a cadence estimate.
HISTORY_MAX_JOBS = 500
FINISHED_OR_RUNNING = frozenset(
    {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_FAILED"}
)


def _epoch(text: str) -> float | None:
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()


def run_history(
    client: rest.VertexRestClient, project: str, location: str, pipeline_name: str
) -> list[float]:
    """Start times (epoch s) of earlier runs of ``pipeline_name``, oldest first.

    The start times of ``run_times``; see there.
    """
    return run_times(client, project, location, pipeline_name)[0]


def run_times(
    client: rest.VertexRestClient, project: str, location: str, pipeline_name: str
) -> tuple[list[float], list[float]]:
    """Start times and end times (epoch s) of earlier runs of ``pipeline_name``, oldest first.

    The end times are those of the finished runs listed that have one (``endTime``), so there
    may be fewer of them than start times (the running one, this run, has none).

    Reads the list page by page (``pageToken``), newest first, up to ``HISTORY_MAX_JOBS`` runs.

    Tolerant: when the runs cannot be listed (no permission, no Pipelines API, a transient
    error), the history is empty and the decision treats the cadence as unknown.
    """
    if not pipeline_name:
        return [], []
    path = f"v1/projects/{project}/locations/{location}/pipelineJobs"
    # pipeline_name filters are documented for pipelineJobs.list:
    # https://cloud.google.com/vertex-ai/docs/reference/rest/v1/projects.locations.pipelineJobs/list
    params = {
        "filter": f'pipeline_name="{pipeline_name}"',
        "orderBy": "create_time desc",
        "pageSize": HISTORY_PAGE_SIZE,
    }
    try:
        pages = client.list_all(path, "pipelineJobs", params)
        listed = list(itertools.islice(pages, HISTORY_MAX_JOBS))
    except (errors.ApiError, errors.TransientError) as exc:
        log.warning("could not list earlier runs of %s (%s); cadence unknown", pipeline_name, exc)
        return [], []
    times, ends = [], []
    for job in listed:
        if job.get("state") not in FINISHED_OR_RUNNING:
            continue
        moment = _epoch(job.get("startTime") or job.get("createTime") or "")
        if moment is None:
            continue
        times.append(moment)
        end = _epoch(job.get("endTime") or "")
        if end is not None and end >= moment and job.get("state") != "PIPELINE_STATE_RUNNING":
            ends.append(end)
    return sorted(times), sorted(ends)


def parse_run_times(values: Sequence[object]) -> list[float]:
    """Epoch seconds from numbers or RFC 3339 strings (a component's ``run_start_times``)."""
    times = []
    for value in values:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            times.append(float(value))
            continue
        moment = _epoch(str(value))
        if moment is None:
            raise errors.UserError(
                f"run start time {value!r} is neither epoch seconds nor RFC 3339. "
                "Fix: use e.g. 1767225600 or '2026-01-01T00:00:00Z'."
            )
        times.append(moment)
    return times
