"""The ``finalize_cluster`` step: the exit task, so no cluster is left running without an owner.

The rule is ``teardown.exit_task.finalize``; this is the component's entry.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import rest, step
from vsp.components.runtime.steps import delete_cluster
from vsp.components.runtime.teardown import exit_task

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
) -> tuple[str, str]:
    """The component's entry: its parameters in, its outputs out (see the component).

    Returns:
        ``(action, summary)``.
    """
    ref = resource.ClusterRef(project, location, cluster_id)

    def run() -> tuple[str, str]:
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

        result = exit_task.finalize(
            client,
            ref,
            state=status.state,
            failure_keep_minutes=failure_keep_minutes,
            delete=delete,
            deadline_seconds=timeout_seconds,
        )
        log.info("finalize: %s (%s)", result.action, result.reason)
        log.info("cluster %s: %s", cluster_id, result.summary(ref))
        return (result.action, result.summary(ref))

    return step.run_step("finalize_cluster", run)
