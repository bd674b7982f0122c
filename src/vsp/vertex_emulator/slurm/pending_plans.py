"""Preemption plans armed for a cluster that does not exist yet.

A test or a local run arms its Spot preemptions before the pipeline creates the cluster; the
plan waits here (store collection ``slurm_pending_plans``, keyed by the cluster id or full name
it was armed for) and becomes the cluster's own plan when the cluster's Slurm state is first
made: at its creation, before any job can run. A plan armed by id applies to the first cluster
of that id in any project or location; one armed by full name to that cluster only. Taking a
plan removes it, so a cluster deleted and created again starts without it.
"""

from __future__ import annotations

from typing import Any

COLLECTION = "slurm_pending_plans"


def arm(store: Any, cluster: str, plan: dict[str, Any]) -> dict[str, Any]:
    """Keeps a validated plan for ``cluster`` (id or full name); returns how it is shown."""
    store.put(COLLECTION, cluster, plan)
    return describe(plan)


def describe(plan: dict[str, Any]) -> dict[str, Any]:
    """A pending plan as the control API shows it (``source`` = ``pending``)."""
    return {**plan, "source": "pending", "fired": 0, "runs": 0}


def get(store: Any, cluster: str) -> dict[str, Any] | None:
    """The plan armed for exactly this id or full name, or None."""
    return store.get(COLLECTION, cluster)


def clear(store: Any, cluster: str) -> bool:
    """Drops the plan armed for ``cluster``; returns whether there was one."""
    return bool(store.delete(COLLECTION, cluster))


def take(store: Any, cluster_name: str) -> dict[str, Any] | None:
    """Removes and returns the plan waiting for a cluster (its full name first, then its id)."""
    for key in (cluster_name, cluster_name.rsplit("/", 1)[-1]):
        plan = store.get(COLLECTION, key)
        if plan is not None:
            store.delete(COLLECTION, key)
            return plan
    return None
