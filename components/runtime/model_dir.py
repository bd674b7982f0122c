"""Verifiable directories: the final model directory, and the file primitives behind it.

A model directory holds the trained model and a ``manifest.json`` written last::

    <model_dir>/model.npz       named numpy arrays (the parameters)
    <model_dir>/metadata.json   JSON-able dict (step, config, ...)
    <model_dir>/<extra files>   e.g. metrics.json with the loss history
    <model_dir>/manifest.json   format, format_version, step, created, size + sha256 per file

``verify_model_dir`` returns the manifest only when every listed file matches and nothing else is
there; otherwise it raises ``ModelDirError`` (a ``UserError``) naming each problem. A "register
model" step registers only a directory that verifies.

The primitives (atomic writes, fsync of directories tolerant of GCS FUSE, sha256 digests, the
pickle-free ``.npz`` codec, JSON encoding) are shared with ``checkpoint.py``. Stdlib + numpy only.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
import secrets
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from components.runtime import errors

log = logging.getLogger(__name__)

FORMAT = "vsp-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
MODEL_FILE = "model.npz"
METADATA_FILE = "metadata.json"
TMP_PREFIX = ".tmp-"
_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed member timestamps: same arrays -> same bytes

Writer = Callable[[IO[bytes]], None]


class ModelDirError(errors.UserError):
    """A model directory does not verify; ``problems`` lists what is wrong, one item each."""

    def __init__(self, path: Path, problems: list[str]):
        self.path = path
        self.problems = list(problems)
        super().__init__(
            f"model directory {path} does not verify: {'; '.join(self.problems)}. "
            "Fix: rerun the step that writes it; do not register this directory."
        )


# ----- file primitives -----


def fsync_dir(path: str | os.PathLike) -> bool:
    """fsyncs a directory so renames in it are durable; False where unsupported (GCS FUSE)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.debug("directory fsync of %s failed (tolerated): %s", path, exc)
        return False
    return True


def write_synced(path: Path, data: bytes | Writer) -> None:
    """Writes ``data`` (bytes, or a function writing to the file) to ``path``; flush + fsync."""
    with open(path, "wb") as f:
        if callable(data):
            data(f)
        else:
            f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_file_atomic(path: Path, data: bytes | Writer) -> None:
    """Writes a temp file next to ``path``, fsyncs it, renames it over ``path``, fsyncs the dir."""
    tmp = path.parent / f"{TMP_PREFIX}{path.name}-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        write_synced(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def file_digest(path: Path) -> tuple[int, str]:
    """The size in bytes and hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def describe_files(directory: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """The manifest ``files`` entry (size and sha256) of each named file in ``directory``."""
    described = {}
    for name in names:
        size, sha = file_digest(directory / name)
        described[name] = {"size": size, "sha256": sha}
    return described


def file_problems(directory: Path, files: Any) -> list[str]:
    """Checks files against a manifest ``files`` mapping; returns one message per mismatch."""
    if not isinstance(files, dict) or not files:
        return ["manifest has no 'files' mapping"]
    problems = []
    for name, entry in sorted(files.items()):
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
            problems.append(f"manifest entry for {name!r} is malformed")
            continue
        target = directory / name
        if "/" in name or name.startswith(".") or not target.is_file():
            problems.append(f"file {name!r} is missing")
            continue
        size, sha = file_digest(target)
        if size != entry["size"]:
            problems.append(f"file {name!r} has {size} bytes, manifest says {entry['size']}")
        elif sha != entry.get("sha256"):
            problems.append(f"file {name!r} sha256 {sha[:12]}... does not match the manifest")
    return problems


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        raise TypeError("numpy arrays belong in 'arrays', not in the JSON metadata")
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def encode_json(value: Any) -> bytes:
    """Encodes JSON metadata (numpy scalars become Python numbers); UserError if impossible."""
    try:
        text = json.dumps(value, sort_keys=True, indent=1, default=_json_default)
    except (TypeError, ValueError) as exc:
        raise errors.UserError(f"metadata is not JSON-serialisable: {exc}") from exc
    return text.encode("utf-8") + b"\n"


def check_arrays(arrays: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Validates named arrays: non-empty str names, no object dtype (no pickle)."""
    checked = {}
    for name, value in arrays.items():
        if not isinstance(name, str) or not name or "\0" in name:
            raise errors.UserError(f"array name {name!r} must be a non-empty string")
        array = np.asarray(value)
        if array.dtype.hasobject:
            raise errors.UserError(
                f"array {name!r} has an object dtype; only plain numeric/bool/str arrays are "
                "stored (no pickle). Fix: put Python objects in the JSON metadata."
            )
        checked[name] = array
    return checked


def write_npz(f: IO[bytes], arrays: Mapping[str, np.ndarray]) -> None:
    """Writes arrays as an uncompressed ``.npz`` (zip of ``.npy``) with pickling disabled."""
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(name + ".npy", date_time=_ZIP_EPOCH)
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def read_npz(path: Path) -> dict[str, np.ndarray]:
    """Reads every array of an ``.npz`` file with ``allow_pickle=False``."""
    arrays = {}
    with zipfile.ZipFile(path) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                raise ValueError(f"unexpected member {info.filename!r} in {path.name}")
            with zf.open(info) as member:
                key = info.filename[: -len(".npy")]
                arrays[key] = np.lib.format.read_array(member, allow_pickle=False)
    return arrays


