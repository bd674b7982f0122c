"""Verifiable directories: the final model directory, and the file primitives behind it.

A model directory holds the trained model and a ``manifest.json`` written last::

    <model_dir>/model.npz       named numpy arrays (the parameters)
    <model_dir>/metadata.json   JSON-able dict (step, config, ...)
    <model_dir>/<extra files>   e.g. metrics.json with the loss history
    <model_dir>/manifest.json   format, format_version, step, created, size + sha256 per file,
                                and the run that wrote it (``run_key``, when ``VSP_RUN_KEY`` is set)

``verify_model_dir`` returns the manifest only when every listed file matches and nothing else is
there; otherwise it raises ``ModelDirError`` (a ``UserError``) naming each problem. A "register
model" step registers only a directory that verifies.

The pickle-free ``.npz`` codec and the JSON encoding are shared with ``checkpoint.py``; the
file primitives are in ``file_primitives`` and the numpy-free verification in ``manifests``
(the registration step runs without numpy). Stdlib + numpy only.
"""

from __future__ import annotations

import json
import logging
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from vsp.components.runtime.core import errors, file_primitives
from vsp.components.runtime.trainer import contract, manifests

log = logging.getLogger(__name__)

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)  # fixed member timestamps: same arrays -> same bytes

# The numpy-free parts live in ``file_primitives`` and ``manifests`` (the registration step
# verifies a model directory without numpy); they are named here too for trainer code.


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
    payload: dict[str, bytes | file_primitives.Writer] = {
        manifests.MODEL_FILE: lambda f: write_npz(f, checked),
        manifests.MODEL_METADATA_FILE: encode_json(dict(metadata)),
    }
    for name, content in (extra_files or {}).items():
        if (
            not name
            or "/" in name
            or name.startswith(".")
            or name in payload
            or name == manifests.MANIFEST
        ):
            raise errors.UserError(f"extra file name {name!r} is reserved or not a plain name")
        if isinstance(content, str):
            content = content.encode("utf-8")
        payload[name] = content if isinstance(content, bytes) else encode_json(content)
    root.mkdir(parents=True, exist_ok=True)
    previous = _previous_files(root)
    foreign = []
    for entry in root.iterdir():
        if entry.name.startswith(file_primitives.TMP_PREFIX) and entry.is_file():
            entry.unlink()
        elif (
            entry.name != manifests.MANIFEST
            and entry.name not in payload
            and entry.name not in previous
        ):
            foreign.append(entry.name)
    if foreign:
        raise errors.UserError(
            f"model directory {root} holds files this writer did not create: {sorted(foreign)}. "
            "Fix: point the model dir at an empty directory."
        )
    (root / manifests.MANIFEST).unlink(missing_ok=True)  # the directory must not verify mid-rewrite
    for stale in previous - set(payload):
        (root / stale).unlink(missing_ok=True)
    for name, data in payload.items():
        file_primitives.write_file_atomic(root / name, data)
    created, created_iso = file_primitives.utc_now()
    manifest = {
        "format": manifests.MODEL_FORMAT,
        "format_version": manifests.MODEL_FORMAT_VERSION,
        "step": step,
        "created_unix": created,
        "created": created_iso,
        "files": file_primitives.describe_files(root, sorted(payload)),
    }
    run_key = os.environ.get(contract.RUN_KEY_ENV, "")
    if run_key:  # the training step checks that the model it registers is its run's
        manifest[manifests.MODEL_RUN_KEY] = run_key
    file_primitives.write_file_atomic(root / manifests.MANIFEST, encode_json(manifest))
    return manifest


def _previous_files(root: Path) -> set[str]:
    try:
        files = json.loads((root / manifests.MANIFEST).read_bytes()).get("files", {})
    except (OSError, ValueError, AttributeError):
        return set()
    return {n for n in files if isinstance(n, str) and "/" not in n and not n.startswith(".")}


def read_model_dir(path: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Verifies a model directory, then returns its (arrays, metadata)."""
    root = Path(path)
    manifests.verify_model_dir(root)
    arrays = read_npz(root / manifests.MODEL_FILE)
    return arrays, json.loads((root / manifests.MODEL_METADATA_FILE).read_bytes())
