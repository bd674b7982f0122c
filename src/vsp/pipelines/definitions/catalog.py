"""The pipelines this project ships, by name, and their defaults for local runs."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from typing import Any

from vsp import vertex_emulator
from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import script as slurm_script
from vsp.components.runtime.teardown import prices
from vsp.pipelines.definitions import (
    cluster_lifecycle,
    reap_expired_clusters,
    slurm_spot_training,
    spot_custom_job_training,
)

PIPELINES = {
    cluster_lifecycle.NAME: cluster_lifecycle.build,
    reap_expired_clusters.NAME: reap_expired_clusters.build,
    slurm_spot_training.NAME: slurm_spot_training.build,
    spot_custom_job_training.NAME: spot_custom_job_training.build,
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
# The node-hour prices of the local training cost, from the price table the teardown prices the
# same cluster with (the pipeline's default machine, a3-highgpu-8g), so one report has one price.
LOCAL_NODE_PRICES = prices.HOURLY_USD["a3-highgpu-8g"]

# The example trainer's settings for local runs: about 10 s of training when uninterrupted.
LOCAL_TRAINER_ARGS = ["--steps", "100", "--seed", "7", "--step-seconds", "0.1"]
# On a real Slurm a preempted job trains on until the SIGTERM reaches it (about 2 s after the
# preempting job is submitted), so each run covers ~5 s; 30 s of training leaves room for three.
REAL_SLURM_TRAINER_STEPS = 300
# The DDP example of a multi-node local run: about 30 s of training, a checkpoint every 1 s.
DDP_ARGS = ["--steps", "300", "--seed", "7", "--save-every", "10", "--step-seconds", "0.1"]

# Enough steps to outlast eight preemptions 2.5 s into each run.
CUSTOM_JOB_TRAINER_ARGS = ["--steps", "250", "--seed", "7", "--step-seconds", "0.1"]
# Registration of local runs: the example model has no server of its own; any serving image
# URI is accepted by the registry, and the local model is never deployed.
LOCAL_MODEL = {
    "serving_image": "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest",
    "data_version": "synthetic-seed-7",
    "code_version": "vsp.examples.trainer",
}
LOCAL_BUCKET = "local-bucket"
# What LOCAL_MODEL says of the example trainer's code and data: not true of a user's own.
EXAMPLE_PROVENANCE = ("data_version", "code_version")


def without_example_provenance(arguments: dict, given: dict) -> dict:
    """``arguments`` without the example trainer's data and code versions, for a local run of
    a user's own trainer (``given`` overrides ``command``): the registered version must not
    claim the example's provenance. Versions the user gave (``given``) are kept.

    Args:
        arguments: The run's arguments (the local defaults with ``given`` applied).
        given: The arguments the user gave (``--param``).
    """
    found = {k: v for k, v in arguments.items() if k not in EXAMPLE_PROVENANCE or k in given}
    options = found.get("model_options")
    if isinstance(options, dict) and "model_options" not in given:
        found["model_options"] = {k: v for k, v in options.items() if k not in EXAMPLE_PROVENANCE}
    return found


def local_python(shared_dir: str) -> str:
    """A launcher of this interpreter for jobs of local runs, written under ``shared_dir``.

    A local run's steps run in environments of their own (``local.step_envs``), without the
    user's packages; the launcher runs the trainer with this interpreter's instead. Its name
    lacks the word ``python3``, which kfp.local rewrites in a task's command line (a local run
    keeps parameter values out of that rewrite: ``local.parameter_values``).
    """
    launcher = os.path.join(shared_dir, "bin", "vsp-python")
    os.makedirs(os.path.dirname(launcher), exist_ok=True)
    with open(launcher, "w") as handle:
        handle.write(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    os.chmod(launcher, 0o755)
    return launcher


def with_local_interpreter(command: Any, shared_dir: str) -> Any:
    """A user's ``command`` for a local run, ``python``/``python3`` first replaced by
    ``local_python``: the interpreter ``vsp`` runs in, which has numpy and whatever the user
    installed beside it. Left as given, kfp.local would run the step's bare environment's
    interpreter (see ``local_python``), where the trainer's imports fail. Other commands, and
    values that are not a list, are returned as they are.

    Args:
        command: The ``command`` parameter as given (``--param command=[...]``).
        shared_dir: Folder of the local run's shared files (where the launcher is written).
    """
    if isinstance(command, list) and command and command[0] in ("python", "python3"):
        return [local_python(shared_dir), *command[1:]]
    return command


def _multinode(shared_dir: str, nodes: int, real_slurm: bool) -> dict[str, Any]:
    """The arguments that make a local ``slurm-spot-training`` run train on ``nodes`` nodes."""
    limit = LOCAL_CLUSTER["spot_max_nodes"]
    if not 1 < nodes <= limit:
        several = f"{limit}" if limit == 2 else f"2 to {limit}"
        raise errors.UserError(
            f"nodes={nodes}: the local cluster's Spot pool has {limit} nodes. Fix: pass "
            f"--nodes 1 (the numpy example on one node) or {several} (the DDP example)."
        )
    # Every node of a local cluster is this machine (127.0.0.1): gloo talks over loopback.
    environment = {"GLOO_SOCKET_IFNAME": "lo"}
    srun = shutil.which("srun")
    if real_slurm and srun:  # the local real Slurm's srun is not in a cluster's default PATH
        environment["PATH"] = f"{os.path.dirname(srun)}:{slurm_script.DEFAULT_PATH}"
    return {
        "nodes": nodes,
        "command": [local_python(shared_dir), "-m", "vsp.examples.ddp_trainer", *DDP_ARGS],
        "training_options": {"launcher": "srun", "environment": environment},
    }


def local_arguments(
    pipeline: str,
    shared_dir: str,
    gcs_root: str = "",
    trainer_steps: int = 0,
    real_slurm: bool = False,
    nodes: int = 1,
) -> dict[str, Any]:
    """Parameter values of a local run of ``pipeline``.

    Args:
        pipeline: Registered pipeline name.
        shared_dir: Absolute folder for the local helpers (the trainer's interpreter launcher).
        gcs_root: Absolute folder standing in for the GCS FUSE mount (``/gcs`` on a cluster),
            where the emulated ``gs://`` buckets live; default ``{shared_dir}/../emulator/gcs``.
        trainer_steps: Steps of the example trainer of ``slurm-spot-training`` (0 = 100).
        real_slurm: The run trains on a real Slurm, whose nodes have no GPUs: the job asks for
            none, and the trainer runs ``REAL_SLURM_TRAINER_STEPS`` unless ``trainer_steps``.
        nodes: Nodes of ``slurm-spot-training``'s jobs; above 1 the job trains the PyTorch DDP
            example (``vsp.examples.ddp_trainer``, the ``torch`` extra) on every node through
            ``launcher="srun"`` (at most ``LOCAL_CLUSTER["spot_max_nodes"]``).
    """
    gcs_root = gcs_root or os.path.join(os.path.dirname(shared_dir), "emulator", "gcs")
    if real_slurm:
        trainer_steps = trainer_steps or REAL_SLURM_TRAINER_STEPS
    if pipeline == slurm_spot_training.NAME:
        # A fresh folder per local run, so a second run trains again instead of finding the
        # first run's final checkpoint.
        stamp = time.strftime("%Y%m%d-%H%M%S")
        run = f"run-{stamp}-{os.getpid()}"
        # The job's folder is on the cluster's own home, which the pipeline steps cannot see
        # (as on Vertex AI); everything a step reads is on Cloud Storage.
        home = vertex_emulator.cluster_home(os.path.dirname(gcs_root), LOCAL_CLUSTER["cluster_id"])
        run_dir = os.path.join(home, "slurm-spot-training", run)
        run_gcs = os.path.join(gcs_root, LOCAL_BUCKET, "slurm-spot-training", run)
        top = ("project", "location", "cluster_id", "spot_max_nodes")
        arguments = {
            **{name: LOCAL_CLUSTER[name] for name in top},
            # The rest of the cluster, the trainer's and the model's settings go in the
            # pipeline's option groups, as a user of its short form gives them.
            "cluster_options": {k: v for k, v in LOCAL_CLUSTER.items() if k not in top},
            "serving_image": LOCAL_MODEL["serving_image"],
            "model_options": {k: v for k, v in LOCAL_MODEL.items() if k != "serving_image"},
            "model_id": "slurm-spot-example",
            "command": [
                local_python(shared_dir),
                "-m",
                "vsp.examples.trainer",
                *LOCAL_TRAINER_ARGS[:1],
                str(trainer_steps or LOCAL_TRAINER_ARGS[1]),
                *LOCAL_TRAINER_ARGS[2:],
            ],
            "working_directory": run_dir,
            # Checkpoints take the default: Cloud Storage, beside the model.
            # The model goes to Cloud Storage through the FUSE mount, where the registry reads it.
            "model_dir": os.path.join(run_gcs, "model"),
            "training_options": {
                # Job logs on Cloud Storage too: the step streams the trainer's lines from there.
                "log_directory": os.path.join(run_gcs, "logs"),
                "poll_seconds": 0.5,
                # The price table's, as the teardown prices the same nodes (one report).
                "spot_price_per_node_hour": LOCAL_NODE_PRICES["SPOT"],
                "ondemand_price_per_node_hour": LOCAL_NODE_PRICES["ON_DEMAND"],
            },
            # The emulated nodes have the machine type's GPUs, so the default request (all of
            # a node's GPUs) is what runs there; a real Slurm here has none.
            **({"gpus_per_node": 0} if real_slurm else {}),
        }
        if nodes != 1:
            multinode = _multinode(shared_dir, nodes, real_slurm)
            options = {**arguments["training_options"], **multinode.pop("training_options")}
            arguments.update(multinode, training_options=options)
        return arguments
    if pipeline == spot_custom_job_training.NAME:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        return {
            "project": LOCAL_CLUSTER["project"],
            "location": LOCAL_CLUSTER["location"],
            **LOCAL_MODEL,
            "model_id": "custom-job-example",
            "base_output_directory": f"gs://{LOCAL_BUCKET}/spot-custom-job/run-{stamp}-{os.getpid()}",
            "machine_type": "n1-standard-8",
            "accelerator_type": "",
            "accelerator_count": 0,
            "container_image": "python:3.11-slim",
            "command": [
                local_python(shared_dir),
                "-m",
                "vsp.examples.trainer",
                *CUSTOM_JOB_TRAINER_ARGS,
            ],
            "poll_seconds": 0.3,
            "spot_price_per_node_hour": 0.9,
            "ondemand_price_per_node_hour": 3.0,
        }
    if pipeline == cluster_lifecycle.NAME:
        return dict(LOCAL_CLUSTER)
    if pipeline == reap_expired_clusters.NAME:
        return {"project": LOCAL_CLUSTER["project"], "location": LOCAL_CLUSTER["location"]}
    return {}
