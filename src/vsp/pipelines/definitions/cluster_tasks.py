"""Cluster tasks shared by the pipelines: one place that wires the cluster parameters."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from kfp import dsl

from vsp.pipelines.definitions import task_policy

# Pipeline parameters forwarded to ``create_cluster`` unchanged.
CLUSTER_PARAMETERS = (
    "project",
    "location",
    "cluster_id",
    "network",
    "subnetwork",
    "zone",
    "home_directory_storage",
    "machine_type",
    "accelerator_type",
    "accelerator_count",
    "spot_max_nodes",
    "ondemand_max_nodes",
    "cluster_spec",
    "timeout_seconds",
)


def default_cluster_id(pipeline_name: str) -> str:
    """The default cluster id of a pipeline, derived from its name: its first letters and a hash
    of the whole name (10 characters, the id limit), so two different pipelines never share a
    cluster by accident, and every run of one pipeline finds the cluster it kept warm."""
    letters = re.sub(r"[^a-z0-9]", "", pipeline_name.lower())[:4] or "vsp"
    if not letters[0].isalpha():
        letters = "c" + letters[:3]
    return letters + hashlib.sha256(pipeline_name.encode()).hexdigest()[: 10 - len(letters)]


def create_cluster(components: dict, values: dict[str, Any]):
    """Adds the create-cluster task, fed from the pipeline parameters in ``values``."""
    task = components["create_cluster"](
        **{name: values[name] for name in CLUSTER_PARAMETERS if name in values},
        pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    )
    return task_policy.apply(task, "create-cluster")


def delete_cluster(components: dict, values: dict[str, Any]):
    """Adds the delete-cluster task (use it as the exit task of a ``dsl.ExitHandler``)."""
    task = components["delete_cluster"](
        project=values["project"],
        location=values["location"],
        cluster_id=values["cluster_id"],
        pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    )
    return task_policy.apply(task, "delete-cluster")
