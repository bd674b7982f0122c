"""KFP component: register a trained model as a new Model Registry version.

A declaration (``vsp.components.declare``): its body hands its parameters to
``vsp.components.runtime.steps.register_model.main``. The ``model`` output has the schema title of
GCPC's ``google.VertexModel`` (``vsp.components.artifact_types.VertexModel``), so GCPC ops such
as ``ModelDeployOp`` and ``ModelBatchPredictOp`` accept it, while the step itself installs no
``google-cloud-pipeline-components``: the type travels embedded with the runtime.
"""

from typing import NamedTuple

from kfp import dsl

from vsp.components.artifact_types import VertexModel
from vsp.components.declare import component


@component
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
    task_id: str = "",
    code_sha256: str = "",
    options: dict = {},  # noqa: B006
    gate: str = "",
    metrics_file: str = "",
    evaluation_problem_type: str = "classification",
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
        pipeline_run: The pipeline run's unique id (pass ``dsl.PIPELINE_JOB_ID_PLACEHOLDER``);
            identifies the version of this run ('' = a fresh identity: the version of an
            earlier call is never returned).
        task_id: This task's unique id (pass ``dsl.PIPELINE_TASK_ID_PLACEHOLDER`` when one run
            registers several versions, e.g. in a ``dsl.ParallelFor``): the version is then
            this task's, not the run's ('' = one version per run).
        code_sha256: sha256 of the staged code the model was trained with (pass
            train_on_cluster's ``code_sha256`` output; '' = none): its first 63 hex digits are
            the label ``vsp-code-sha256`` and the whole digest ends the version's description.
        options: More of this component's parameters by name, for example
            ``{"data_version": "2026-12"}``; a value here wins over the parameter of that name,
            and a name the component does not have is refused. It lets a pipeline offer
            rarely set parameters as one field.
        gate: Evaluation gate for the ``default`` alias, ``METRIC OP VALUE`` with OP one of
            ``<``, ``<=``, ``>``, ``>=`` and VALUE a number or ``default`` (the same metric of the
            current default version), e.g. ``"final_loss <= 0.5"``. The version is registered
            whatever the verdict; ``default`` (when among version_aliases) moves to it only when
            the gate passes, and the metrics are imported as its ModelEvaluation. '' = no gate.
        metrics_file: JSON object of numeric metrics the gate reads, ``gs://BUCKET/PATH`` or a
            GCS FUSE path ('' = ``metrics.json`` in model_dir, written by the trainer).
        evaluation_problem_type: Problem type of the imported ModelEvaluation, which picks its
            metrics schema: ``classification``, ``regression`` or ``forecasting``.

    Returns:
        model_resource_name: ``projects/P/locations/L/models/ID@VERSION``.
        version_id: The version id, e.g. ``"3"``.
        reused: True when the version had already been registered by this run.
    """
    params = dict(locals())  # the parameters, before the import below binds a name
    from vsp.components.runtime.steps import register_model

    return register_model.main(**params)
