"""KFP component: register a trained model as a new Model Registry version.

A component declaration (see ``components.cluster`` for the rules these follow); the work is in
``vsp.components.runtime.registry.runner``. The ``model`` output has the schema title of
GCPC's ``google.VertexModel`` (``vsp.components.artifact_types.VertexModel``), so GCPC ops such
as ``ModelDeployOp`` and ``ModelBatchPredictOp`` accept it, while the step itself installs no
``google-cloud-pipeline-components``: the type travels embedded with the runtime.
"""

from typing import NamedTuple

from kfp import dsl

from vsp.components import declarations
from vsp.components.artifact_types import VertexModel


def register_model(
    project: str,
    location: str,
    model_id: str,
    model_dir: str,
    serving_image: str,
    model: dsl.Output[VertexModel],
    gcp_resources: dsl.OutputPath(str),
    display_name: str = "",
    version_aliases: list = [],  # noqa: B006 - KFP reads the default; it is never mutated
    description: str = "",
    labels: dict = {},  # noqa: B006
    job_ids: list = [],  # noqa: B006
    preemptions: int = 0,
    data_version: str = "",
    code_version: str = "",
    pipeline_run: str = "",
) -> NamedTuple("Outputs", [("model_resource_name", str), ("version_id", str), ("reused", bool)]):
    """Registers a trained model directory in the Vertex AI Model Registry, once per run.

    Only a model directory whose manifest verifies (every file present with its size and
    sha256) is registered. The first registration of ``model_id`` creates the model; later
    ones add a version (``parentModel``). Every version carries the label
    ``vsp-pipeline-run``; before uploading, and after any failed upload, the step looks for the
    version carrying this run's label and returns it, so a retried step creates no second
    version. Provenance (training jobs, preemptions, checkpoint step, data and code versions)
    is stored as labels.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region of the registry (the pipeline's region).
        model_id: Registry model id: lowercase letters, digits, ``_`` and ``-``, starting with a
            letter, at most 63 characters.
        model_dir: The model directory: ``gs://BUCKET/PATH`` or a GCS FUSE path
            ``/gcs/BUCKET/PATH`` (the registry reads Cloud Storage only).
        serving_image: Serving container image URI for predictions.
        model: Output: the registered version as a ``google.VertexModel`` artifact.
        gcp_resources: Output: the upload operation and the model version (proto-JSON).
        display_name: Display name ('' = the model id).
        version_aliases: Aliases of the new version, e.g. ``["candidate"]`` (``default`` moves
            the default version to it).
        description: Description of the model and of the version.
        labels: User labels (keys starting with ``vsp-`` are reserved).
        job_ids: Training job ids, recorded as provenance.
        preemptions: Preemptions the training survived, recorded as provenance.
        data_version: Version of the training data, recorded as provenance.
        code_version: Version (e.g. commit) of the training code, recorded as provenance.
        pipeline_run: Pipeline run name (pass the job name placeholder); identifies the version
            of this run.

    Returns:
        model_resource_name: ``projects/P/locations/L/models/ID@VERSION``.
        version_id: The version id, e.g. ``"3"``.
        reused: True when the version had already been registered by this run.
    """
    from vsp.components.runtime.core import step
    from vsp.components.runtime.registry import runner as model_step

    registration = step.run_step(
        "register_model",
        lambda: model_step.register(
            project=project,
            location=location,
            model_id=model_id,
            display_name=display_name,
            model_dir_path=model_dir,
            serving_image=serving_image,
            version_aliases=version_aliases,
            description=description,
            labels=labels,
            job_ids=job_ids,
            preemptions=preemptions,
            data_version=data_version,
            code_version=code_version,
            pipeline_run=pipeline_run,
            gcp_resources_path=gcp_resources,
        ),
    )
    registered = registration.model
    model.uri = registration.vertex_uri
    model.metadata["resourceName"] = registered.resource_name
    model.metadata["artifactUri"] = registration.artifact_uri
    return (registered.resource_name, registered.version_id, registered.reused)


# The plain functions are not components: their names resolve to the built ones (see
# ``vsp.components.declarations``); the catalog builds from DECLARATIONS.
DECLARATIONS = declarations.collect(register_model)
del register_model
__getattr__ = declarations.forward(__name__, DECLARATIONS)
