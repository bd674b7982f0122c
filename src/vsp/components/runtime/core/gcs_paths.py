"""Cloud Storage paths: ``gs://BUCKET/PATH`` and the GCS FUSE mount that shows it as files.

On Vertex AI, Cloud Storage FUSE mounts every bucket under ``/gcs`` (``/gcs/BUCKET/PATH``) in
training clusters, CustomJobs and pipeline steps; local runs mount nothing and point
``$VSP_GCS_FUSE_ROOT`` at the folder that stands in for it. Both directions of the mapping live
here.
"""

from __future__ import annotations

import os
from pathlib import Path

from vsp.components.runtime.core import errors

GCS_FUSE_ROOT_ENV = "VSP_GCS_FUSE_ROOT"
DEFAULT_FUSE_ROOT = "/gcs"


def fuse_root(gcs_root: str | None = None) -> str:
    """The mount point: ``gcs_root``, else ``$VSP_GCS_FUSE_ROOT``, else ``/gcs``."""
    return gcs_root or os.environ.get(GCS_FUSE_ROOT_ENV) or DEFAULT_FUSE_ROOT


def to_local_path(path: str | os.PathLike, *, gcs_root: str | None = None) -> Path:
    """Maps ``gs://bucket/x`` to the GCS FUSE mount (``/gcs/bucket/x``); other paths unchanged.

    Args:
        path: A local path, a ``/gcs/...`` path or a ``gs://`` URI.
        gcs_root: Mount point of GCS FUSE; default ``$VSP_GCS_FUSE_ROOT`` or ``/gcs``.

    Raises:
        errors.UserError: A ``gs://`` URI without a bucket.
    """
    text = os.fspath(path)
    if text.startswith("gs://"):
        rest = text[len("gs://") :].strip("/")
        if not rest:
            raise errors.UserError(f"{text!r} names no bucket. Fix: use gs://BUCKET/PATH.")
        return Path(fuse_root(gcs_root), rest)
    return Path(text).expanduser()


def to_gcs_uri(path: str, *, gcs_root: str | None = None) -> str | None:
    """The ``gs://`` URI of ``gs://...`` or of a path under the GCS FUSE mount; None otherwise.

    Raises:
        errors.UserError: A ``gs://`` URI without a bucket.
    """
    text = (path or "").strip()
    if text.startswith("gs://"):
        if not text[len("gs://") :].strip("/"):
            raise errors.UserError(f"{text!r} names no bucket. Fix: use gs://BUCKET/PATH.")
        return text.rstrip("/")
    root = os.path.abspath(fuse_root(gcs_root))
    absolute = os.path.abspath(text) if text else ""
    if absolute.startswith(root + os.sep) and absolute[len(root) + 1 :]:
        return "gs://" + absolute[len(root) + 1 :]
    return None
