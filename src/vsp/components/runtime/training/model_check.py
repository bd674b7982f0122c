"""After a run succeeded: whether the model in ``model_dir`` is this run's, and registrable.

A trainer that exits 0 without writing its model (a code path that skips the write, a model
written elsewhere) leaves in ``model_dir`` whatever an earlier run wrote there, as happens when a
schedule gives every run the same folder. Registering that would publish the earlier run's model
as a new version with this run's provenance. The model manifest names the run that wrote it
(``run_key``, from ``VSP_RUN_KEY``: ``trainer.model_files``), so the training step fails instead,
before anything is registered.
"""

from __future__ import annotations

from vsp.components.runtime.core import gcs_paths
from vsp.components.runtime.trainer import manifests


def foreign_model_problem(model_dir: str, run_key: str) -> str:
    """Why the model in ``model_dir`` is not ``run_key``'s ('' when it is, or when nothing says:
    no manifest visible from this step, or one without a run key).

    Args:
        model_dir: The run's model directory (``gs://``, a GCS FUSE path or a local path).
        run_key: The run's key (``VSP_RUN_KEY`` of its jobs).
    """
    written_by = manifests.model_run_key(gcs_paths.to_local_path(model_dir))
    if written_by is None or written_by == run_key:
        return ""
    return (
        f"the trainer ended with success, but the model in {model_dir} was written by another "
        f"run ({written_by}), not by this one ({run_key}): this run wrote no model, and "
        "registering the folder would publish the other run's model as this run's version. "
        "Fix: make the trainer write its model to $VSP_MODEL_DIR at the end of every run "
        "(model_files.write_model_dir), and give every run its own model_dir (a {run} in "
        "it becomes the pipeline run's id)."
    )


def missing_model_problem(model_dir: str) -> str:
    """Why the run has no model: ``model_dir`` is missing or empty though this step sees the
    storage that holds it ('' when the model is there, or when the step cannot tell: the
    bucket, or for a path off Cloud Storage the folder above, is not visible from here).

    The trainer contract says exit 0 means the model is written: a trainer that skips the write
    used to end the training step in success, and ``register_model`` then failed three times
    with a fix that did not apply (rerun it)."""
    local = gcs_paths.to_local_path(model_dir)
    uri = gcs_paths.to_gcs_uri(model_dir)
    if uri:
        seen = gcs_paths.to_local_path("gs://" + uri[len("gs://") :].split("/", 1)[0])
    else:
        seen = local.parent
    if not seen.is_dir() or (local.is_dir() and any(local.iterdir())):
        return ""
    state = "is empty" if local.is_dir() else "does not exist"
    return (
        f"the trainer ended with success (exit 0), but model_dir {model_dir} {state}: it wrote "
        "no model, and the trainer contract's exit 0 means the model is written. Fix: make the "
        "trainer write its final model to $VSP_MODEL_DIR before it exits 0 "
        "(model_files.write_model_dir; docs/trainer-contract.md), or exit non-zero when it "
        "cannot."
    )


def unregistrable_problem(model_dir: str) -> str:
    """Why ``register_model`` would refuse the model in ``model_dir`` ('' when it verifies, or
    when this step cannot see the folder: it is on the cluster's own storage)."""
    local = gcs_paths.to_local_path(model_dir)
    if not local.is_dir():
        return ""
    try:
        manifests.verify_model_dir(local)
    except manifests.ModelDirError as exc:
        return f"register_model would refuse this run's model: {exc}"
    return ""
