"""Reading and verifying checkpoint and model manifests, with the standard library only.

The trainer-side libraries (``checkpoint``, ``model_dir``, which need numpy) write these
directories; the pipeline steps only read them: the training step checks it can see the
checkpoint root (for the goodput figures) and the registration step verifies the model directory
before uploading it. Both run on a stock Python image, so this module imports no numpy.

Layouts::

    <root>/ckpt-0000000120/{arrays.npz, metadata.json, manifest.json}
    <root>/history.jsonl                  saves and resumes as they happened (``history``)
    <model_dir>/{model.npz, metadata.json, <extra files>, manifest.json}

A manifest holds the format, its version, the step, the creation time and the size and sha256 of
every file; it is written last, so a directory whose manifest does not verify is torn. When each
checkpoint was written is kept in the history file, which retention never prunes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from pathlib import Path
from typing import Any

from vsp.components.runtime.core import errors, file_primitives, gcs_paths

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
CHECKPOINT_FORMAT = "vsp-checkpoint"
CHECKPOINT_FORMAT_VERSION = 1
CHECKPOINT_ARRAYS_FILE = "arrays.npz"
CHECKPOINT_METADATA_FILE = "metadata.json"
MODEL_FORMAT = "vsp-model"
MODEL_FORMAT_VERSION = 1
MODEL_FILE = "model.npz"
MODEL_METADATA_FILE = "metadata.json"
MODEL_RUN_KEY = "run_key"  # manifest field: the run that wrote the model (``VSP_RUN_KEY``)
_CHECKPOINT_NAME = re.compile(r"^ckpt-(\d{10,})\Z")
# A checkpoint whose files a framework wrote (``collective.commit``): the manifest says
# ``"payload": "directory"`` and lists every file under ``STATE_DIR`` by relative path.
PAYLOAD_DIRECTORY = "directory"
STATE_DIR = "state"


class CorruptCheckpointError(errors.UserError):
    """A checkpoint is torn (no valid manifest) or its files do not match the manifest."""


class ModelDirError(errors.UserError):
    """A model directory does not verify; ``problems`` lists what is wrong, one item each."""

    def __init__(self, path: Path, problems: list[str], fix: str = ""):
        self.path = path
        self.problems = list(problems)
        super().__init__(
            f"model directory {path} does not verify: {'; '.join(self.problems)}. "
            f"Fix: {fix or 'rerun the step that writes it; do not register this directory.'}"
        )


@dataclasses.dataclass(frozen=True)
class CheckpointRef:
    """A checkpoint found on disk whose manifest verified. ``manifest`` is the parsed JSON."""

    path: Path
    step: int
    manifest: dict[str, Any]


def checkpoint_name(step: int) -> str:
    """The directory name of the checkpoint of ``step``: ``ckpt-{step:010d}``."""
    return f"ckpt-{step:010d}"


def list_checkpoints(directory: file_primitives.PathLike) -> list[tuple[int, Path]]:
    """(step, path) of every ``ckpt-*`` directory, valid or not, by ascending step."""
    root = gcs_paths.to_local_path(directory)
    if not root.exists():
        return []
    if not root.is_dir():
        raise errors.UserError(f"checkpoint root {root} is not a directory")
    found = []
    for entry in root.iterdir():
        match = _CHECKPOINT_NAME.match(entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def _read_manifest(path: Path, error: type[errors.UserError]) -> Any:
    try:
        raw = (path / MANIFEST).read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: no {MANIFEST} (torn save)") from None
    except OSError as exc:
        raise error(f"{path}: cannot read {MANIFEST}: {exc}") from exc
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise error(f"{path}: {MANIFEST} is not valid JSON: {exc}") from exc


def verify_checkpoint(path: file_primitives.PathLike) -> CheckpointRef:
    """Checks one checkpoint directory; raises ``CorruptCheckpointError`` saying why it is bad."""
    path = gcs_paths.to_local_path(path)
    match = _CHECKPOINT_NAME.match(path.name)
    if not match:
        raise CorruptCheckpointError(f"{path}: not a ckpt-NNNNNNNNNN directory")
    step = int(match.group(1))
    manifest = _read_manifest(path, CorruptCheckpointError)
    if not isinstance(manifest, dict) or manifest.get("format") != CHECKPOINT_FORMAT:
        raise CorruptCheckpointError(f"{path}: {MANIFEST} is not a {CHECKPOINT_FORMAT} manifest")
    if manifest.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        version = manifest.get("format_version")
        raise CorruptCheckpointError(f"{path}: unsupported format_version {version!r}")
    if manifest.get("step") != step:
        raise CorruptCheckpointError(f"{path}: manifest step {manifest.get('step')!r} != {step}")
    files = manifest.get("files")
    listed = files if isinstance(files, dict) else {}
    if manifest.get("payload") == PAYLOAD_DIRECTORY:  # parts written by a framework (collective)
        try:
            problems = tree_problems(path, files)
        except OSError as exc:
            problems = [f"cannot read files: {exc}"]
        if problems:
            raise CorruptCheckpointError(f"{path}: " + "; ".join(problems))
        return CheckpointRef(path=path, step=step, manifest=manifest)
    required = (CHECKPOINT_ARRAYS_FILE, CHECKPOINT_METADATA_FILE)
    problems = [f"manifest does not list {n!r}" for n in required if n not in listed]
    try:
        problems += file_primitives.file_problems(path, files)
    except OSError as exc:
        problems.append(f"cannot read files: {exc}")
    if problems:
        raise CorruptCheckpointError(f"{path}: " + "; ".join(problems))
    return CheckpointRef(path=path, step=step, manifest=manifest)


def tree_problems(path: Path, files: Any) -> list[str]:
    """Checks a ``directory`` checkpoint's files (relative paths under ``STATE_DIR``, dot
    files allowed, no ``..``) against its manifest; one message per problem."""
    if not isinstance(files, dict) or not files:
        return ["manifest has no 'files' mapping"]
    problems = []
    for name, entry in sorted(files.items()):
        parts = name.split("/") if isinstance(name, str) else []
        if len(parts) < 2 or parts[0] != STATE_DIR or any(p in ("", ".", "..") for p in parts):
            problems.append(f"manifest entry {name!r} is not a file under {STATE_DIR}/")
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
            problems.append(f"manifest entry for {name!r} is malformed")
            continue
        target = path.joinpath(*parts)
        if target.is_symlink() or not target.is_file():
            problems.append(f"file {name!r} is missing")
            continue
        size, sha = file_primitives.file_digest(target)
        if size != entry["size"]:
            problems.append(f"file {name!r} has {size} bytes, manifest says {entry['size']}")
        elif sha != entry.get("sha256"):
            problems.append(f"file {name!r} sha256 {sha[:12]}... does not match the manifest")
    return problems


def latest_valid_checkpoint(directory: file_primitives.PathLike) -> CheckpointRef | None:
    """The newest checkpoint that verifies, logging why each newer one was skipped; or None."""
    for _, path in reversed(list_checkpoints(directory)):
        try:
            return verify_checkpoint(path)
        except CorruptCheckpointError as exc:
            log.warning("skipping checkpoint: %s", exc)
    return None


def checkpoints_visible(directory: file_primitives.PathLike) -> bool:
    """Whether this process can see the checkpoint directory (a pipeline step cannot see the
    cluster's own storage; it sees Cloud Storage through ``/gcs``)."""
    return gcs_paths.to_local_path(directory).is_dir()


def default_checkpoint_dir(model_dir: str, run_key: str) -> str:
    """``checkpoints/RUN_KEY`` in the folder holding ``model_dir``, in the same form.

    ``model_dir`` is on Cloud Storage (``/gcs/BUCKET/PATH`` or ``gs://BUCKET/PATH``, checked by
    the run's parameter check), so the checkpoints are too: the cluster writes them through its
    Cloud Storage FUSE mount and the step reads them through Cloud Storage. One folder per run
    key keeps two training tasks, and two runs, apart.

    Raises:
        errors.UserError: ``model_dir`` has no parent folder to hold the checkpoints.
    """
    parent = model_dir.rstrip("/").rpartition("/")[0]
    bucket_or_folder = parent[5:] if parent.startswith(("gs://", "/gcs/")) else parent.strip("/")
    if not bucket_or_folder or parent in ("gs:/", "/gcs"):
        raise errors.UserError(
            f"model_dir {model_dir!r} has no folder above it to hold the default checkpoint "
            "directory. Fix: use gs://BUCKET/RUN/model (or /gcs/BUCKET/RUN/model), or set "
            "checkpoint_dir."
        )
    return f"{parent}/checkpoints/{run_key}"


def verify_model_dir(path: file_primitives.PathLike) -> dict[str, Any]:
    """Returns the manifest of a complete model directory, else raises ``ModelDirError``.

    Problems named: missing directory, missing or unparsable manifest, wrong format or version,
    a listed file missing, a size or sha256 mismatch, a file present but not in the manifest.
    """
    root = Path(path)
    if not root.is_dir():
        raise ModelDirError(
            root,
            ["the directory does not exist"],
            "check model_dir; if it is the training step's, its trainer wrote no model there: "
            "make it write its final model to $VSP_MODEL_DIR (model_files.write_model_dir; "
            "docs/trainer-contract.md). Rerunning this step alone cannot help.",
        )
    try:
        manifest = json.loads((root / MANIFEST).read_bytes())
    except FileNotFoundError:
        written = sorted(entry.name for entry in root.iterdir())
        if not written:
            raise ModelDirError(root, [f"{MANIFEST} is missing: the folder is empty"]) from None
        shown = ", ".join(written[:5]) + (", ..." if len(written) > 5 else "")
        raise ModelDirError(
            root,
            [
                f"{MANIFEST} is missing: the folder holds {shown}, written without vsp's model "
                "files, or by a writer that did not finish"
            ],
            "write the final model with vsp.components.runtime.trainer.model_files."
            "write_model_dir (it writes model.npz and the manifest last; "
            "docs/trainer-contract.md), or rerun a training that was cut short.",
        ) from None
    except ValueError as exc:
        raise ModelDirError(root, [f"{MANIFEST} is not valid JSON: {exc}"]) from exc
    if not isinstance(manifest, dict) or manifest.get("format") != MODEL_FORMAT:
        raise ModelDirError(root, [f"{MANIFEST} is not a {MODEL_FORMAT} manifest"])
    if manifest.get("format_version") != MODEL_FORMAT_VERSION:
        version = manifest.get("format_version")
        raise ModelDirError(root, [f"unsupported format_version {version!r}"])
    files = manifest.get("files")
    problems = file_primitives.file_problems(root, files)
    if isinstance(files, dict) and MODEL_FILE not in files:
        problems.append(f"manifest does not list {MODEL_FILE!r}")
    listed = set(files) if isinstance(files, dict) else set()
    for entry in sorted(root.iterdir()):
        if entry.name != MANIFEST and entry.name not in listed:
            problems.append(f"extra file {entry.name!r} is not listed in the manifest")
    if problems:
        raise ModelDirError(root, problems)
    return manifest


def model_run_key(path: file_primitives.PathLike) -> str | None:
    """The run key a model directory's manifest names (None: no manifest, an unreadable one, or
    one written outside a run, without ``run_key``). Does not verify the files."""
    try:
        manifest = json.loads((Path(path) / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return None
    found = manifest.get(MODEL_RUN_KEY) if isinstance(manifest, dict) else None
    return str(found) if found else None
