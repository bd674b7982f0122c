"""The ``ensure_slurm_account`` step: a Slurm account, user and association exist (idempotent).

``main`` is the component's entry; ``ensure_account`` the same work for callers in Python.
"""

from __future__ import annotations

from vsp.components.runtime.cluster import names, resource
from vsp.components.runtime.core import errors, rest, step
from vsp.components.runtime.slurm import api


def main(
    *,
    project: str,
    location: str,
    account: str,
    partitions: list,
    cluster_name: str,
    cluster_id: str,
    user: str,
    organization: str,
) -> str:
    """The component's entry: its parameters in, its output out (see the component)."""
    return step.run_step(
        "ensure_slurm_account",
        lambda: ensure_account(
            project=project,
            location=location,
            cluster_id=names.resolve_cluster_id(location, cluster_id, cluster_name),
            account=account,
            partitions=[str(p) for p in partitions],
            user=user,
            organization=organization,
        ),
    )


def ensure_account(
    *,
    project: str,
    location: str,
    cluster_id: str,
    account: str,
    partitions: list[str],
    user: str = "",
    organization: str = "",
) -> str:
    """The association of ``user`` (default: the caller) with ``account`` on ``partitions``.

    Returns:
        The user the association was ensured for.

    Raises:
        errors.UserError: The caller's Linux user on the cluster cannot be told.
    """
    ref = resource.ClusterRef(project, location, cluster_id)
    client = api.SlurmClient(rest.VertexRestClient(location), ref)
    who = user or client.whoami() or ""
    if not who:
        raise errors.UserError(
            "could not tell the caller's Linux user on the cluster. Fix: pass `user`."
        )
    client.ensure_association(account, who, partitions, organization=organization)
    return who
