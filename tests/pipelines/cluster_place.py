"""Where a submitted test run's cluster goes: the ``cluster_options`` every Slurm run gives.

The pipeline's first step refuses a run without the network, zone and home storage of its
cluster (``create_cluster`` has no default for them), so every submitted run names them.
"""

PLACE = {
    "network": "default",
    "zone": "us-central1-a",
    "home_directory_storage": "projects/test-project/locations/us-central1-a/instances/home",
}
# As a `--param` of vsp submit, vsp schedule and vsp run-local.
PLACE_PARAM = (
    'cluster_options={"network": "default", "zone": "us-central1-a", "home_directory_storage": '
    '"projects/test-project/locations/us-central1-a/instances/home"}'
)
