"""``vsp submit --code DIR``: pack a folder reproducibly, upload it beside the run's outputs.

``pack`` makes a gzip tarball whose bytes depend only on the folder's file names, contents and
executable bits: entries sorted, every time set to ``MTIME``, owner 0/0 without names, modes
0644/0755, and gzip's own header time 0. So the same tree always has the same sha256, and a
changed one never does. ``.git``, ``__pycache__`` and ``*.pyc`` are left out; a symlink is
refused (its target would not travel).

``upload`` writes it to ``PIPELINE_ROOT/vsp-code/SHA256.tar.gz``: through google-cloud-storage
(a dependency of google-cloud-aiplatform, with the same application-default credentials) on
Google Cloud, and into the emulated Cloud Storage folder (``$VSP_GCS_FUSE_ROOT``) when
``VERTEX_EMULATOR_HOST`` is set. The name holds the digest, so an object already there is
left as it is (create-only upload); the training step checks its digest before submitting.
"""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import os
import pathlib
import tarfile

from vsp.components.runtime.core import errors, gcs_paths, rest
from vsp.pipelines.cli import common

MTIME = 315532800  # 1980-01-01, the earliest time zip-based tools also keep
SKIPPED_DIRS = frozenset({".git", "__pycache__"})
SKIPPED_SUFFIXES = (".pyc",)
FOLDER = "vsp-code"


@dataclasses.dataclass(frozen=True)
class Package:
    """A packed folder: its bytes, digest and size."""

    data: bytes
    sha256: str
    files: int

    def uri(self, pipeline_root: str) -> str:
        """``PIPELINE_ROOT/vsp-code/SHA256.tar.gz``."""
        root = gcs_paths.to_gcs_uri(pipeline_root)
        if root is None:
            raise errors.UserError(
                f"--pipeline-root {pipeline_root!r} is not on Cloud Storage, so the code "
                "cannot be uploaded beside the outputs. Fix: give gs://BUCKET/PATH."
            )
        return f"{root}/{FOLDER}/{self.sha256}.tar.gz"


def _members(folder: pathlib.Path) -> list[pathlib.Path]:
    found = []
    for current, dirs, files in os.walk(folder, followlinks=False):
        base = pathlib.Path(current)
        for name in list(dirs):
            if name in SKIPPED_DIRS:
                dirs.remove(name)
            elif (base / name).is_symlink():
                found.append(base / name)  # refused below
        found += [base / n for n in files if not n.endswith(SKIPPED_SUFFIXES)]
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix())


def pack_folder(folder: str | os.PathLike) -> Package:
    """The folder as a reproducible ``.tar.gz`` (see the module docstring).

    Raises:
        errors.UserError: Not a folder, an empty one, or one holding a symlink.
    """
    root = pathlib.Path(folder)
    if not root.is_dir():
        raise errors.UserError(f"--code {folder!r} is not a folder. Fix: give the code's folder.")
    members = _members(root)
    links = [str(p.relative_to(root)) for p in members if p.is_symlink()]
    if links:
        raise errors.UserError(
            f"--code {folder} holds symlinks ({', '.join(links[:5])}), which would not reach "
            "the cluster as they are. Fix: replace them with the files they point to."
        )
    if not members:
        raise errors.UserError(f"--code {folder} has no files. Fix: give the trainer's folder.")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for path in members:
            data = path.read_bytes()
            info = tarfile.TarInfo(path.relative_to(root).as_posix())
            info.size, info.mtime = len(data), MTIME
            info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            archive.addfile(info, io.BytesIO(data))
    data = gzip.compress(buffer.getvalue(), compresslevel=9, mtime=0)
    return Package(data, hashlib.sha256(data).hexdigest(), len(members))


def pack(folder: str | os.PathLike) -> bytes:
    """The reproducible ``.tar.gz`` bytes of ``folder``."""
    return pack_folder(folder).data


def upload(package: Package, uri: str) -> bool:
    """Writes the package to ``uri`` unless it is there already; True when written.

    Raises:
        errors.UserError: With the emulator and no ``$VSP_GCS_FUSE_ROOT``; no credentials or
            no permission on Cloud Storage.
        errors.TransientError: Cloud Storage did not answer.
    """
    if rest.emulator_host():
        if not os.environ.get(gcs_paths.GCS_FUSE_ROOT_ENV):
            raise errors.UserError(
                "VERTEX_EMULATOR_HOST is set but VSP_GCS_FUSE_ROOT is not, so the emulated "
                "Cloud Storage folder is unknown. Fix: export VSP_GCS_FUSE_ROOT as `vsp "
                "emulator` prints it (STATE_DIR/gcs)."
            )
        path = gcs_paths.to_local_path(uri)
        if path.is_file():
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
        partial.write_bytes(package.data)
        os.replace(partial, path)
        return True
    return _upload_to_gcs(package, uri)


def _upload_to_gcs(package: Package, uri: str) -> bool:
    import google.api_core.exceptions as api_exceptions  # noqa: PLC0415 - slow imports
    import google.auth.exceptions  # noqa: PLC0415
    from google.cloud import storage  # noqa: PLC0415

    bucket, _, name = uri[len("gs://") :].partition("/")
    try:
        blob = storage.Client().bucket(bucket).blob(name)
        blob.upload_from_string(
            package.data, content_type="application/gzip", if_generation_match=0
        )
    except api_exceptions.PreconditionFailed:
        return False  # already there: the name is the digest
    except google.auth.exceptions.GoogleAuthError as exc:
        raise common.credentials_error(f"upload of the code to {uri}", exc) from exc
    except api_exceptions.Forbidden as exc:
        raise errors.UserError(
            f"upload of the code to {uri}: permission denied. Fix: grant "
            "roles/storage.objectCreator on the pipeline root's bucket."
        ) from exc
    except (api_exceptions.ServerError, api_exceptions.TooManyRequests) as exc:
        raise errors.TransientError(f"upload of the code to {uri}: {exc}") from exc
    return True
