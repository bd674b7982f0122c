"""Following a training job's log file from the step, where the step can see it.

On a training cluster a Slurm job writes stdout to a path on the cluster. The pipeline step runs
elsewhere: it sees Cloud Storage (through ``/gcs`` or ``$VSP_GCS_FUSE_ROOT``), not the cluster's
disks. ``LogFollower`` reads the lines added since the last poll when the file is visible
(bounded per poll, so a chatty trainer cannot flood the step's log), starts over when the file
was truncated (Slurm may truncate it when a requeued job starts again), and otherwise says once
where the log is: after the file's folder was missing at ``NOTE_AFTER_POLLS`` polls in a row, as
a starting job may not have created it yet; it keeps looking, so a folder that appears later is
followed. Hand-rolled because it is a seek-and-read over a plain file.
"""

from __future__ import annotations

import collections
import logging
import os
import re

from vsp.components.runtime.core import gcs_paths

log = logging.getLogger(__name__)

# A job's stdout file, named by the job's id and its name (the run key, ``%x``): a cluster
# created again numbers its jobs from 1, so with the id alone each night's run of a schedule
# appended to the file of the night before in a log folder both use.
FILE_PATTERN = "slurm-%j-%x.out"

# Slurm 24.11's line for a job whose working directory does not exist yet: the batch script
# creates that folder and enters it before the trainer starts (``slurm.batch``), so the line,
# shown beside a failure's real cause, would mislead; it is shown with that said.
# Slurm 24.11 writes "slurmstepd-NODE: error: ..." on a node named in slurm.conf.
_CHDIR_LINE = re.compile(
    r"^slurmstepd(-\S+)?: error: couldn't chdir to `[^']*'.*going to /tmp instead$"
)
CHDIR_NOTE = " (vsp: expected; the batch script creates that folder and runs the trainer in it)"

MAX_LINES_PER_POLL = 50
MAX_BYTES_PER_POLL = 256 * 1024
NOTE_AFTER_POLLS = 3


class LogFollower:
    """New lines of log files, file by file (one follower per step)."""

    def __init__(self, max_lines: int = MAX_LINES_PER_POLL, max_bytes: int = MAX_BYTES_PER_POLL):
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self._offsets: dict[str, int] = {}
        self._partial: dict[str, bytes] = {}
        self._missing: collections.Counter[str] = collections.Counter()

    def new_lines(self, path: str) -> list[str]:
        """Complete lines added to ``path`` since the last call (at most ``max_lines``, the
        newest, after a line saying how many were skipped); a one-time note when the file's
        folder stays invisible from here; [] when nothing is new."""
        local = gcs_paths.to_local_path(path)
        if not local.parent.is_dir():
            self._missing[path] += 1
            if self._missing[path] != NOTE_AFTER_POLLS:
                return []
            return [f"(the job's log is at {path} on the cluster, not visible from this step)"]
        try:
            size = os.path.getsize(local)
            offset = self._offsets.get(path, 0)
            if size < offset:  # truncated: the job started again
                offset, self._partial[path] = 0, b""
            with open(local, "rb") as handle:
                handle.seek(offset)
                data = handle.read(self.max_bytes)
        except OSError:
            return []  # not written yet
        self._offsets[path] = offset + len(data)
        text = self._partial.pop(path, b"") + data
        complete, _, rest = text.rpartition(b"\n")
        if rest:
            self._partial[path] = rest
        if not complete and not text.endswith(b"\n"):
            return []
        lines = [annotated(line) for line in complete.decode("utf-8", errors="replace").split("\n")]
        if len(lines) > self.max_lines:
            skipped = len(lines) - self.max_lines
            lines = [f"... ({skipped} lines not shown)", *lines[-self.max_lines :]]
        return lines


def annotated(line: str) -> str:
    """A log line, with Slurm's missing-working-directory line explained (``CHDIR_NOTE``)."""
    return line + CHDIR_NOTE if _CHDIR_LINE.match(line) else line


def tail(path: str, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file and where the whole of it is, or only where it
    is when not visible from here."""
    try:
        with open(gcs_paths.to_local_path(path), errors="replace") as handle:
            last = "\n".join(
                annotated(line.rstrip("\n")) for line in collections.deque(handle, maxlen=lines)
            ).rstrip()
    except OSError:
        return f"(log not readable from this step: {path} on the cluster)"
    return f"{last}\n(the whole log: {path})"


def file_path(pattern: str, job_id: str, job_name: str) -> str:
    """The file Slurm writes for the stdout ``pattern`` of job ``job_id`` named ``job_name``
    (``%j`` and ``%x`` expanded, ``%%`` as ``%``; the step's own patterns use no other)."""
    replacements = {"j": job_id, "x": job_name, "%": "%"}
    return re.sub(r"%([jx%])", lambda found: replacements[found.group(1)], pattern)
