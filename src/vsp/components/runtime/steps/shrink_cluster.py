"""The ``shrink_cluster`` step: scale the kept cluster's GPU pools to no nodes until the next run.

The work is ``teardown.shrink.shrink``; this is the component's entry.
"""

from __future__ import annotations

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import rest, step
from vsp.components.runtime.teardown import shrink


def main(*, project: str, location: str, cluster_id: str, labels: dict, pipeline_run: str) -> str:
    """The component's entry: its parameters in, its output out (see the component)."""
    return step.run_step(
        "shrink_cluster",
        lambda: shrink.shrink(
            rest.VertexRestClient(location),
            resource.ClusterRef(project, location, cluster_id),
            {str(k): str(v) for k, v in labels.items()},
            pipeline_run=pipeline_run,
        ),
    )
