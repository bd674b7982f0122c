"""Recovery strategies: what to do after a training attempt ends, for every backend alike.

A training run is a sequence of attempts (Slurm jobs, or Vertex CustomJobs). Each attempt ends
in one of the ``Outcome`` values; a preemption (the VM was taken back, the job was requeued or
failed with a stockout) is told apart from a user failure (the trainer exited non-zero):

* a preemption is **recovered**: the run is resubmitted with the same checkpoint directory, as
  long as the preemption budget lasts, and moves to the fallback target (on-demand partition or
  STANDARD scheduling) after ``fallback_after`` preemptions;
* a user failure gets **bounded restarts** (``max_user_failures``, 0 by default), then fails the
  step with the job's exit code;
* Spot capacity that does not come within ``capacity_wait_seconds`` moves the run to the
  fallback target, or fails it when there is none.

Strategies are small classes so a backend or a user can plug another policy in.
"""

from __future__ import annotations

import abc
import dataclasses

from vsp.components.runtime.core.outcome import Outcome


@dataclasses.dataclass(frozen=True)
class Target:
    """Where an attempt runs.

    Attributes:
        name: Backend-specific place: a Slurm partition, or a CustomJob scheduling strategy.
        spot: Whether capacity there can be preempted.
    """

    name: str
    spot: bool


@dataclasses.dataclass
class Attempt:
    """One submitted attempt and what became of it.

    Attributes:
        job_id: Backend id of the job.
        target: Where it ran.
        outcome: Its current or final outcome.
        requeues: Preemptions the backend recovered in place (Slurm requeue, Vertex restarts).
        submitted_at: Epoch seconds of submission.
        started_at: Epoch seconds the job first ran (None if it never ran).
        ended_at: Epoch seconds it ended (None while it runs).
        exit_code: Exit code of the payload, when known.
        detail: Backend's state text for logs and reports.
        nodes: Number of nodes (or replicas) it held while running.
        switched_because: Why the supervisor cancelled it to move on (``switch_now``'s
            reason); '' when it was not switched away from.
        begin_time_hold: Pending only until its begin time: Slurm holds a requeued job for
            ``cred_expire`` (about 121 s) whatever the capacity, so that wait is not counted
            against ``capacity_wait_seconds``.
        run_started_at: Epoch seconds its latest run started (Slurm's start time, reset by a
            requeue); None when unknown or not running.
        requeued_at: Epoch seconds its latest requeue ended the run before (Slurm's submit
            time, which a requeue resets to that moment, whole seconds); None when never
            requeued or unknown.
        hung_because: Why the supervisor cancelled it as hung (``hang.Stall``); '' when not.
        hang_saved_seconds: When cancelled as hung, the seconds the job would still have run
            until the step's timeout (0 when there is none).
    """

    job_id: str
    target: Target
    outcome: Outcome = Outcome.PENDING
    requeues: int = 0
    submitted_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    detail: str = ""
    nodes: int = 1
    switched_because: str = ""
    begin_time_hold: bool = False
    run_started_at: float | None = None
    requeued_at: float | None = None
    hung_because: str = ""
    hang_saved_seconds: float = 0.0

    @property
    def preemptions(self) -> int:
        """Preemptions this attempt suffered: in-place requeues plus its own end."""
        return self.requeues + (1 if self.outcome is Outcome.PREEMPTED else 0)


@dataclasses.dataclass(frozen=True)
class Decision:
    """What to do next: resubmit on ``target``, or stop with ``reason``."""

    target: Target | None
    reason: str

    @property
    def resubmit(self) -> bool:
        return self.target is not None


class RecoveryStrategy(abc.ABC):
    """Chooses the first target and what follows each ended attempt."""

    @abc.abstractmethod
    def first_target(self) -> Target:
        """Where the first attempt goes."""

    @abc.abstractmethod
    def after(self, attempts: list[Attempt]) -> Decision:
        """Decides after the last attempt in ``attempts`` ended (not SUCCEEDED)."""

    @abc.abstractmethod
    def switch_now(self, attempts: list[Attempt], pending_seconds: float) -> str:
        """A reason to stop the running attempt and move on at once, or '' to keep waiting.

        Called while the last attempt is in flight: e.g. it has been requeued K times on Spot,
        or has waited for Spot capacity longer than the deadline.
        """


