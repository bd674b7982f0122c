"""KFP components: create (or reuse) and delete a Vertex AI training cluster.

Declarations (``vsp.components.declare``): each body hands its parameters to
``vsp.components.runtime.steps.<component>.main``.
"""

from typing import NamedTuple

from kfp import dsl

from vsp.components.declare import component


@component
def create_cluster(
    project: str,
    location: str,
    cluster_id: str,
    gcp_resources: dsl.OutputPath(str),
    cluster_spec: dict = {},  # noqa: B006 - KFP reads the default; it is never mutated
    display_name: str = "",
    network: str = "",
    subnetwork: str = "",
    zone: str = "",
    home_directory_storage: str = "",
    login_machine_type: str = "n2-standard-8",
    login_node_count: int = 1,
    machine_type: str = "a3-highgpu-8g",
    accelerator_type: str = "NVIDIA_H100_80GB",
    accelerator_count: int = 8,
    spot_max_nodes: int = 2,
    ondemand_max_nodes: int = 0,
    reservation: str = "",
    boot_disk_size_gb: int = 200,
    slurm_config: dict = {},  # noqa: B006
    service_account: str = "",
    labels: dict = {},  # noqa: B006
    update_policy: str = "apply",
    timeout_seconds: float = 7200.0,
    pipeline_run: str = "",
    options: dict = {},  # noqa: B006
) -> NamedTuple(
    "Outputs", [("cluster_name", str), ("reused", bool), ("action", str), ("seconds", float)]
):
    """Creates a Vertex AI training cluster (managed Slurm), or reuses a matching one.

    The spec is validated before any request. An existing RUNNING cluster with the same
    immutable fields is reused (mutable differences are PATCHed or reported, see
    ``update_policy``); a PROVISIONING one is waited for; one in ERROR is deleted and created
    again. The create operation is written to ``gcp_resources`` before polling, so a retried
    step re-attaches instead of creating a second cluster.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region, e.g. ``us-central1``.
        cluster_id: Cluster id: 1-10 lowercase letters and digits, starting with a letter.
        gcp_resources: Output: the create operation and the cluster (proto-JSON).
        cluster_spec: Full cluster body (snake_case or camelCase keys). When non-empty it is used
            as is and the flat cluster parameters below are ignored.
        display_name: Display name (at most 10 lowercase letters/digits); default cluster_id.
        network: VPC network, ``projects/P/global/networks/N``.
        subnetwork: Subnetwork, ``projects/P/regions/R/subnetworks/S``.
        zone: Zone of the node pools, e.g. ``us-central1-b``.
        home_directory_storage: Filestore or Lustre instance mounted as /home,
            ``projects/P/locations/ZONE/instances/NAME``.
        login_machine_type: Machine type of the login pool.
        login_node_count: Number of login nodes.
        machine_type: GPU machine type of the training pools, e.g. ``a3-highgpu-8g``.
        accelerator_type: Accelerator, e.g. ``NVIDIA_H100_80GB`` (empty for CPU pools).
        accelerator_count: Accelerators per node.
        spot_max_nodes: Maximum nodes of the Spot pool and ``spot`` partition (0: no Spot pool).
        ondemand_max_nodes: Maximum nodes of the on-demand fallback pool and ``ondemand``
            partition (0: no fallback pool).
        reservation: Reservation for the fallback pool, ``projects/P/zones/Z/reservations/R``
            (makes that pool RESERVATION instead of ON_DEMAND).
        boot_disk_size_gb: Boot disk size of training nodes, GB.
        slurm_config: slurm.conf settings as strings, e.g. ``{"PreemptMode": "REQUEUE"}``.
        service_account: Service account of the nodes (default: Compute Engine default).
        labels: Labels of the cluster (keys starting with ``vsp-`` are reserved).
        update_policy: ``apply`` PATCHes mutable differences of a reused cluster; ``report``
            only logs them.
        timeout_seconds: Seconds to wait for the cluster to be RUNNING.
        pipeline_run: The pipeline run's unique id, recorded as a label (pass
            ``dsl.PIPELINE_JOB_ID_PLACEHOLDER``).
        options: More of this component's parameters by name, for example
            ``{"ondemand_max_nodes": 1}``; a value here wins over the parameter of that name,
            and a name the component does not have is refused. It lets a pipeline offer
            rarely set parameters as one field.

    Returns:
        cluster_name: Full resource name of the cluster.
        reused: True when an existing cluster served this run.
        action: created, recreated, reused, updated, scaled_up (a shrunk cluster's GPU pools
            brought back) or attached.
        seconds: Seconds the step spent creating or waiting.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import create_cluster

    return create_cluster.main(**params)


@component
def delete_cluster(
    project: str,
    location: str,
    cluster_id: str,
    gcp_resources: dsl.OutputPath(str),
    timeout_seconds: float = 3600.0,
    pipeline_run: str = "",
    in_use_recheck_minutes: float = 30.0,
) -> bool:
    """Deletes a Vertex AI training cluster and waits until it is gone.

    Idempotent: a cluster that does not exist (never created, or already deleted) is success.
    A cluster on which another run still has unfinished Slurm jobs is not deleted: it is kept,
    labelled with an expiry for the reaper, and the users are logged.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region, e.g. ``us-central1``.
        cluster_id: Id of the cluster to delete.
        gcp_resources: Output: the delete operation (proto-JSON).
        timeout_seconds: Seconds to wait for the deletion.
        pipeline_run: The deleting pipeline run (the pipelines pass the run's unique id);
            its own Slurm jobs do not count as another run's use.
        in_use_recheck_minutes: When in use, minutes until the reaper looks again.

    Returns:
        True when the cluster existed and was deleted; False when it was absent or in use.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import delete_cluster

    return delete_cluster.main(**params)
