"""Use the components in your own pipeline: create a cluster, train on Spot, register, delete.

The pipeline imports the components from ``vsp.components`` (the same built components the
project's pipelines use) and wires them with plain KFP: training takes ``create_cluster``'s
``cluster_name`` output, so it waits for the cluster without an ``.after()``; registration takes
training's outputs; the delete is the exit task, so the cluster goes however the run ends.
Every task acts on the world, so caching is off for each (Vertex AI caches by default).

``python -m vsp.examples.own_pipeline --out DIR`` compiles it to ``DIR/my_spot_training.yaml``
and runs that template on this machine against the Vertex emulator, each step in a fresh venv
as Vertex AI runs it (``vsp.pipelines.local.run.run_template``, which also points the steps at
the emulated Cloud Storage through ``VSP_GCS_FUSE_ROOT``). The emulator preempts the training
job ``--preemptions`` times; the trainer resumes from its checkpoint each time.
"""

# No postponed annotations: kfp reads the pipeline's parameter types at definition time.

import argparse
import os
import pathlib
import sys

from kfp import compiler, dsl

from vsp import vertex_emulator
from vsp.components import create_cluster, delete_cluster, register_model, train_on_cluster
from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import run, step_console

NAME = "my-spot-training"


@dsl.pipeline(name=NAME, description="Create a cluster, train on Spot, register, delete.")
def my_spot_training(
    project: str,
    location: str,
    cluster_id: str,
    network: str,
    subnetwork: str,
    zone: str,
    home_directory_storage: str,
    command: list,
    working_directory: str,
    model_dir: str,
    model_id: str,
    serving_image: str,
    spot_max_nodes: int = 1,
    poll_seconds: float = 20.0,
):
    """Create a training cluster, train on its Spot partition, register the model, delete it.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region.
        cluster_id: Cluster id (1-10 lowercase letters and digits).
        network: VPC network, ``projects/P/global/networks/N``.
        subnetwork: Subnetwork, ``projects/P/regions/R/subnetworks/S``.
        zone: Zone of the node pools.
        home_directory_storage: Filestore instance mounted as /home.
        command: Trainer argv, one list item per argument.
        working_directory: Absolute job directory on the cluster's shared storage.
        model_dir: Where the trainer writes the model, ``gs://BUCKET/PATH``.
        model_id: Model Registry id.
        serving_image: Serving container image of the registered model.
        spot_max_nodes: Nodes of the Spot pool.
        poll_seconds: The training step's Vertex poll interval, seconds; it reads the job's
            progress beacon every 5 x poll_seconds (train_on_cluster).
    """
    cleanup = delete_cluster(
        project=project,
        location=location,
        cluster_id=cluster_id,
        pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    )
    cleanup.set_caching_options(False)
    with dsl.ExitHandler(cleanup):
        create = create_cluster(
            project=project,
            location=location,
            cluster_id=cluster_id,
            network=network,
            subnetwork=subnetwork,
            zone=zone,
            home_directory_storage=home_directory_storage,
            spot_max_nodes=spot_max_nodes,
            pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        )
        train = train_on_cluster(
            project=project,
            location=location,
            cluster_name=create.outputs["cluster_name"],
            command=command,
            working_directory=working_directory,
            model_dir=model_dir,
            poll_seconds=poll_seconds,
            pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            task_id=dsl.PIPELINE_TASK_ID_PLACEHOLDER,
        )
        register = register_model(
            project=project,
            location=location,
            model_id=model_id,
            model_dir=train.outputs["model_dir"],
            serving_image=serving_image,
            job_ids=train.outputs["job_ids"],
            preemptions=train.outputs["preemptions"],
            pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        )
        for task in (create, train, register):
            task.set_caching_options(False)


def local_arguments(out: pathlib.Path) -> dict:
    """Parameter values for a run on the emulator whose state is ``out/emulator``.

    Args:
        out: Absolute folder of the run (emulator state, helpers, outputs).
    """
    cluster_id = "myspot"
    home = vertex_emulator.cluster_home(out / "emulator", cluster_id)
    return {
        **{k: v for k, v in catalog.LOCAL_CLUSTER.items() if k != "ondemand_max_nodes"},
        "cluster_id": cluster_id,
        "command": [
            catalog.local_python(str(out)),
            *("-m", "vsp.examples.trainer", "--steps", "40", "--step-seconds", "0.1"),
        ],
        "working_directory": os.path.join(home, NAME),
        # {run}: a folder per run, so a second run does not rewrite the model of version 1.
        "model_dir": f"gs://{catalog.LOCAL_BUCKET}/{NAME}/model/{{run}}",
        "model_id": "my-spot-model",
        "serving_image": catalog.LOCAL_MODEL["serving_image"],
        "poll_seconds": 0.5,
    }


def main(argv: list[str] | None = None) -> int:
    """Compiles the pipeline, runs the template on the emulator, prints the outcome.

    Returns:
        0 when the run succeeded, 1 otherwise.
    """
    parser = argparse.ArgumentParser(prog="python -m vsp.examples.own_pipeline")
    parser.add_argument("--out", default=".vsp/own-pipeline", help="folder of the run")
    parser.add_argument("--preemptions", type=int, default=1, help="Spot preemptions to inject")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    template = out / "my_spot_training.yaml"
    compiler.Compiler().compile(my_spot_training, str(template))
    print(f"compiled {template}")
    log_path = out / "run.log"
    with open(log_path, "w") as log_file:  # every line there, a line per task state here
        result = run.run_template(
            template,
            local_arguments(out),
            state_dir=str(out / "emulator"),
            pipeline_root=str(out / "outputs"),
            settings=run.local_settings(preemptions=args.preemptions, preempt_after=1.5),
            console=step_console.StepConsole(sys.stdout, log_file),
        )
    print(f"pipeline {NAME}: {'SUCCEEDED' if result.succeeded else 'FAILED'}")
    for task, values in sorted(result.parameters.items()):
        print(f"  {task}: {values}")
    print(f"  full log: {log_path}")
    if result.error:
        print(result.error, file=sys.stderr)
    return 0 if result.succeeded else 1


if __name__ == "__main__":
    sys.exit(main())
