"""Pre-warm intents: which cluster the reaper creates again, with what body, and when.

A teardown decision that pre-warms (``teardown.prewarm``) deletes the cluster, so the cluster
cannot carry its own re-creation. Before it is deleted, the decide-teardown step writes one JSON
file per cluster into ``prewarm_dir`` (a ``gs://BUCKET/PATH`` seen through Cloud Storage FUSE,
or a local folder), and the reaper (``teardown.prewarm_reaper``) reads the folder::

    {"version": 1, "cluster": "projects/P/locations/L/modelDevelopmentClusters/ID",
     "body": {...create request body...}, "tick": T, "create_at": T, "ready_at": T,
     "expires_at": T, "decided_by": "pipeline run"}

Times are epoch seconds. A newer decision for the same cluster replaces the file (written
whole, then renamed: a reader never sees half of it); the reaper removes it once the cluster is
created, exists anyway, or its run's expiry has passed, and a later decision for the cluster
that does not pre-warm withdraws it. Standard library JSON: the file is a handful of fields.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from vsp.components.runtime.core import errors, file_primitives, gcs_paths

log = logging.getLogger(__name__)

VERSION = 1
SUFFIX = ".prewarm.json"


@dataclasses.dataclass(frozen=True)
class Intent:
    """One cluster to create again before its next run.

    Attributes:
        cluster: Full resource name of the cluster.
        body: The create request body (the cluster's spec as it was, with its user labels).
        tick: The next run's cron tick, epoch seconds.
        create_at: The reaper tick due to create it, epoch seconds.
        ready_at: When the creation should be done, epoch seconds.
        expires_at: When the pre-warmed cluster may be reaped if no run came, epoch seconds.
        decided_by: The pipeline run whose decision this is ('' when unknown).
    """

    cluster: str
    body: dict[str, Any]
    tick: float
    create_at: float
    ready_at: float
    expires_at: float
    decided_by: str = ""

    @property
    def parent(self) -> str:
        """``projects/P/locations/L`` of the cluster."""
        return self.cluster.split("/modelDevelopmentClusters/", 1)[0]

    def to_json(self) -> dict[str, Any]:
        """The file's content."""
        return {"version": VERSION, **dataclasses.asdict(self)}


def folder(prewarm_dir: str) -> Path:
    """The local path of ``prewarm_dir`` (a ``gs://`` URI maps to the Cloud Storage FUSE mount).

    Raises:
        errors.UserError: ``prewarm_dir`` is empty or a ``gs://`` URI without a bucket.
    """
    if not prewarm_dir:
        raise errors.UserError(
            "prewarm_dir is empty. Fix: name the folder the reaper reads pre-warm requests "
            "from, e.g. gs://BUCKET/vsp/prewarm (the same value for the reaper)."
        )
    return gcs_paths.to_local_path(prewarm_dir)


def check_folder_given(margin_minutes: float, prewarm_dir: str, group: str = "") -> None:
    """A pre-warm needs the folder the reaper reads its requests from.

    Args:
        margin_minutes: ``prewarm_margin_minutes``.
        prewarm_dir: ``prewarm_dir``.
        group: Where both were given, for the message (``teardown_options.``; '' = flat).

    Raises:
        errors.UserError: ``margin_minutes`` > 0 and ``prewarm_dir`` is empty.
    """
    if margin_minutes > 0 and not prewarm_dir:
        margin, folder_name = f"{group}prewarm_margin_minutes", f"{group}prewarm_dir"
        raise errors.UserError(
            f"{margin} = {margin_minutes:g} but {folder_name} is empty, so no reaper could "
            f"re-create the cluster. Fix: set {folder_name} to a folder such as "
            "gs://BUCKET/vsp/prewarm and give the reap-expired-clusters schedule the same "
            f"prewarm_dir, or set {margin} to 0."
        )


def file_name(cluster: str) -> str:
    """The intent's file name for the cluster ``projects/P/locations/L/...Clusters/ID``."""
    return cluster.replace("/", "__") + SUFFIX


def write(prewarm_dir: str, intent: Intent) -> Path:
    """Writes (or replaces) the intent of ``intent.cluster``; returns its path."""
    path = folder(prewarm_dir) / file_name(intent.cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(intent.to_json(), indent=2, sort_keys=True).encode()
    file_primitives.write_file_atomic(path, data)
    log.info("pre-warm of %s recorded in %s", intent.cluster, path)
    return path


def _parse(path: Path) -> Intent | None:
    try:
        raw = json.loads(path.read_text())
        if raw.get("version") != VERSION:
            raise ValueError(f"version {raw.get('version')!r}, expected {VERSION}")
        return Intent(
            cluster=str(raw["cluster"]),
            body=dict(raw["body"]),
            tick=float(raw["tick"]),
            create_at=float(raw["create_at"]),
            ready_at=float(raw["ready_at"]),
            expires_at=float(raw["expires_at"]),
            decided_by=str(raw.get("decided_by", "")),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        log.warning("skipping unreadable pre-warm request %s: %s", path, exc)
        return None


def read_all(prewarm_dir: str) -> list[tuple[Path, Intent]]:
    """Every readable intent in the folder, by file name (none when the folder is missing);
    an unreadable file is skipped with a warning and left in place."""
    root = folder(prewarm_dir)
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.glob("*" + SUFFIX)):
        intent = _parse(path)
        if intent is not None:
            found.append((path, intent))
    return found


def withdraw(prewarm_dir: str, cluster: str) -> bool:
    """Removes the request of ``cluster``, if any: a newer decision did not pre-warm, so an
    older request must not re-create the cluster. Returns whether there was one."""
    path = folder(prewarm_dir) / file_name(cluster)
    if not path.exists():
        return False
    remove(path)
    log.info("pre-warm request of %s withdrawn: this decision does not pre-warm", cluster)
    return True


def remove(path: Path) -> None:
    """Removes an intent's file (already gone is fine)."""
    path.unlink(missing_ok=True)
