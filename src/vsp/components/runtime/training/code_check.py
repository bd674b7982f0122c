"""Checks of staged code and container images, made before any job is submitted.

``resolve`` reads ``code_uri`` and its digest (the ``code_sha256`` parameter or a
``#sha256=HEX`` fragment of the URI; both may be given when they agree) into a
``code_stage.CodeStage``; ``verify`` reads the object through the GCS FUSE mount as every step
reads Cloud Storage (``core.gcs_paths``: ``/gcs`` on Vertex AI, the emulator's folder in local
runs) and refuses it when its sha256 is not the pinned one. ``check_container`` refuses a
container image on a cluster that does not declare pyxis (``slurm.container_run``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from vsp.components.runtime.core import errors, gcs_paths
from vsp.components.runtime.slurm import code_stage, container_run

FRAGMENT = "#sha256="
_CHUNK = 1 << 20


def resolve(
    code_uri: str, code_sha256: str = "", cache_dir: str = ""
) -> code_stage.CodeStage | None:
    """The staged code named by the parameters, or None when ``code_uri`` is ''.

    Raises:
        errors.UserError: Not a gs:// tarball or wheel, no digest, a malformed digest, or a
            fragment and ``code_sha256`` that disagree.
    """
    text = (code_uri or "").strip()
    if not text:
        if (code_sha256 or "").strip():
            raise errors.UserError(
                "code_sha256 is set but code_uri is empty. Fix: pass the package's gs:// URI "
                "as code_uri, or drop code_sha256."
            )
        return None
    uri, _, fragment = text.partition("#")
    from_fragment = ""
    if fragment:
        if not ("#" + fragment).startswith(FRAGMENT):
            raise errors.UserError(
                f"code_uri {text!r} has the fragment #{fragment}. Fix: the only fragment taken "
                "is #sha256=HEX (or pass the digest as code_sha256)."
            )
        from_fragment = fragment[len(FRAGMENT) - 1 :].lower()
    given = (code_sha256 or "").strip().lower()
    if given and from_fragment and given != from_fragment:
        raise errors.UserError(
            f"code_sha256 {given} and the #sha256= of code_uri ({from_fragment}) differ. Fix: "
            "give the digest once, or make both the package's sha256."
        )
    digest = given or from_fragment
    gcs_uri = gcs_paths.to_gcs_uri(uri)
    if gcs_uri is None or not code_stage.kind_of(gcs_uri):
        raise errors.UserError(
            f"code_uri {uri!r} is not a package on Cloud Storage. Fix: give "
            "gs://BUCKET/PATH.tar.gz (a source tarball, with requirements.txt at its top for "
            "its dependencies) or gs://BUCKET/PATH.whl (`vsp submit --code DIR` stages one)."
        )
    if not digest:
        raise errors.UserError(
            f"code_uri {gcs_uri} has no sha256. Fix: pass code_sha256 (from `sha256sum FILE`) "
            "or append #sha256=HEX to code_uri, so every job runs exactly the code checked."
        )
    if not code_stage.SHA256.match(digest):
        raise errors.UserError(
            f"the sha256 of code_uri, {digest!r}, is not 64 hex digits. Fix: copy it from "
            "`sha256sum FILE`."
        )
    if cache_dir and not cache_dir.startswith("/"):
        raise errors.UserError(
            f"code_cache_dir {cache_dir!r} is not absolute. Fix: give a folder on the "
            "cluster's shared storage, e.g. /home/USER/.vsp/code, or '' for $HOME/.vsp/code."
        )
    return code_stage.CodeStage(gcs_uri, digest, cache_dir)


def file_sha256(path: Any) -> str:
    """The sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(stage: code_stage.CodeStage) -> None:
    """Refuses the package when the object on Cloud Storage is missing or not the pinned one.

    Raises:
        errors.UserError: The object is missing, or its sha256 differs (both digests named).
    """
    path = gcs_paths.to_local_path(stage.uri)
    if not path.is_file():
        raise errors.UserError(
            f"code_uri {stage.uri} does not exist (read as {path}). Fix: upload the package "
            "there (`vsp submit --code DIR` does), or correct the URI."
        )
    actual = file_sha256(path)
    if actual != stage.sha256:
        raise errors.UserError(
            f"code_uri {stage.uri} has sha256 {actual}, not the pinned {stage.sha256}: the "
            "object was changed after it was pinned (or the digest is wrong); nothing was "
            "submitted. Fix: stage the code again (`vsp submit --code DIR` uploads it and "
            "passes its digest), or, if this object is the code meant, pin its digest."
        )


def check_container(image: str, cluster: dict[str, Any] | None, cluster_id: str) -> None:
    """Refuses ``image`` unless the cluster's label says its nodes have pyxis.

    Raises:
        errors.UserError: The cluster lacks the ``slurm-pyxis: yes`` label.
    """
    if not image:
        return
    labels = (cluster or {}).get("labels") or {}
    if labels.get(container_run.PYXIS_LABEL) == "yes":
        return
    raise errors.UserError(
        f"container_image {image!r} needs pyxis (srun --container-image) on the nodes of "
        f"cluster {cluster_id}, and the cluster does not declare it (label "
        f"{container_run.PYXIS_LABEL}=yes missing); nothing was submitted. Fix: install "
        "enroot and pyxis on the cluster's nodes (plugstack.conf; check on a node that "
        f"`srun --help` lists --container-image), then label the cluster "
        f"{container_run.PYXIS_LABEL}=yes; or drop container_image and pass code_uri to run "
        "staged code in its own virtual environment."
    )