def utc_now() -> tuple[float, str]:
    """Current time as (unix seconds, ISO-8601 UTC string)."""
    now = time.time()
    return now, datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc).isoformat()


# ----- the model directory -----


def write_model_dir(
    path: str | os.PathLike,
    arrays: Mapping[str, Any],
    metadata: Mapping[str, Any],
    *,
    step: int | None = None,
    extra_files: Mapping[str, bytes | str | dict | list] | None = None,
) -> dict[str, Any]:
    """Writes the final model files, each atomically, then ``manifest.json`` last.

    Args:
        path: The local model directory (created if missing; map ``gs://`` URIs with
            ``checkpoint.to_local_path``). Files of an earlier write (listed in its manifest) are
            replaced; any other file there is refused, to avoid clobbering.
        arrays: Named numpy arrays, written to ``model.npz`` (no pickle).
        metadata: JSON-able dict, written to ``metadata.json``.
        step: Training step recorded in the manifest; default ``metadata["step"]`` if present.
        extra_files: More files by plain name: bytes/str as is, dicts/lists as JSON.

    Returns:
        The manifest written.
    """
    root = Path(path)
    checked = check_arrays(arrays)
    step = metadata.get("step") if step is None else step
    if step is not None and (isinstance(step, bool) or not isinstance(step, int)):
        raise errors.UserError(f"step must be an int or None, got {step!r}")
    payload: dict[str, bytes | Writer] = {
        MODEL_FILE: lambda f: write_npz(f, checked),
        METADATA_FILE: encode_json(dict(metadata)),
    }
    for name, content in (extra_files or {}).items():
        if not name or "/" in name or name.startswith(".") or name in payload or name == MANIFEST:
            raise errors.UserError(f"extra file name {name!r} is reserved or not a plain name")
        if isinstance(content, str):
            content = content.encode("utf-8")
        payload[name] = content if isinstance(content, bytes) else encode_json(content)
    root.mkdir(parents=True, exist_ok=True)
    previous = _previous_files(root)
    foreign = []
    for entry in root.iterdir():
        if entry.name.startswith(TMP_PREFIX) and entry.is_file():
            entry.unlink()
        elif entry.name != MANIFEST and entry.name not in payload and entry.name not in previous:
            foreign.append(entry.name)
    if foreign:
        raise errors.UserError(
            f"model directory {root} holds files this writer did not create: {sorted(foreign)}. "
            "Fix: point the model dir at an empty directory."
        )
    (root / MANIFEST).unlink(missing_ok=True)  # the directory must not verify mid-rewrite
    for stale in previous - set(payload):
        (root / stale).unlink(missing_ok=True)
    for name, data in payload.items():
        write_file_atomic(root / name, data)
    created, created_iso = utc_now()
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "step": step,
        "created_unix": created,
        "created": created_iso,
        "files": describe_files(root, sorted(payload)),
    }
    write_file_atomic(root / MANIFEST, encode_json(manifest))
    return manifest


def _previous_files(root: Path) -> set[str]:
    try:
        files = json.loads((root / MANIFEST).read_bytes()).get("files", {})
    except (OSError, ValueError, AttributeError):
        return set()
    return {n for n in files if isinstance(n, str) and "/" not in n and not n.startswith(".")}


def verify_model_dir(path: str | os.PathLike) -> dict[str, Any]:
    """Returns the manifest of a complete model directory, else raises ``ModelDirError``.

    Problems named: missing directory, missing or unparsable manifest, wrong format or version,
    a listed file missing, a size or sha256 mismatch, a file present but not in the manifest.
    """
    root = Path(path)
    if not root.is_dir():
        raise ModelDirError(root, ["the directory does not exist"])
    try:
        manifest = json.loads((root / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise ModelDirError(root, [f"{MANIFEST} is missing (the writer did not finish)"]) from None
    except ValueError as exc:
        raise ModelDirError(root, [f"{MANIFEST} is not valid JSON: {exc}"]) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ModelDirError(root, [f"{MANIFEST} is not a {FORMAT} manifest"])
    if manifest.get("format_version") != FORMAT_VERSION:
        version = manifest.get("format_version")
        raise ModelDirError(root, [f"unsupported format_version {version!r}"])
    files = manifest.get("files")
    problems = file_problems(root, files)
    if isinstance(files, dict) and MODEL_FILE not in files:
        problems.append(f"manifest does not list {MODEL_FILE!r}")
    listed = set(files) if isinstance(files, dict) else set()
    for entry in sorted(root.iterdir()):
        if entry.name != MANIFEST and entry.name not in listed:
            problems.append(f"extra file {entry.name!r} is not listed in the manifest")
    if problems:
        raise ModelDirError(root, problems)
    return manifest


def read_model_dir(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Verifies a model directory, then returns its (arrays, metadata)."""
    root = Path(path)
    verify_model_dir(root)
    arrays = read_npz(root / MODEL_FILE)
    return arrays, json.loads((root / METADATA_FILE).read_bytes())
