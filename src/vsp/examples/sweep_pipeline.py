"""A learning-rate sweep on one cluster: a ``dsl.ParallelFor`` of trainings, one model version each.

One ``create_cluster``, then a ``dsl.ParallelFor`` over ``learning_rates``: each iteration trains
the example trainer with its ``--lr`` on the same cluster and registers what it trained; the
cluster is deleted by the exit task however the run ends.

Identity: every iteration is one kfp task with its own unique id. Training passes
``dsl.PIPELINE_JOB_ID_PLACEHOLDER`` and ``dsl.PIPELINE_TASK_ID_PLACEHOLDER``, so each iteration
derives its own run key: its own Slurm job and its own checkpoint folder (the default, beside
its model). Registration passes both too, so each iteration adds its own version of
``model_id``: a sweep of N learning rates gives N versions, each labelled with its run and task.
(The task-name placeholder would not do: it is the same for every iteration.)

``python -m vsp.examples.sweep_pipeline --out DIR`` compiles it to ``DIR/lr_sweep.yaml`` and runs
that template on this machine against the Vertex emulator, each step in a fresh venv.
"""

# No postponed annotations: kfp reads the pipeline's parameter types at definition time.

import argparse
import os
import pathlib
import sys

from kfp import compiler, dsl

from vsp import vertex_emulator
from vsp.components import catalog as component_catalog
from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import run

NAME = "lr-sweep"


def build(components: dict):
    """The sweep pipeline from a component set (see ``vsp.components.catalog``)."""
    create_cluster = components["create_cluster"]
    delete_cluster = components["delete_cluster"]
    train_on_cluster = components["train_on_cluster"]
    register_model = components["register_model"]

    @dsl.pipeline(name=NAME, description="Train one model per learning rate on one cluster.")
    def lr_sweep(
        project: str,
        location: str,
        cluster_id: str,
        network: str,
        subnetwork: str,
        zone: str,
        home_directory_storage: str,
        python: str,
        working_directory: str,
        model_root: str,
        model_id: str,
        serving_image: str,
        learning_rates: list = ["0.003", "0.01", "0.03"],  # noqa: B006 - a KFP default
        steps: str = "40",
        spot_max_nodes: int = 1,
        poll_seconds: float = 20.0,
    ):
        """Create a cluster, train once per learning rate on it, register each model, delete it.

        Args:
            project: Google Cloud project id.
            location: Vertex AI region.
            cluster_id: Cluster id (1-10 lowercase letters and digits).
            network: VPC network, ``projects/P/global/networks/N``.
            subnetwork: Subnetwork, ``projects/P/regions/R/subnetworks/S``.
            zone: Zone of the node pools.
            home_directory_storage: Filestore instance mounted as /home.
            python: The trainer's interpreter on the cluster, e.g. ``python3``.
            working_directory: Absolute job directory on the cluster's shared storage.
            model_root: Folder of the models, ``gs://BUCKET/PATH``: each learning rate writes
                ``{model_root}/lr-{rate}``.
            model_id: Model Registry id; each learning rate adds a version.
            serving_image: Serving container image of the registered models.
            learning_rates: Adam learning rates, one training each (argv text, e.g. "0.01").
            steps: Training steps of each training (argv text, e.g. "40").
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
            create.set_caching_options(False)
            # The iterations name the cluster by its id and wait with .after(): kfp.local 2.17
            # resolves another task's output used inside a ParallelFor to the loop item.
            with dsl.ParallelFor(learning_rates, name="learning-rates") as rate:
                train = train_on_cluster(
                    project=project,
                    location=location,
                    cluster_id=cluster_id,
                    command=[python, "-m", "vsp.examples.trainer", "--steps", steps, "--lr", rate],
                    working_directory=working_directory,
                    model_dir=f"{model_root}/lr-{rate}",
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
                    task_id=dsl.PIPELINE_TASK_ID_PLACEHOLDER,
                )
                train.after(create)
                for task in (train, register):
                    task.set_caching_options(False)

    return lr_sweep


def local_arguments(out: pathlib.Path) -> dict:
    """Parameter values for a run on the emulator whose state is ``out/emulator``.

    Args:
        out: Absolute folder of the run (emulator state, helpers, outputs).
    """
    cluster_id = "sweep"
    home = vertex_emulator.cluster_home(out / "emulator", cluster_id)
    return {
        **{k: v for k, v in catalog.LOCAL_CLUSTER.items() if k != "ondemand_max_nodes"},
        "cluster_id": cluster_id,
        "python": catalog.local_python(str(out)),
        "working_directory": os.path.join(home, NAME),
        "model_root": f"gs://{catalog.LOCAL_BUCKET}/{NAME}",
        "model_id": "lr-sweep-model",
        "serving_image": catalog.LOCAL_MODEL["serving_image"],
        "poll_seconds": 0.5,
    }


def main(argv: list[str] | None = None) -> int:
    """Compiles the pipeline, runs the template on the emulator, prints the outcome.

    Returns:
        0 when the run succeeded, 1 otherwise.
    """
    parser = argparse.ArgumentParser(prog="python -m vsp.examples.sweep_pipeline")
    parser.add_argument("--out", default=".vsp/lr-sweep", help="folder of the run")
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    template = out / "lr_sweep.yaml"
    compiler.Compiler().compile(build(component_catalog.component_set()), str(template))
    print(f"compiled {template}")
    result = run.run_template(
        template,
        local_arguments(out),
        state_dir=str(out / "emulator"),
        pipeline_root=str(out / "outputs"),
        settings=run.local_settings(),
    )
    print(f"pipeline {NAME}: {'SUCCEEDED' if result.succeeded else 'FAILED'}")
    if result.error:
        print(result.error, file=sys.stderr)
    return 0 if result.succeeded else 1


if __name__ == "__main__":
    sys.exit(main())
