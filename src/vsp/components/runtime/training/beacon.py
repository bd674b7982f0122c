"""The progress beacon: a small JSON file a Slurm job keeps on Cloud Storage for the step.

The batch script (``slurm.batch``) writes ``vsp-beacon-<JOB_ID>.json`` into the beacon folder on
each state change of the job (``started`` when the batch shell starts, ``running`` once the
payload runs, ``notice`` when a preemption or time-limit signal arrives, ``exiting`` with the
payload's exit code when it ended) and re-writes it as a heartbeat at most every
``VSP_BEACON_HEARTBEAT`` seconds. The training step reads it about every 100 s (each read a
counted Cloud Storage call, never within the FUSE cache's time: ``storage_reads``) and calls
Vertex (``callSlurmRestApi``) only when the beacon changes, goes stale, or after a long cap
(``training.poll_plan``).

Document (every field written by the batch shell, none taken from a parameter)::

    {"job": "123", "restart": 1, "state": "running", "since": 1767225600,
     "time": 1767225615, "rc": null, "prev_restart": 0, "prev_time": 1767225480}

``since`` is when the state was entered and ``time`` when the file was written (epoch seconds by
the cluster's clock). ``prev_restart`` and ``prev_time`` are the restart count and ``time`` of
the copy an earlier run of the job left, read when this run started (null when none): a run
lost without notice wrote nothing after it, which dates that run's end. A requeued job starts
again with ``restart`` one higher (``SLURM_RESTART_COUNT``), so a requeue shows in the beacon even
when no Vertex poll saw the job PENDING.

When the job cannot write the beacon folder (a folder the nodes do not mount, a read-only
mount, no permission), the batch script says so in the job's output and keeps the same fields in
its Slurm job comment instead, as one word ``vsp-beacon=STATE:RESTART:SINCE:RC`` after the words
the comment had at submission (``comment_word``, ``from_comment``). A job's owner may change the
comment of its own job (``scontrol update JobId=ID Comment=...``; ``AdminComment`` is the one
only an administrator sets, scontrol(1) of Slurm 24.11). The step then reads that word from the
answer of the Vertex call it makes anyway (``GET /slurm/v0.0.42/job/ID``): no Cloud Storage read.
A comment copy has no heartbeat (``time`` is ``since``).

Hand-rolled: a read of one small JSON file through the Cloud Storage FUSE mapping, counted and
cached as the mount would (``storage_reads``).
"""

from __future__ import annotations

import dataclasses
import json
import os

from vsp.components.runtime.core import gcs_paths
from vsp.components.runtime.training import storage_reads

