"""The step progress file: each rank says which training step it reached, for hang detection.

A trainer calls ``progress.step(N)`` after every training step (the checkpoint library's step
hook); the writes are rate-limited to one per ``VSP_PROGRESS_INTERVAL`` seconds (default 5), the
first step of a process always written. A blocking save is marked as such (``saving()``; the
checkpoint library's ``save`` does it itself), so the supervisor's stall rule
(``training.hang``) never counts a long save, and until a process reports its first step it is
starting up, which is not counted either. One small JSON file per job and rank, under the
checkpoint root (``<root>/progress/<JOB>.<RANK>.json``, never touched by retention)::

    {"job": "123", "restart": 0, "rank": 0, "host": "node-1", "pid": 4242, "step": 120,
     "phase": "step", "time": 1767225615.2, "step_seconds": 0.05, "beat": 1767225619.4}

``time`` is the trainer's clock at the last step or phase write (the step compares it only with
other ``time`` values), ``step_seconds`` the trainer's smoothed time per step, saves left out,
``phase`` ``step``, ``saving`` or ``finishing`` (after the final checkpoint: writing the model,
evaluating, tearing the process group down and exiting, which the stall rule bounds like a
save; the checkpoint library's ``save(reason="final")`` marks it), and ``beat`` the time of the
file's last rewrite: a small thread rewrites it every interval (first the newest step when one
is not written yet, else only ``beat``), so a process that is alive but blocked (in a collective
waiting for a frozen peer) is told apart from one that stopped altogether (SIGSTOP, a dead
node). ``host`` is
``SLURMD_NODENAME`` under Slurm, else the host name. Outside a Slurm job (no ``SLURM_JOB_ID``)
or without ``VSP_CHECKPOINT_DIR`` nothing is written. Standard library only: the steps read it.
Hand-rolled: one small file rewritten atomically (temp file and rename), which GCS FUSE uploads
on close.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from vsp.components.runtime.core import file_primitives, gcs_paths
from vsp.components.runtime.trainer import contract

FOLDER = "progress"
INTERVAL_ENV = "VSP_PROGRESS_INTERVAL"
DEFAULT_INTERVAL_SECONDS = 5.0
PHASES = ("step", "saving", "finishing")
SMOOTHING = 0.2
MAX_BYTES = 4096


@dataclasses.dataclass(frozen=True)
class Progress:
    """One rank's progress as last written (see the module docstring for the fields)."""

    job: str
    restart: int
    rank: int
    host: str
    pid: int
    step: int
    phase: str
    time: float
    step_seconds: float
    beat: float = 0.0
    heartbeat: bool = False

    @classmethod
    def parse(cls, text: str) -> Progress | None:
        """The record in ``text``; None when it is not one (torn, foreign)."""
        try:
            raw = json.loads(text)
            found = cls(
                job=str(raw["job"]),
                restart=int(raw["restart"]),
                rank=int(raw["rank"]),
                host=str(raw.get("host", "")),
                pid=int(raw.get("pid", 0)),
                step=int(raw["step"]),
                phase=str(raw["phase"]),
                time=float(raw["time"]),
                step_seconds=max(0.0, float(raw.get("step_seconds", 0.0))),
                beat=float(raw.get("beat", raw["time"])),
                heartbeat="beat" in raw,
            )
        except (ValueError, TypeError, KeyError, AttributeError):
            return None
        return found if found.phase in PHASES else None


def folder(checkpoint_dir: file_primitives.PathLike) -> Path:
    """Where the progress files of the checkpoint root ``checkpoint_dir`` live."""
    return gcs_paths.to_local_path(checkpoint_dir) / FOLDER


def read_job(checkpoint_dir: file_primitives.PathLike, job: str) -> list[Progress]:
    """Every rank's readable progress of Slurm job ``job``, by rank ([] when none is seen)."""
    found = []
    try:
        paths = sorted(folder(checkpoint_dir).glob(f"{job}.*.json"))
    except OSError:
        return []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                record = Progress.parse(handle.read(MAX_BYTES))
        except OSError:
            continue
        if record is not None and record.job == job:
            found.append(record)
    return sorted(found, key=lambda r: r.rank)


