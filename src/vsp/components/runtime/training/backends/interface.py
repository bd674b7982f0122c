"""What the supervisor drives and what it returns: the ``TrainingBackend`` interface, ``RunResult``.

A backend runs attempts (Slurm jobs on a cluster, Vertex CustomJobs); the supervisor
(``supervisor.TrainingSupervisor``) submits, refreshes and cancels them through it, and
``RunResult`` is what the metrics, the report and the step's outputs read.
"""

from __future__ import annotations

import abc
import dataclasses

from vsp.components.runtime.trainer.progress import Progress
from vsp.components.runtime.training.beacon import Beacon
from vsp.components.runtime.training.recovery import Attempt, Target


class TrainingBackend(abc.ABC):
    """Where attempts run. Implementations: Slurm jobs on a cluster, Vertex CustomJobs."""

    resource_type: str = ""
    # What the service does with a preempted job, for the step's log: Slurm requeues it,
    # Vertex AI restarts a CustomJob's replica in place.
    preempted_then: str = "requeued"
    time_resolution: float = 0.0  # seconds of precision of run_started_at / ended_at

    @abc.abstractmethod
    def find(self, run_key: str) -> list[Attempt]:
        """Attempts already submitted for ``run_key``, oldest first (state not yet refreshed)."""

    @abc.abstractmethod
    def submit(self, run_key: str, index: int, target: Target) -> Attempt:
        """Submits attempt number ``index`` of the run on ``target``; returns it."""

    @abc.abstractmethod
    def refresh(self, attempt: Attempt) -> None:
        """Updates ``attempt`` in place from the backend (outcome, requeues, times, detail)."""

    @abc.abstractmethod
    def cancel(self, attempt: Attempt) -> None:
        """Cancels the attempt; an attempt already finished is fine."""

    @abc.abstractmethod
    def uri(self, attempt: Attempt) -> str:
        """URL of the attempt's resource for ``gcp_resources``."""

    def log_tail(self, attempt: Attempt) -> str:
        """The last lines of the attempt's log, for error messages ('' when unknown)."""
        return ""

    def limit_requests(self, seconds: float) -> None:
        """Bounds every later request, retries included, to ``seconds`` from now (a cancel's
        cleanup must end, even when the service does not answer)."""
        return None  # a backend without requests has nothing to bound

    def new_log_lines(self, attempt: Attempt) -> list[str]:
        """Log lines of the attempt written since the last call, shown while polling."""
        return []

    def beacon(self, attempt: Attempt) -> Beacon | None:
        """The attempt's progress beacon as the step sees it (None: none visible)."""
        return None

    def beacon_channel(self, attempt: Attempt) -> str:
        """Where the attempt keeps its beacon: ``comment`` when its last refresh showed it in
        the job's comment, else '' (the beacon file, or none)."""
        return ""

    def progress(self, attempt: Attempt) -> list[Progress]:
        """Every rank's step progress of the attempt's current run ([] when none is seen)."""
        return []

    @property
    def writes_beacons(self) -> bool:
        """Whether attempts write a beacon, so polls can follow ``poll_plan``."""
        return False

    def api_calls(self) -> int | None:
        """Vertex API requests this backend sent so far (None: not counted)."""
        return None

    def storage_calls(self) -> int:
        """Cloud Storage reads this backend made while watching attempts (``storage_reads``)."""
        return 0


@dataclasses.dataclass
class RunResult:
    """The outcome of a run with all its attempts.

    Attributes:
        attempts: Every attempt, oldest first.
        seconds: Wall seconds this step spent.
        reattached: Whether the step found attempts submitted by an earlier try of the step.
        events: Timeline seen by this step: ``{"time": epoch s, "job_id", "event"}`` with
            events submitted, running, requeued, and the final outcome of each attempt.
        vertex_calls: Vertex API calls the step made for the run (requests sent, or state
            refreshes when the backend does not count requests).
        storage_calls: Cloud Storage reads the step made while watching the run (beacon,
            progress, log), those the modelled FUSE cache served not included.
        observations: What the step knew of each attempt whenever it changed (the
            supervisor's ``_observe``), for detection times.
        pubsub_calls: Pub/Sub calls for the job's progress messages (``progress_feed``:
            subscription, pulls, acknowledgements).
    """

    attempts: list[Attempt]
    seconds: float
    reattached: bool = False
    events: list[dict] = dataclasses.field(default_factory=list)
    vertex_calls: int = 0
    storage_calls: int = 0
    observations: list[dict] = dataclasses.field(default_factory=list)
    pubsub_calls: int = 0

    @property
    def preemptions(self) -> int:
        return sum(a.preemptions for a in self.attempts)

    @property
    def resubmissions(self) -> int:
        return max(0, len(self.attempts) - 1)

    @property
    def job_ids(self) -> list[str]:
        return [a.job_id for a in self.attempts]
