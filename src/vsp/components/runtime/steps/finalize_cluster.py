"""The ``finalize_cluster`` step: the exit task, so no cluster is left running without an owner.

The rule is ``teardown.exit_task.finalize``; this is the component's entry.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import errors, gcp_labels, rest, step
from vsp.components.runtime.registry import client as model_registry
from vsp.components.runtime.steps import delete_cluster
from vsp.components.runtime.teardown import exit_task, notification

log = logging.getLogger(__name__)


def main(
    *,
    project: str,
    location: str,
    cluster_id: str,
    status: Any,
    failure_keep_minutes: float,
    timeout_seconds: float,
    pipeline_run: str,
    notify_topic: str = "",
    model_id: str = "",
) -> tuple[str, str]:
    """The component's entry: its parameters in, its outputs out (see the component).

    Returns:
        ``(action, summary)``.
    """

    def run() -> tuple[str, str]:
        try:
            ref = resource.ClusterRef(project, location, cluster_id)
        except errors.UserError:
            # create_cluster refuses the same id, so no step of the run made or used a cluster
            # by it: nothing to end (a failure here would only be retried, to the same answer).
            said = (
                f"none: no cluster can have the id {errors.shown(cluster_id, 80)}, so none is ended"
            )
            log.warning("finalize: %s", said)
            return ("none", said)
        client = rest.VertexRestClient(location)

        def delete() -> bool:
            # The delete's wait and requests share the exit task's deadline (client.deadline_at).
            left = (client.deadline_at or time.monotonic()) - time.monotonic()
            return delete_cluster.delete_cluster(
                project=project,
                location=location,
                cluster_id=cluster_id,
                timeout_seconds=max(left, 0.001),
                pipeline_run=pipeline_run,
                client=client,
            )

        outcome = {"action": "unknown", "summary": ""}
        try:
            result = exit_task.finalize(
                client,
                ref,
                state=status.state,
                failure_keep_minutes=failure_keep_minutes,
                delete=delete,
                deadline_seconds=timeout_seconds,
                pipeline_run=pipeline_run,
            )
            outcome.update(action=result.action, summary=result.summary(ref))
        except errors.VspError as exc:
            outcome["summary"] = str(exc)
            raise
        finally:
            if notify_topic:
                notify(ref, status, notify_topic, model_id, pipeline_run, **outcome)
        log.info("finalize: %s (%s)", result.action, result.reason)
        log.info("cluster %s: %s", cluster_id, result.summary(ref))
        return (result.action, result.summary(ref))

    return step.run_step("finalize_cluster", run)


def notify(
    ref: resource.ClusterRef,
    status: Any,
    topic: str,
    model_id: str,
    pipeline_run: str,
    *,
    action: str,
    summary: str,
) -> None:
    """Sends the run's notification (``teardown.notification``); a failure to send is logged,
    never raised, so it cannot hide the exit task's own outcome. Bounded like the last resort."""
    deadline = time.monotonic() + exit_task.LAST_RESORT_SECONDS
    try:
        client = rest.VertexRestClient(ref.location, deadline_at=deadline)
        cluster = resource.ClusterResource(client, ref).get()
        version, gate_passed = "", None
        if model_id:
            run_value = gcp_labels.value(pipeline_run or f"manual-{model_id}")
            name = f"projects/{ref.project}/locations/{ref.location}/models/{model_id}"
            _, found = model_registry.find_run_version(client, name, run_value)
            if found is not None:
                version = f"{name}@{found['versionId']}"
                gate = (found.get("labels") or {}).get(gcp_labels.GATE)
                gate_passed = None if gate is None else gate == "passed"
        document = notification.message(
            pipeline_run=pipeline_run,
            state=step.normalize_final_state(status.state),
            error=getattr(status, "error_message", "") or "",
            cluster_id=ref.cluster_id,
            cluster=notification.cluster_fate(cluster, action, summary, ref.location, time.time()),
            model_version=version,
            gate_passed=gate_passed,
        )
        pubsub = rest.VertexRestClient(ref.location, deadline_at=deadline, root=rest.PUBSUB_ROOT)
        notification.publish(pubsub, topic, document)
    except (errors.VspError, OSError) as exc:
        log.error("could not send the run's notification to %s: %s", topic, exc)