STATES = ("started", "running", "notice", "saving", "exiting")
# States meaning the job still runs (``exiting``: the payload ended, the job ends next).
LIVE_STATES = ("started", "running", "notice", "saving")
FILE_PREFIX = "vsp-beacon-"
DIR_ENV = "VSP_BEACON_DIR"
HEARTBEAT_ENV = "VSP_BEACON_HEARTBEAT"
DEFAULT_HEARTBEAT_SECONDS = 15
BASE_COMMENT_ENV = "VSP_BEACON_COMMENT"
COMMENT_KEY = "vsp-beacon"
MAX_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class Beacon:
    """One read of a job's beacon.

    Attributes:
        job: Slurm job id that wrote it.
        restart: ``SLURM_RESTART_COUNT`` of the run that wrote it (0 on the first run).
        state: One of ``STATES``.
        since: Epoch seconds (cluster clock) the state was entered.
        time: Epoch seconds (cluster clock) this copy was written (moves at each heartbeat).
        rc: The payload's exit code with ``exiting``; None otherwise.
        prev_restart: The earlier run whose beacon this run found when it started (None: none).
        prev_time: When that run last wrote it: a run lost without notice wrote nothing
            after, so it ended within a heartbeat of that time (``poll_window.last_write``).
    """

    job: str
    restart: int
    state: str
    since: float
    time: float
    rc: int | None = None
    prev_restart: int | None = None
    prev_time: float | None = None

    @property
    def key(self) -> tuple[int, str, float]:
        """What identifies a state change: the run (restart count), the state, when entered."""
        return (self.restart, self.state, self.since)

    @property
    def live(self) -> bool:
        """Whether the beacon says the job still runs."""
        return self.state in LIVE_STATES

    @classmethod
    def parse(cls, text: str | bytes) -> Beacon | None:
        """The beacon in ``text``; None when not a beacon document (partly written, foreign)."""
        try:
            data = json.loads(text)
            state = data["state"]
            if state not in STATES:
                return None
            rc = data.get("rc")
            return cls(
                job=str(data["job"]),
                restart=int(data.get("restart") or 0),
                state=state,
                since=float(data["since"]),
                time=float(data["time"]),
                rc=None if rc is None else int(rc),
                **previous(data.get("prev_restart"), data.get("prev_time")),
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


def previous(restart: object, time: object) -> dict[str, int | float]:
    """``prev_restart`` and ``prev_time`` for ``Beacon`` from a document's values ({} when
    absent or not numbers: JSON null, the batch script's ``null``)."""
    try:
        return {"prev_restart": int(restart), "prev_time": float(time)}  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return {}


def folder_for(checkpoint_dir: str) -> str:
    """The beacon folder of a run: ``<checkpoint folder>.beacon`` beside the checkpoints.

    Beside rather than inside, so the checkpoint library never meets a foreign file; in the
    checkpoint folder's own form (``gs://`` URI or path), which the job and the step both
    resolve as they do the checkpoints. '' when the checkpoints are not on Cloud Storage
    (``gs://``, ``/gcs/`` or under ``$VSP_GCS_FUSE_ROOT``): the step could not read a beacon
    kept on the cluster's own disks.
    """
    text = (checkpoint_dir or "").rstrip("/")
    on_gcs = text.startswith(gcs_paths.DEFAULT_FUSE_ROOT + "/") or bool(
        text and gcs_paths.to_gcs_uri(text)
    )
    return text + ".beacon" if on_gcs else ""


def path_for(folder: str, job_id: str) -> str:
    """The beacon file of ``job_id`` in ``folder`` (a ``gs://`` URI or a path)."""
    return f"{folder.rstrip('/')}/{FILE_PREFIX}{job_id}.json"


def read(
    folder: str, job_id: str, reads: storage_reads.StorageReads | None = None
) -> Beacon | None:
    """The job's beacon as the step sees it; None when absent, unreadable or not visible here.

    Args:
        folder: The beacon folder ('' = none).
        job_id: The Slurm job id.
        reads: Counts the read and serves it from the modelled FUSE cache (None: read directly).
    """
    if not folder:
        return None
    path = path_for(folder, job_id)
    if reads is not None:
        text = reads.read_bytes(path, MAX_BYTES)
    else:
        try:
            with open(gcs_paths.to_local_path(path), "rb") as handle:
                text = handle.read(MAX_BYTES)
        except OSError:
            text = None
    found = Beacon.parse(text) if text is not None else None
    return found if found is not None and found.job == str(job_id) else None


def comment_word(beacon: Beacon) -> str:
    """The comment word of ``beacon`` (``vsp-beacon=STATE:RESTART:SINCE:RC``)."""
    rc = "null" if beacon.rc is None else str(beacon.rc)
    return f"{COMMENT_KEY}={beacon.state}:{beacon.restart}:{beacon.since:.0f}:{rc}"


def from_comment(comment: str, job_id: str) -> Beacon | None:
    """The beacon kept in a job's comment (the last ``vsp-beacon=`` word); None when none."""
    words = [w for w in (comment or "").split() if w.startswith(COMMENT_KEY + "=")]
    if not words:
        return None
    parts = words[-1][len(COMMENT_KEY) + 1 :].split(":")
    if len(parts) != 4 or parts[0] not in STATES:
        return None
    try:
        since = float(parts[2])
        rc = None if parts[3] == "null" else int(parts[3])
        return Beacon(str(job_id), int(parts[1]), parts[0], since, since, rc)
    except ValueError:
        return None


def environment(
    folder: str, heartbeat_seconds: float = DEFAULT_HEARTBEAT_SECONDS, comment: str = ""
) -> dict[str, str]:
    """The job environment that turns the batch script's beacon on (values travel as JSON).

    Args:
        folder: Beacon folder (``gs://BUCKET/PATH`` or a path the cluster sees); '' = no beacon.
        heartbeat_seconds: Longest time between two writes while nothing changes, seconds.
        comment: The job's comment at submission, which the comment channel keeps in front of
            its ``vsp-beacon=`` word ('' = the channel is off).
    """
    if not folder:
        return {}
    found = {DIR_ENV: os.fspath(folder), HEARTBEAT_ENV: f"{max(0.1, heartbeat_seconds):g}"}
    if comment:
        found[BASE_COMMENT_ENV] = comment
    return found