@dataclasses.dataclass
class SpotRecovery(RecoveryStrategy):
    """Resume on Spot after preemptions; optionally fall back to a non-preemptible target.

    Attributes:
        primary: The Spot target.
        fallback: The on-demand / reserved / STANDARD target, or None for no fallback.
        max_preemptions: Preemptions survived in total before the run fails.
        max_user_failures: Restarts allowed after the trainer itself failed.
        fallback_after: Move to ``fallback`` after this many preemptions (0: never).
        capacity_wait_seconds: Longest wait for Spot capacity before moving to ``fallback``
            (or failing without one); 0 waits as long as the step's timeout.
        max_hangs: Hung attempts cancelled and resubmitted before the run fails; a hang is
            neither a preemption nor a user failure and has this budget of its own.
    """

    primary: Target
    fallback: Target | None = None
    max_preemptions: int = 10
    max_user_failures: int = 0
    fallback_after: int = 0
    capacity_wait_seconds: float = 0.0
    max_hangs: int = 1

    def first_target(self) -> Target:
        return self.primary

    def _preemptions(self, attempts: list[Attempt]) -> int:
        return sum(a.preemptions for a in attempts)

    def _target_after_preemption(self, attempts: list[Attempt]) -> Target:
        use_fallback = self.fallback is not None and (
            attempts[-1].target == self.fallback
            or (self.fallback_after and self._preemptions(attempts) >= self.fallback_after)
        )
        return self.fallback if use_fallback else self.primary

    def after(self, attempts: list[Attempt]) -> Decision:
        last = attempts[-1]
        preemptions = self._preemptions(attempts)
        if last.outcome is Outcome.PREEMPTED:
            if preemptions > self.max_preemptions:
                return Decision(
                    None,
                    f"preemption budget exhausted: {preemptions} preemptions, budget "
                    f"{self.max_preemptions}. Raise max_preemptions or set a fallback target.",
                )
            target = self._target_after_preemption(attempts)
            return Decision(target, f"preempted ({preemptions} so far): resume on {target.name}")
        if last.outcome is Outcome.USER_FAILURE:
            failures = sum(1 for a in attempts if a.outcome is Outcome.USER_FAILURE)
            if failures > self.max_user_failures:
                return Decision(
                    None,
                    f"the trainer failed (exit code {last.exit_code}, {last.detail}); "
                    f"{failures} failure(s), restart budget {self.max_user_failures}. Fix: the "
                    "trainer's error is in its log (its last lines below); to restart a trainer "
                    "that fails now and then, raise max_user_failures.",
                )
            return Decision(
                last.target,
                f"trainer failed: restart {failures} of "
                f"{self.max_user_failures} on {last.target.name}",
            )
        if last.outcome is Outcome.CANCELLED and last.hung_because:
            hangs = sum(1 for a in attempts if a.hung_because)
            if hangs > self.max_hangs:
                return Decision(
                    None,
                    f"{last.hung_because}; {hangs} hang(s), budget max_hangs={self.max_hangs}. "
                    "Fix: find where the trainer blocks (the log's tail below, a stack dump "
                    "with py-spy), or raise hang_floor_seconds if its steps are that slow.",
                )
            return Decision(
                last.target,
                f"{last.hung_because}: cancelled; resume {hangs} of {self.max_hangs} on "
                f"{last.target.name}",
            )
        if last.outcome is Outcome.CANCELLED and last.switched_because:
            if preemptions > self.max_preemptions:  # requeued past the budget: no fallback
                return Decision(None, last.switched_because)
            return Decision(self.fallback, last.switched_because)
        return Decision(None, f"attempt {last.job_id} ended {last.outcome.value}: {last.detail}")

    def switch_now(self, attempts: list[Attempt], pending_seconds: float) -> str:
        last = attempts[-1]
        preemptions = self._preemptions(attempts)
        if preemptions > self.max_preemptions:  # requeued in place: the job never ends
            return (
                f"preemption budget exhausted: {preemptions} preemptions (job {last.job_id} "
                f"requeued {last.requeues} time(s)), budget {self.max_preemptions}: cancelling "
                "it. Raise max_preemptions or set a fallback target."
            )
        if self.fallback is not None and last.target == self.fallback:
            return ""
        if self.fallback is not None and self.fallback_after and preemptions >= self.fallback_after:
            return (
                f"{preemptions} preemptions reached fallback_after={self.fallback_after}: "
                f"moving to {self.fallback.name}"
            )
        if (
            self.capacity_wait_seconds
            and last.target.spot
            and last.outcome is Outcome.PENDING
            and pending_seconds > self.capacity_wait_seconds
        ):
            where = f"moving to {self.fallback.name}" if self.fallback else "no fallback target"
            return (
                f"no Spot capacity after {pending_seconds:.0f} s (capacity_wait_seconds="
                f"{self.capacity_wait_seconds:.0f}): {where}"
            )
        return ""
