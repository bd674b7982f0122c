"""A pipeline that feeds register_model's output to GCPC's deploy (and batch prediction) ops.

Shared by the tests that prove the ``google.VertexModel`` output is accepted downstream, whichever
way the component was obtained: the compiled YAML, ``vsp.components`` or the catalog.
"""

# No postponed annotations: kfp reads the pipeline function's parameter types.

import pathlib

import yaml
from google_cloud_pipeline_components.v1.batch_predict_job import ModelBatchPredictOp
from google_cloud_pipeline_components.v1.endpoint import EndpointCreateOp, ModelDeployOp
from kfp import compiler, dsl

FROM_REGISTER = {"outputArtifactKey": "model", "producerTask": "register-model"}


def compiled_spec(register_op, folder: pathlib.Path, *, batch_predict: bool = False) -> dict:
    """Compiles register -> endpoint + deploy (+ batch predict) and returns the spec as a dict."""

    @dsl.pipeline(name="register-then-deploy")
    def register_then_deploy(project: str, model_dir: str):
        registered = register_op(
            project=project,
            location="us-central1",
            model_id="digits",
            model_dir=model_dir,
            serving_image="us-docker.pkg.dev/my-project/serving/digits:1",
        )
        endpoint = EndpointCreateOp(project=project, display_name="digits")
        ModelDeployOp(
            model=registered.outputs["model"],
            endpoint=endpoint.outputs["endpoint"],
            dedicated_resources_machine_type="n1-standard-4",
            dedicated_resources_min_replica_count=1,
        )
        if batch_predict:
            ModelBatchPredictOp(
                project=project,
                job_display_name="digits-batch",
                model=registered.outputs["model"],
                gcs_source_uris=["gs://b/in.jsonl"],
                gcs_destination_output_uri_prefix="gs://b/out",
            )

    path = folder / "register-then-deploy.yaml"
    compiler.Compiler().compile(register_then_deploy, str(path))
    return yaml.safe_load(path.read_text())


def model_source(spec: dict, task: str) -> dict:
    """Where ``task``'s ``model`` input artifact comes from."""
    return spec["root"]["dag"]["tasks"][task]["inputs"]["artifacts"]["model"]["taskOutputArtifact"]
