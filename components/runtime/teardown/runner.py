"""Entry points of the teardown components: decide, keep warm, and the exit task's safety net.

The end of a ``slurm-spot-training`` run:

* ``decide`` (in the graph, after registration) weighs keeping the cluster warm against
  deleting it (``teardown.decide``), with the cadence taken from the schedule's cron, an
  expected interval, or the start times of earlier runs of the same pipeline listed from
  Vertex AI Pipelines, listed with a cron too (they show missed and late runs);
  ``teardown_pricing.decide`` first prices the cluster for a price of 0. Its ``action``
  output drives a ``dsl.If``/``dsl.Elif``/``dsl.Else``: ``keep`` labels the cluster with an
  expiry (``keep``), ``shrink`` labels it and scales its compute pools to no nodes
  (``cluster.shrink.shrink``), ``delete`` deletes it.
* the exit task, which runs however the run ended, is ``teardown.exit_task.finalize``.

A cluster a preempted run still needs is never deleted under it: preemptions are handled inside
the training step (its Slurm jobs requeue or are resubmitted on the same cluster), and the exit
task starts only after the whole group has ended, task retries included.
"""

from __future__ import annotations

import dataclasses
import datetime
import itertools
import logging
from collections.abc import Sequence

from vsp.components.runtime.cluster import in_use as cluster_in_use
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, gcp_labels, rest
from vsp.components.runtime.teardown import decision as teardown

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

    Reads the list page by page (``pageToken``), newest first, up to ``HISTORY_MAX_JOBS`` runs.

    Tolerant: when the runs cannot be listed (no permission, no Pipelines API, a transient
    error), the history is empty and the decision treats the cadence as unknown.
    """
    if not pipeline_name:
        return []
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
        return []
    times = []
    for job in listed:
        if job.get("state") not in FINISHED_OR_RUNNING:
            continue
        moment = _epoch(job.get("startTime") or job.get("createTime") or "")
        if moment is not None:
            times.append(moment)
    return sorted(times)


def decide(
    inputs: teardown.TeardownInputs,
    *,
    client: rest.VertexRestClient | None = None,
    project: str = "",
    location: str = "",
    pipeline_name: str = "",
) -> tuple[teardown.TeardownInputs, teardown.TeardownDecision]:
    """The keep-or-delete decision, with the run history filled in when no interval is given.

    Without a cron the history predicts the cadence; with one, the cron predicts the next run
    and the history shows how often runs were missed or started late (``teardown_expiry``).

    The prices are used as given; ``teardown_pricing.decide`` derives those that are 0 from the
    cluster first.

    Returns:
        The inputs as weighed (with the run history) and the decision.

    Raises:
        errors.UserError: An input is invalid (checked before any request).
    """
    inputs.validate()
    if inputs.interval_seconds is None and client is not None:
        history = run_history(client, project, location, pipeline_name)
        log.info("%d earlier runs of %s found for the cadence", len(history), pipeline_name)
        inputs = dataclasses.replace(inputs, run_start_times=history)
    decision = teardown.decide(inputs)
    log.info("teardown decision: %s", decision.reason)
    return inputs, decision


def decision_metrics(
    inputs: teardown.TeardownInputs, decision: teardown.TeardownDecision
) -> dict[str, float]:
    """The decision's metrics plus the inputs it weighed (prices per hour, minutes)."""
    weighed = {
        "teardown_input_idle_price_per_hour": inputs.idle_price_per_hour,
        "teardown_input_provisioning_minutes": inputs.provisioning_minutes,
        "teardown_input_provisioning_price_per_hour": inputs.provisioning_price_per_hour,
        "teardown_input_delay_penalty_per_hour": inputs.delay_penalty_per_hour,
        "teardown_input_earlier_runs": len(inputs.run_start_times),
        "teardown_input_idle_price_from_cluster": inputs.idle_cost is not None,
    }
    if inputs.interval_seconds is not None:
        weighed["teardown_input_interval_seconds"] = inputs.interval_seconds
    return {**decision.as_metrics(), **{k: float(v) for k, v in weighed.items()}}


def keep(
    client: rest.VertexRestClient, ref: cluster_resource.ClusterRef, labels: dict[str, str]
) -> bool:
    """Labels the kept cluster (``vsp-teardown``, ``vsp-expires-at``).

    A kept cluster must carry its expiry: if the service refuses the labels update, the cluster
    is deleted instead (unless another run's jobs use it) and the log says why
    (``cluster.in_use.keep_or_delete``).

    Returns:
        False when the cluster no longer exists or was deleted instead (nothing kept).
    """
    unknown = sorted(set(labels) - {gcp_labels.TEARDOWN, gcp_labels.EXPIRES_AT})
    if unknown:
        raise errors.UserError(
            f"keep labels {unknown} are not teardown labels. Fix: pass the decision's labels."
        )
    return cluster_in_use.keep_or_delete(client, ref, labels) == cluster_in_use.KEPT


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
