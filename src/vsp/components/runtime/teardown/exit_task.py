"""The exit task's rule for the cluster, however the run ended, retried until it holds.

``finalize`` runs as the pipeline's exit task (``finalize_cluster``):

* after a success it changes nothing (the decision branch already acted);
* after a cancel it deletes the cluster;
* after a failure it keeps the cluster for ``failure_keep_minutes`` with an expiry label (so
  retrying the failed run finds it warm; the reaper deletes it if nobody retries), or deletes
  it when that is 0. A cluster in ERROR is deleted: a retry could not use it, and
  ``create_cluster`` would delete it anyway;
* after a failure or a cancel before the run created, reused or claimed the cluster
  (``used_by_run``), it leaves the cluster as the run that last used it left it.

Nothing may be left running without an expiry, so one failed request does not end the task: a
transient error or a failed operation (a DELETE or a label update whose operation ends in
error) is retried with backoff until ``deadline_seconds``. If it still fails, the last resort
labels the cluster to expire at once (the reaper deletes it on its next pass) and the task
fails with a transient error (exit code 75), which the compiled pipeline's task retry also
re-runs. A delete still in flight when the deadline cut the wait for it is waited for first:
it may yet delete the cluster (the task then ends ``deleted``) or fail and leave it RUNNING,
whose labels can then change (a STOPPING cluster's cannot). An operation the service rejects
(a user error) is retried like any failed operation: the cluster it leaves, in ERROR more
often than not, cannot take an expiry label.

The deadline is hard: every request's own wait and retries are bounded by what is left of it
(``rest.VertexRestClient.deadline_at``), and the last resort gets ``LAST_RESORT_SECONDS`` more,
so the task ends within ``deadline_seconds + LAST_RESORT_SECONDS`` even when the API does not
answer at all. Its message then says that the cluster's state is unknown and how to check it.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import (
    errors,
    gcp_labels,
    money,
    polling,
    readable_time,
    rest,
    step,
)
from vsp.components.runtime.teardown import cost, in_use, inputs

log = logging.getLogger(__name__)

RETRY_LABEL_VALUE = "retry"
FAILED_TEARDOWN_LABEL_VALUE = "teardown-failed"
DEFAULT_BACKOFF = polling.Backoff(initial=5.0, maximum=120.0)
# Seconds the last resort (one label update) may take after the deadline: one request's wait.
LAST_RESORT_SECONDS = 10.0
# Looks at a delete still in flight within those seconds.
LAST_RESORT_BACKOFF = polling.Backoff(initial=0.5, maximum=2.0)


@dataclasses.dataclass(frozen=True)
class FinalizeResult:
    """What the exit task did.

    Attributes:
        action: ``none`` (the decision branch already acted), ``deleted``, ``absent`` (there
            was no cluster) or ``kept`` (kept for a retry, or for another run using it, with an
            expiry).
        reason: One sentence for the log.
        expires_at: For a kept cluster, epoch seconds after which the reaper deletes it.
        price_per_hour: For a kept cluster, what it costs per idle hour, USD/hour (None when
            its machine types have no price in the table).
        in_use: Kept because another run uses it (not for a retry of this run).
    """

    action: str
    reason: str
    expires_at: float | None = None
    price_per_hour: float | None = None
    in_use: bool = False

    def summary(self, ref: resource.ClusterRef) -> str:
        """The cluster's fate in one line, for the step's output and the console."""
        if self.action != "kept":
            return f"{self.action}: {self.reason}"
        rate = "unknown" if self.price_per_hour is None else money.per_hour(self.price_per_hour)
        until = readable_time.utc(self.expires_at) if self.expires_at else "?"
        if self.in_use:
            return (
                f"kept: {self.reason}; labelled in use until {until}, idle at {rate}; the run "
                "using it decides at its end, else the reaper deletes it once idle and expired"
            )
        return (
            f"kept for a retry until {until}, idle at {rate}; the reaper deletes it then (or now: "
            f"vsp clusters delete --project {ref.project} --location {ref.location} "
            f"{ref.cluster_id})"
        )


def _idle_price(cluster: dict, location: str) -> float | None:
    """What the kept cluster costs per idle hour, from the price table; None without a price."""
    try:
        return cost.cluster_cost(cluster, location=location).total_per_hour
    except errors.UserError as exc:
        log.info("the kept cluster's cost per hour is unknown: %s", exc)
        return None


def used_by_run(cluster: dict, pipeline_run: str) -> bool:
    """Whether ``pipeline_run`` created the cluster, reused it, or holds a claim on it.

    A run that failed or was cancelled before either (in its parameter check, or waiting to
    start) leaves the cluster to the run that last used it: keeping it "for a retry" moved
    another run's expiry an hour on (a schedule failing its check every hour kept the cluster
    for ever), and cancelling deleted a cluster kept warm for the next run.
    """
    labels = cluster.get("labels") or {}
    run = gcp_labels.run_value(pipeline_run)
    return (
        labels.get(gcp_labels.PIPELINE_RUN) == run
        or labels.get(gcp_labels.LAST_RUN) == run
        or gcp_labels.lease_key(pipeline_run) in labels
    )


def _once(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    state: str,
    failure_keep_minutes: float,
    delete: Callable[[], bool],
    now: float,
    pipeline_run: str = "",
) -> FinalizeResult:
    keep = state == "FAILED" and failure_keep_minutes > 0
    if pipeline_run or keep:
        cluster = resource.ClusterResource(client, ref).get()
        if cluster is None:
            ended = "failed" if state == "FAILED" else "was cancelled"
            return FinalizeResult("absent", f"the run {ended} and there is no cluster to end")
        if pipeline_run and not used_by_run(cluster, pipeline_run):
            labels = cluster.get("labels") or {}
            last = labels.get(gcp_labels.LAST_RUN) or labels.get(gcp_labels.PIPELINE_RUN) or "?"
            return FinalizeResult(
                "none",
                "the run ended before it created or reused the cluster, which stays as its last "
                f"run ({last}) left it: labels and expiry unchanged",
            )
    if keep:
        if resource.cluster_state(cluster) == resource.ERROR:
            return _delete(
                client,
                ref,
                delete,
                "the run failed and the cluster is in ERROR, so no retry could use it",
            )
        expires = now + failure_keep_minutes * 60.0
        labels = {
            gcp_labels.TEARDOWN: RETRY_LABEL_VALUE,
            gcp_labels.EXPIRES_AT: gcp_labels.format_label_time(expires),
        }
        # The run is over: its claim ends, so another run's teardown may delete the cluster
        # (a retry of this run claims it again).
        action = in_use.keep_or_delete(
            client, ref, labels, delete=delete, pipeline_run=pipeline_run
        )
        if action == in_use.ABSENT:
            return FinalizeResult("absent", "the run failed and there is no cluster to keep")
        if action == in_use.DELETED:
            return FinalizeResult(
                "deleted", "the run failed and the service refused the expiry labels"
            )
        return FinalizeResult(
            "kept",
            f"the run failed; the cluster is kept {failure_keep_minutes:g} min for a retry "
            f"(expires {labels[gcp_labels.EXPIRES_AT]}), then reaped",
            expires_at=expires,
            price_per_hour=_idle_price(cluster, ref.location),
        )
    why = "was cancelled" if state == "CANCELLED" else "failed (failure_keep_minutes is 0)"
    return _delete(client, ref, delete, f"the run {why}")


def _delete(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    delete: Callable[[], bool],
    why: str,
) -> FinalizeResult:
    """``delete()``, told apart: deleted, absent, or kept because another run uses it (the
    delete then labels it in use with an expiry, ``in_use.keep_if_in_use``)."""
    if delete():
        return FinalizeResult("deleted", why)
    cluster = resource.ClusterResource(client, ref).get()
    if cluster is None:
        return FinalizeResult("absent", why)
    try:
        expires = gcp_labels.parse_label_time(cluster["labels"][gcp_labels.EXPIRES_AT])
    except (KeyError, TypeError, ValueError):
        expires = None  # no readable expiry: the summary says "?"
    return FinalizeResult(
        "kept",
        f"{why}, and another run uses the cluster",
        expires_at=expires,
        price_per_hour=_idle_price(cluster, ref.location),
        in_use=True,
    )


def _expire_now(client: rest.VertexRestClient, ref: resource.ClusterRef, pipeline_run: str) -> str:
    """The last resort: an expiry in the past, so the reaper deletes the cluster next time, and
    the run's claim ended (the reaper would take it for another run's use and keep the cluster).

    A delete still in flight (the cluster STOPPING: the deadline cut the wait for the last
    one) is waited for first, within ``LAST_RESORT_SECONDS``. Returns ``labelled``, ``deleted``
    (that delete went through after all) or ``''`` (neither could be told).
    """
    options = resource.ClusterOptions(timeout=LAST_RESORT_SECONDS, backoff=LAST_RESORT_BACKOFF)
    labels = {
        gcp_labels.TEARDOWN: FAILED_TEARDOWN_LABEL_VALUE,
        gcp_labels.EXPIRES_AT: gcp_labels.format_label_time(time.time()),
    }
    try:
        if resource.ClusterResource(client, ref, options=options).wait_not_stopping() is None:
            return "deleted"
        own = [gcp_labels.lease_key(pipeline_run)] if pipeline_run else []
        updated = cluster_labels.update_managed_labels(
            client, ref, set_labels=labels, remove=own, options=options
        )
    except (errors.VspError, OSError) as exc:
        log.error("could not label cluster %s to expire either: %s", ref.cluster_id, exc)
        return ""
    return "labelled" if updated is not None else ""


def _unknown_state(ref: resource.ClusterRef, reached: bool) -> str:
    """What to say when neither the rule nor the last resort held: state unknown, how to look.

    ``reached``: whether the API answered any request (with an error): the last one may have
    been cut short by the deadline itself, which says nothing about the API.
    """
    why = "the API kept failing" if reached else "the Vertex AI API could not be reached"
    where = f"--project {ref.project} --location {ref.location}"
    return (
        f"The cluster's state is unknown ({why}; labelling it to expire failed too). Check it "
        f"with `vsp clusters get {where} {ref.cluster_id}` (or `vsp clusters list {where}`) and "
        f"delete it with `vsp clusters delete {where} {ref.cluster_id}`. Backstop: the reaper "
        "schedule (the reap-expired-clusters pipeline, every 10 minutes) deletes it only if it "
        "carries a past vsp-expires-at label."
    )


def finalize(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    *,
    state: str,
    failure_keep_minutes: float,
    delete: Callable[[], bool],
    now: float | None = None,
    deadline_seconds: float = 3600.0,
    backoff: polling.Backoff = DEFAULT_BACKOFF,
    clock: polling.Clock | None = None,
    pipeline_run: str = "",
) -> FinalizeResult:
    """Applies the exit task's rule (see the module docstring), retrying until it holds.

    Args:
        client: REST client.
        ref: The cluster.
        state: ``SUCCEEDED``, ``FAILED`` or ``CANCELLED`` (see ``step.normalize_final_state``).
        failure_keep_minutes: After a failure, keep the cluster this long for a retry
            (0 = delete it), at most a week.
        delete: Deletes the cluster; returns whether it existed.
        now: Epoch seconds; default ``time.time()``.
        deadline_seconds: How long to keep retrying a failed delete or label update; a hard
            bound (``client.deadline_at`` is set from it), plus ``LAST_RESORT_SECONDS``.
        backoff: Delays between those retries.
        clock: Time source of the retries (tests inject ``polling.FakeClock``).
        pipeline_run: The ending run: a cluster kept for its retry no longer carries its claim.

    Raises:
        errors.UserError: ``failure_keep_minutes`` is invalid (before any request).
        errors.TransientError: The rule could not be applied before the deadline; the cluster
            was labelled to expire at once when that was possible. (A delete still running at
            the deadline that then deletes the cluster ends the task with ``deleted``.)
    """
    state = step.normalize_final_state(state)
    failure_keep_minutes = inputs.check_failure_keep_minutes(failure_keep_minutes)
    if state == "SUCCEEDED":
        return FinalizeResult("none", "the run succeeded; the teardown decision already acted")
    clock = clock or polling.RealClock()
    start = clock.now()
    client.deadline_at = time.monotonic() + deadline_seconds
    delays = backoff.delays()
    attempt = 0
    answers_before = client.answers_received
    while True:
        attempt += 1
        try:
            moment = time.time() if now is None else now
            return _once(client, ref, state, failure_keep_minutes, delete, moment, pipeline_run)
        except (errors.TransientError, errors.OperationFailedError) as exc:
            # A rejected operation (a user error) is retried too: a cluster it left (often in
            # ERROR, whose labels cannot change) has no expiry, so only deleting it ends it.
            delay = next(delays)
            if clock.now() - start + delay > deadline_seconds:
                last = exc
                break
            log.warning(
                "exit task attempt %d on cluster %s failed (%s); retrying in %.0f s",
                attempt,
                ref.cluster_id,
                exc,
                delay,
            )
            clock.sleep(delay)
    client.deadline_at = time.monotonic() + LAST_RESORT_SECONDS
    resort = _expire_now(client, ref, pipeline_run)
    if resort == "deleted":  # nothing is left running: the task is done
        why = f"its last delete, still running at the {deadline_seconds:g} s deadline, went through"
        log.warning("cluster %s: %s", ref.cluster_id, why)
        return FinalizeResult("deleted", why)
    if resort == "labelled":
        fate = "It is labelled to expire now, so the next reap deletes it."
    else:
        fate = _unknown_state(ref, reached=client.answers_received > answers_before)
    raise errors.TransientError(
        f"the exit task could not {'delete' if state == 'CANCELLED' else 'keep or delete'} "
        f"cluster {ref.name} within {deadline_seconds:g} s ({attempt} attempts; last error: "
        f"{last}). {fate}"
    )
