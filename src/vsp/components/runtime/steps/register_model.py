"""The ``register_model`` step: provenance, artifact URI, registration.

This module turns the model directory into the ``gs://`` URI the registry reads, builds the
provenance labels (pipeline run, training jobs, preemptions, checkpoint step, data and code
versions) and calls ``registry.client``. ``main`` is the component's entry; ``register`` the
same work for callers in Python.
"""

from __future__ import annotations

import dataclasses
import logging
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
            pipeline_run=pipeline_run,
            task_id=task_id,
            gcp_resources_path=gcp_resources,
        ),
    )
    registered = registration.model
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
    """

    model: model_registry.RegisteredModel
    artifact_uri: str
    vertex_uri: str
    step: int | None


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
    }
    return {key: gcp_labels.value(value) for key, value in labels.items() if value}


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
    pipeline_run: str = "",
    task_id: str = "",
    gcp_resources_path: str = "",
    client: rest.VertexRestClient | None = None,
) -> Registration:
    """Registers the model directory of a training run; see ``model_registry.register_model``.

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
    )
    user_labels = {str(k): str(v) for k, v in (labels or {}).items()}
    reserved = sorted(k for k in user_labels if k.startswith("vsp-"))
    if reserved:
        raise errors.UserError(
            f"labels {reserved} use the reserved prefix 'vsp-'. Fix: rename them."
        )
    client = client or rest.VertexRestClient(location)
    model = model_registry.register_model(
        client,
        project=project,
        location=location,
        model_id=model_id,
        display_name=display_name or model_id,
        artifact_uri=artifact_uri,
        serving_image=serving_image,
        labels=user_labels,
        version_aliases=[str(a) for a in version_aliases],
        description=description,
        run_label=run_label,
        provenance=provenance,
        gcp_resources_path=gcp_resources_path,
    )
    vertex_uri = client.url(f"{model_registry.API_VERSION}/{model.resource_name}")
    return Registration(model, artifact_uri, vertex_uri, manifest_step)
