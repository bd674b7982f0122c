"""Entry points of the teardown components: decide, keep warm, and the exit task's safety net.

The end of a ``slurm-spot-training`` run:

* ``decide`` (in the graph, after registration) weighs keeping the cluster warm against
  deleting it (``teardown.decide``), with the cadence taken from the schedule's cron, an
  expected interval, or the start times of earlier runs of the same pipeline listed from
  Vertex AI Pipelines (``teardown_pricing.decide`` first prices the cluster for a price of
  0). Its ``action`` output drives a ``dsl.If``/``dsl.Elif``/``dsl.Else``: ``keep`` labels
  the cluster with an expiry (``keep``), ``shrink`` labels it and scales its compute pools to
  no nodes (``cluster.shrink.shrink``), ``delete`` deletes it.
* ``finalize`` is the exit task, so it runs however the run ended. After a success the decision
  branch has already acted and it changes nothing. After a cancel it deletes the cluster. After
  a failure it keeps the cluster for ``failure_keep_minutes`` with an expiry label (so retrying
  the failed run, which re-runs only the failed tasks and resumes training from the checkpoint,
  finds it warm; the reaper deletes it if nobody retries), or deletes it when that is 0.

A cluster a preempted run still needs is never deleted under it: preemptions are handled inside
the training step (its Slurm jobs requeue or are resubmitted on the same cluster), and the exit
task starts only after the whole group has ended, task retries included.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time
from collections.abc import Callable, Sequence

from vsp.components.runtime.cluster import in_use as cluster_in_use
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, gcp_labels, rest, step
from vsp.components.runtime.teardown import decision as teardown

log = logging.getLogger(__name__)

HISTORY_PAGE_SIZE = 50
FINISHED_OR_RUNNING = frozenset(
    {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_RUNNING", "PIPELINE_STATE_FAILED"}
)
RETRY_LABEL_VALUE = "retry"


@dataclasses.dataclass(frozen=True)
class FinalizeResult:
    """What the exit task did.

    Attributes:
        action: ``none`` (the decision branch already acted), ``deleted``, ``absent`` (there
            was no cluster) or ``kept`` (kept for a retry, with an expiry).
        reason: One sentence for the log.
    """

    action: str
    reason: str


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
        listed = client.get(path, params=params)
    except (errors.ApiError, errors.TransientError) as exc:
        log.warning("could not list earlier runs of %s (%s); cadence unknown", pipeline_name, exc)
        return []
    times = []
    for job in listed.get("pipelineJobs") or []:
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
    """The keep-or-delete decision, with the run history filled in when no cron or interval.

    The prices are used as given; ``teardown_pricing.decide`` derives those that are 0 from the
    cluster first.

    Returns:
        The inputs as weighed (with the run history) and the decision.

    Raises:
        errors.UserError: An input is invalid (checked before any request).
    """
    inputs.validate()
    if inputs.schedule_cron is None and inputs.interval_seconds is None and client is not None:
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


def finalize(
    client: rest.VertexRestClient,
    ref: cluster_resource.ClusterRef,
    *,
    state: str,
    failure_keep_minutes: float,
    delete: Callable[[], bool],
    now: float | None = None,
) -> FinalizeResult:
    """The exit task's rule for the cluster, by the final state of the run's group.

    Args:
        client: REST client.
        ref: The cluster.
        state: ``SUCCEEDED``, ``FAILED`` or ``CANCELLED`` (see ``step.normalize_final_state``).
        failure_keep_minutes: After a failure, keep the cluster this long for a retry
            (0 = delete it).
        delete: Deletes the cluster; returns whether it existed.
        now: Epoch seconds; default ``time.time()``.
    """
    state = step.normalize_final_state(state)
    if failure_keep_minutes < 0:
        raise errors.UserError(
            f"failure_keep_minutes = {failure_keep_minutes}: must be >= 0. Fix: use 0 to delete "
            "the cluster after a failure, or the minutes to keep it for a retry."
        )
    if state == "SUCCEEDED":
        return FinalizeResult("none", "the run succeeded; the teardown decision already acted")
    if state == "FAILED" and failure_keep_minutes > 0:
        expires = (time.time() if now is None else now) + failure_keep_minutes * 60.0
        labels = {
            gcp_labels.TEARDOWN: RETRY_LABEL_VALUE,
            gcp_labels.EXPIRES_AT: teardown.format_label_time(expires),
        }
        action = cluster_in_use.keep_or_delete(client, ref, labels, delete=delete)
        if action == cluster_in_use.ABSENT:
            return FinalizeResult("absent", "the run failed and there is no cluster to keep")
        if action == cluster_in_use.DELETED:
            return FinalizeResult(
                "deleted", "the run failed and the service refused the expiry labels"
            )
        return FinalizeResult(
            "kept",
            f"the run failed; the cluster is kept {failure_keep_minutes:g} min for a retry "
            f"(expires {labels[gcp_labels.EXPIRES_AT]}), then reaped",
        )
    existed = delete()
    why = "was cancelled" if state == "CANCELLED" else "failed (failure_keep_minutes is 0)"
    return FinalizeResult("deleted" if existed else "absent", f"the run {why}")


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
