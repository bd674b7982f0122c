"""The pipelines this project ships, by name, and their defaults for local runs."""

from __future__ import annotations

from pipelines import cluster_lifecycle, slurm_spot_training

PIPELINES = {
    cluster_lifecycle.NAME: cluster_lifecycle.build,
    slurm_spot_training.NAME: slurm_spot_training.build,
}

# Values a local run uses unless --param overrides them: a small Spot + on-demand cluster in a
# made-up project (the emulator checks shapes, not that the network or Filestore exist).
LOCAL_CLUSTER = {
    "project": "local-project",
    "location": "us-central1",
    "cluster_id": "vsplocal",
    "network": "projects/local-project/global/networks/default",
    "subnetwork": "projects/local-project/regions/us-central1/subnetworks/default",
    "zone": "us-central1-b",
    "home_directory_storage": "projects/local-project/locations/us-central1-b/instances/home",
    "spot_max_nodes": 2,
    "ondemand_max_nodes": 1,
}

LOCAL_DEFAULTS = {
    cluster_lifecycle.NAME: LOCAL_CLUSTER,
}
