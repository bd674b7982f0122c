"""The ``register_model`` step: provenance, artifact URI, registration.

This module turns the model directory into the ``gs://`` URI the registry reads, builds the
provenance labels (pipeline run, training jobs, preemptions, checkpoint step, data and code
versions) and calls ``registry.client``. ``main`` is the component's entry; ``register`` the
same work for callers in Python.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from vsp.components.runtime.core import (
    errors,
    gcp_labels,
    gcs_paths,
    rest,
    run_identity,
    step,
)
from vsp.components.runtime.registry import client as model_registry
from vsp.components.runtime.registry import evaluation, gate
from vsp.components.runtime.trainer import manifests

log = logging.getLogger(__name__)


@step.accepts_options
def main(
    *,
    project: str,
    location: str,
    model_id: str,
    model_dir: str,
    serving_image: str,
    model: Any,
    gcp_resources: str,
    display_name: str,
    version_aliases: list,
    description: str,
    labels: dict,
    job_ids: list,
    preemptions: int,
    data_version: str,
    code_version: str,
    pipeline_run: str,
    task_id: str,
    code_sha256: str = "",
    gate: str = "",
    metrics_file: str = "",
    evaluation_problem_type: str = "classification",
) -> tuple[str, str, bool]:
    """The component's entry: its parameters in, its outputs out (see the component).

    Returns:
        ``(model_resource_name, version_id, reused)``; the ``model`` artifact gets the
        version's URI and resource name.
    """
    registration = step.run_step(
        "register_model",
        lambda: register(
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
            code_sha256=code_sha256,
            pipeline_run=pipeline_run,
            task_id=task_id,
            gcp_resources_path=gcp_resources,
            gate_text=gate,
            metrics_file=metrics_file,
            evaluation_problem_type=evaluation_problem_type,
        ),
    )
    registered = registration.model
    if registration.verdict is not None:
        model.metadata["gatePassed"] = registration.verdict.passed
        model.metadata["gate"] = registration.verdict.reason
    model.uri = registration.vertex_uri
    model.metadata["resourceName"] = registered.resource_name
    model.metadata["artifactUri"] = registration.artifact_uri
    return (registered.resource_name, registered.version_id, registered.reused)


@dataclasses.dataclass(frozen=True)
class Registration:
    """What the component outputs.

    Attributes:
        model: The registered version.
        artifact_uri: The ``gs://`` model directory registered.
        vertex_uri: ``https://REGION-aiplatform.googleapis.com/v1/<model>@<version>`` (the
            emulator's address in local runs), the URI of the ``google.VertexModel`` artifact.
        step: Training step recorded in the model manifest (None when the trainer gave none).
        verdict: The evaluation gate's verdict (None without a gate).
        evaluation: The imported ModelEvaluation's name ('' without a gate).
    """

    model: model_registry.RegisteredModel
    artifact_uri: str
    vertex_uri: str
    step: int | None
    verdict: gate.Verdict | None = None
    evaluation: str = ""


def to_gcs_uri(path: str, *, gcs_root: str | None = None) -> str:
    """The ``gs://`` URI of a model directory given as ``gs://...`` or as a GCS FUSE path.

    Args:
        path: ``gs://BUCKET/PATH``, or a path under the GCS FUSE mount (``/gcs/BUCKET/PATH``;
            the mount point is ``$VSP_GCS_FUSE_ROOT`` when set).
        gcs_root: Mount point of GCS FUSE; default ``$VSP_GCS_FUSE_ROOT`` or ``/gcs``.

    Raises:
        errors.UserError: The path is not on Cloud Storage, so the registry could not read it.
    """
    uri = gcs_paths.to_gcs_uri(path, gcs_root=gcs_root)
    if uri is not None:
        return uri
    root = gcs_paths.fuse_root(gcs_root)
    raise errors.UserError(
        f"model directory {path!r} is not on Cloud Storage, so the Model Registry cannot read it. "
        f"Fix: write the model to gs://BUCKET/PATH or under the GCS FUSE mount {root}/BUCKET/PATH."
    )


def provenance_labels(
    *,
    job_ids: Iterable[object],
    preemptions: int,
    checkpoint_step: int | None,
    data_version: str,
    code_version: str,
    code_sha256: str = "",
) -> dict[str, str]:
    """The provenance labels of a version; empty values are left out.

    The pipeline run itself is the ``vsp-pipeline-run`` label ``model_registry`` adds. Job ids
    are shortened to ``first-last`` so the value fits in a label.
    """
    ids = [str(job) for job in job_ids]
    labels = {
        gcp_labels.JOBS: "-".join(ids[:1] + ids[-1:]) if len(ids) > 1 else "".join(ids),
        gcp_labels.JOB_COUNT: str(len(ids)) if ids else "",
        gcp_labels.PREEMPTIONS: str(int(preemptions)),
        gcp_labels.CHECKPOINT_STEP: "" if checkpoint_step is None else str(checkpoint_step),
        gcp_labels.DATA_VERSION: data_version,
        gcp_labels.CODE_VERSION: code_version,
        gcp_labels.CODE_SHA256: code_sha256,
    }
    return {key: gcp_labels.value(value) for key, value in labels.items() if value}


def with_code_digest(description: str, code_sha256: str) -> str:
    """The version's description ending with the staged code's whole digest.

    Raises:
        errors.UserError: ``code_sha256`` is not 64 hex digits.
    """
    digest = code_sha256.strip().lower()
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise errors.UserError(
            f"code_sha256 {code_sha256!r} is not 64 hex digits. Fix: pass train_on_cluster's "
            "code_sha256 output (or '' when no code was staged)."
        )
    line = f"Trained with code sha256:{digest}."
    return f"{description.rstrip()}\n{line}" if description.strip() else line


def register(
    *,
    project: str,
    location: str,
    model_id: str,
    display_name: str,
    model_dir_path: str,
    serving_image: str,
    version_aliases: Iterable[str] = (),
    description: str = "",
    labels: Mapping[str, str] | None = None,
    job_ids: Iterable[object] = (),
    preemptions: int = 0,
    data_version: str = "",
    code_version: str = "",
    code_sha256: str = "",
    pipeline_run: str = "",
    task_id: str = "",
    gcp_resources_path: str = "",
    client: rest.VertexRestClient | None = None,
    gate_text: str = "",
    metrics_file: str = "",
    evaluation_problem_type: str = "classification",
) -> Registration:
    """Registers the model directory of a training run; see ``model_registry.register_model``.

    With a gate (``registry.gate``) the version is registered whatever the verdict, but
    ``default`` is among its aliases only when the gate passes; the metrics it was judged on
    are imported as a ModelEvaluation of the version (``registry.evaluation``).

    Raises:
        errors.UserError: An argument is invalid, the directory is not on Cloud Storage or its
            manifest does not verify.
    """
    if not (project or "").strip() or not (location or "").strip():
        raise errors.UserError("project and location are required. Fix: pass both.")
    if not isinstance(labels or {}, Mapping):
        raise errors.UserError(
            f"labels = {labels!r:.80} is not a mapping. Fix: pass the version's labels as a "
            'dict of key to value, e.g. {"team": "ml"}.'
        )
    if not isinstance(version_aliases or [], (list, tuple)):
        raise errors.UserError(
            f"version_aliases = {version_aliases!r:.80} is not a list. Fix: pass a list, e.g. "
            '["candidate"].'
        )
    if isinstance(preemptions, bool) or not isinstance(preemptions, int) or preemptions < 0:
        raise errors.UserError(
            f"preemptions = {preemptions!r:.40}: not a count of preemptions. Fix: pass the "
            "training step's preemptions output, or a whole number >= 0."
        )
    judge = gate.Gate.parse(gate_text)
    if judge is not None:
        evaluation.schema_uri(evaluation_problem_type)  # checked before any request
    artifact_uri = to_gcs_uri(model_dir_path)
    manifest = manifests.verify_model_dir(gcs_paths.to_local_path(artifact_uri))
    manifest_step = manifest.get("step")
    # The registration's identity: the run, or the run's task when several tasks register.
    run_label = run_identity.ensure(pipeline_run, "register_model")
    if task_id:
        run_label = f"{run_label}-{task_id}"
    provenance = provenance_labels(
        job_ids=job_ids,
        preemptions=preemptions,
        checkpoint_step=manifest_step,
        data_version=data_version,
        code_version=code_version,
        code_sha256=code_sha256,
    )
    if code_sha256:
        description = with_code_digest(description, code_sha256)
    user_labels = {str(k): str(v) for k, v in (labels or {}).items()}
    reserved = sorted(k for k in user_labels if k.startswith("vsp-"))
    if reserved:
        raise errors.UserError(
            f"labels {reserved} use the reserved prefix 'vsp-'. Fix: rename them."
        )
    client = client or rest.VertexRestClient(location)
    aliases = [str(a) for a in version_aliases]
    verdict, metrics = None, {}
    if judge is not None:
        metrics = gate.read_metrics(metrics_file or f"{artifact_uri}/metrics.json")
        name = f"projects/{project}/locations/{location}/models/{model_id}"
        baseline = evaluation.baseline(client, name) if judge.threshold is None else None
        verdict = judge.judge(metrics, baseline)
        provenance[gcp_labels.GATE] = "passed" if verdict.passed else "failed"
        if verdict.passed:
            log.info("gate passed: %s", verdict.reason)
        else:
            aliases = [a for a in aliases if a != "default"]
            log.warning(
                "gate failed: %s; the version is registered, 'default' does not move",
                verdict.reason,
            )
    model = model_registry.register_model(
        client,
        project=project,
        location=location,
        model_id=model_id,
        display_name=display_name or model_id,
        artifact_uri=artifact_uri,
        serving_image=serving_image,
        labels=user_labels,
        version_aliases=aliases,
        description=description,
        run_label=run_label,
        provenance=provenance,
        gcp_resources_path=gcp_resources_path,
    )
    vertex_uri = client.url(f"{model_registry.API_VERSION}/{model.resource_name}")
    imported = ""
    if verdict is not None:
        title = f"vsp-gate {run_label}"
        imported = evaluation.existing(client, model.resource_name, title) or (
            evaluation.import_evaluation(
                client,
                model.resource_name,
                evaluation.request_body(metrics, evaluation_problem_type, title, pipeline_run),
            )
        )
        log.info("evaluation %s: %s", imported, verdict.reason)
    return Registration(model, artifact_uri, vertex_uri, manifest_step, verdict, imported)
