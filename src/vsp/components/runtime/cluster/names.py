"""Which cluster a step acts on: an id, or the full name ``create_cluster`` returns.

A task that takes ``create_cluster``'s ``cluster_name`` output as an input runs after the
cluster exists (a data dependency, so no ``.after()`` is needed in the pipeline). The name is
``projects/P/locations/L/modelDevelopmentClusters/ID``; it is checked against the step's own
``location`` (the REST host) and ``cluster_id`` when both are given. Its project part is not
compared with ``project``: Vertex AI may answer with the project number where the request
used the project id.
"""

from __future__ import annotations

import re

from vsp.components.runtime.cluster import rules_base
from vsp.components.runtime.core import errors

CLUSTER_NAME = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
    r"/modelDevelopmentClusters/(?P<cluster_id>[^/]+)\Z"
)


def resolve_cluster_id(location: str, cluster_id: str, cluster_name: str) -> str:
    """The id of the cluster a step acts on.

    Args:
        location: The step's Vertex AI region.
        cluster_id: The cluster id ('' = the id in ``cluster_name``).
        cluster_name: ``create_cluster``'s ``cluster_name`` output ('' = use ``cluster_id``).

    Returns:
        The cluster id.

    Raises:
        errors.UserError: Neither is given, the name is not a cluster's full name, or it names
            another cluster or region than ``cluster_id`` and ``location``.
    """
    if not cluster_name:
        if not cluster_id:
            raise errors.UserError(
                "no cluster given. Fix: pass cluster_name (create_cluster's cluster_name "
                "output) or cluster_id."
            )
        return _checked_id(cluster_id)
    found = CLUSTER_NAME.match(cluster_name)
    if found is None:
        raise errors.UserError(
            f"cluster_name {cluster_name!r} is not a cluster's full name. Fix: pass "
            "create_cluster's cluster_name output "
            "(projects/P/locations/L/modelDevelopmentClusters/ID), or cluster_id alone."
        )
    named = found["cluster_id"]
    if cluster_id and cluster_id != named:
        raise errors.UserError(
            f"cluster_name names cluster {named!r} but cluster_id is {cluster_id!r}. Fix: "
            "pass one of them, or make them agree."
        )
    if found["location"] != location:
        raise errors.UserError(
            f"cluster_name is in {found['location']!r} but location is {location!r}. Fix: "
            "pass the cluster's region as location."
        )
    return _checked_id(named)


def _checked_id(cluster_id: str) -> str:
    if not rules_base.SLURM_CLUSTER_ID.match(cluster_id):
        raise errors.UserError(
            f"cluster_id {cluster_id!r} is not a training cluster id. Fix: use 1-10 lowercase "
            "letters and digits, starting with a letter."
        )
    return cluster_id