class Reporter:
    """Writes one rank's progress file (see the module docstring).

    Args:
        checkpoint_dir: The checkpoint root.
        job: The Slurm job id.
        restart: ``SLURM_RESTART_COUNT`` (0 on the job's first run).
        rank: ``SLURM_PROCID`` (0 for a single process).
        interval: Least seconds between two writes of the same phase.
        clock: Epoch-seconds source.
    """

    def __init__(
        self,
        checkpoint_dir: file_primitives.PathLike,
        job: str,
        restart: int = 0,
        rank: int = 0,
        interval: float = DEFAULT_INTERVAL_SECONDS,
        clock: Callable[[], float] = time.time,
        host: str = "",
        heartbeat: bool = False,
    ):
        self.path = folder(checkpoint_dir) / f"{job}.{rank}.json"
        self.fields = {"job": job, "restart": restart, "rank": rank}
        self.fields.update(host=host or socket.gethostname(), pid=os.getpid())
        self.interval, self.clock = interval, clock
        self.last_step: int | None = None
        self.step_seconds = 0.0
        self._step_time: float | None = None
        self._written: float | None = None
        self._saving = 0
        self._finishing = False
        self._phase = "step"
        self._time = 0.0
        self._written_step: int | None = None
        self._lock = threading.Lock()
        self._heartbeat = heartbeat and interval > 0
        self._thread: threading.Thread | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> Reporter | None:
        """The reporter of this process in a Slurm job; None outside one or without a root."""
        env = os.environ if environ is None else environ
        root, job = env.get(contract.CHECKPOINT_DIR_ENV, ""), env.get("SLURM_JOB_ID", "")
        if not root or not job:
            return None

        def number(name: str, default: float) -> float:
            try:
                return float(env.get(name, "") or default)
            except ValueError:
                return default

        return cls(
            root,
            job,
            restart=int(number("SLURM_RESTART_COUNT", 0)),
            rank=int(number("SLURM_PROCID", 0)),
            interval=max(0.0, number(INTERVAL_ENV, DEFAULT_INTERVAL_SECONDS)),
            host=env.get("SLURMD_NODENAME", ""),
            heartbeat=True,
        )

    def _write(self, phase: str | None) -> None:
        """Writes the file: a step or phase change, or (``phase`` None) only a new ``beat``."""
        with self._lock:
            now = self.clock()
            if phase is not None:
                self._written, self._phase, self._time = now, phase, now
                self._written_step = self.last_step
            body = {**self.fields, "step": self._written_step or 0, "phase": self._phase}
            body.update(time=round(self._time, 3), beat=round(now, 3))
            body["step_seconds"] = round(self.step_seconds, 6)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            file_primitives.write_file_atomic(self.path, json.dumps(body, sort_keys=True).encode())

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self.interval):
            try:
                pending = self._phase == "step" and self.last_step != self._written_step
                self._write("step" if pending else None)
            except OSError:
                continue

    def _start_heartbeat(self) -> None:
        if self._heartbeat and self._thread is None:
            self._thread = threading.Thread(
                target=self._beat, args=(threading.Event(),), name="vsp-progress", daemon=True
            )
            self._thread.start()

    def step(self, step: int) -> None:
        """Records that training step ``step`` finished; writes when the interval has passed."""
        now = self.clock()
        if self._step_time is not None and self.last_step is not None and step > self.last_step:
            took = (now - self._step_time) / (step - self.last_step)
            smoothed = self.step_seconds + SMOOTHING * (took - self.step_seconds)
            self.step_seconds = took if not self.step_seconds else smoothed
        first = self.last_step is None
        self._finishing = False  # training went on after a final save
        self.last_step, self._step_time = step, now
        if first or self._written is None or now - self._written >= self.interval:
            self._write("step")
        if first:
            self._start_heartbeat()

    @contextlib.contextmanager
    def saving(self) -> Iterator[None]:
        """Marks a blocking save: written at once, and the save's time is not a step's."""
        self._saving += 1
        try:
            if self._saving == 1 and self.last_step is not None:
                self._write("saving")
            yield
        finally:
            self._saving -= 1
            if self._saving == 0 and self.last_step is not None:
                self._step_time = self.clock()
                self._write("finishing" if self._finishing else "step")

    def finishing(self) -> None:
        """Marks the end of training (the final checkpoint is saved): written at once."""
        self._finishing = True
        if self._saving == 0 and self.last_step is not None:
            self._write("finishing")


_active: list[Reporter | None] = []


def reporter() -> Reporter | None:
    """This process's reporter, made from its environment on first use (None: none)."""
    if not _active:
        _active.append(Reporter.from_environment())
    return _active[0]


def step(number: int) -> None:
    """The step hook: call after each training step with the number of steps done."""
    found = reporter()
    if found is not None:
        found.step(number)


def finishing() -> None:
    """Marks the end of training in this process's progress file (no-op without a reporter)."""
    found = reporter()
    if found is not None:
        found.finishing()


_save_began = threading.local()  # per thread: time.monotonic() when its outermost saving() began


@contextlib.contextmanager
def saving() -> Iterator[None]:
    """Marks a blocking save: in this process's progress file (when it has a reporter), and for
    the checkpoint history, whose save then starts when the outermost ``saving()`` of the
    thread began (``seconds_in_save``), not when ``checkpoint.save`` is called."""
    outermost = getattr(_save_began, "at", None) is None
    if outermost:
        _save_began.at = time.monotonic()
    try:
        found = reporter()
        if found is None:
            yield
        else:
            with found.saving():
                yield
    finally:
        if outermost:
            _save_began.at = None


def seconds_in_save() -> float:
    """Seconds since this thread's outermost ``saving()`` began (0 outside one)."""
    began = getattr(_save_began, "at", None)
    return 0.0 if began is None else time.monotonic() - began
