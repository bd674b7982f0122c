"""What one poll of an attempt reads: Vertex, the job's beacon, the job's log.

The supervisor polls an attempt with the shared poller; at each poll it asks a ``Looks`` what to
read. Two kinds, side by side:

* ``EveryPoll``: the backend writes no beacon (or no plan is set): every poll calls Vertex and
  reads the job's new log lines, at the poller's backoff.
* ``Planned``: the backend's jobs write a beacon and a ``poll_plan.PlanSettings`` is set: the
  beacon is read when the plan says so, Vertex is called only when the plan says so, the poll
  interval is the plan's, and the job's log (maybe on Cloud Storage, each read a call) is read on
  a state change and otherwise every ``cap_seconds``.
* ``Pushed``: ``Planned``, and between looks the step waits on a pull of the job's progress
  messages (``progress_feed``) instead of sleeping: a message ends the wait, and its state is
  a fresh look at the beacon. Between two empty pulls it pauses ``gap_seconds`` (a message
  waits in the subscription meanwhile), except soon after the job said its run ends. Once a
  job's messages arrive its plan reads the beacon file rarely (``PlanSettings.pushed``); a
  job Vertex says runs that sent none in two whole pulls cannot publish (its log says why):
  the step stops pulling and polls as ``Planned``.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable

from vsp.components.runtime.core import polling
from vsp.components.runtime.training import poll_plan, progress_feed
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.beacon import Beacon
from vsp.components.runtime.training.recovery import Attempt

log = logging.getLogger(__name__)


class Looks(abc.ABC):
    """What a poll reads; see the module docstring.

    Attributes:
        read_now: Whether the last ``before_call`` read the beacon (else it gave the last copy).
        heartbeat_seconds: Longest time between two beacon writes of a live job (0: none).
        cache_seconds: How stale a beacon read may be (the FUSE cache's time).
    """

    read_now: bool = False
    heartbeat_seconds: float = 0.0
    cache_seconds: float = 0.0

    @abc.abstractmethod
    def before_call(self, attempt: Attempt) -> tuple[Beacon | None, bool]:
        """The beacon as seen at this poll (None: none), and whether to call Vertex now."""

    @abc.abstractmethod
    def after_call(self, attempt: Attempt, beacon: Beacon | None) -> Beacon | None:
        """Records the Vertex call just made (``attempt`` refreshed); the beacon seen now."""

    @abc.abstractmethod
    def log_due(self) -> bool:
        """Whether this poll reads the job's new log lines when nothing changed."""

    def log_read(self) -> None:
        """Records that this poll read the job's log (for whatever reason): ``log_due``
        counts from here. (Nothing to record for looks that read it at every poll.)"""
        return

    @abc.abstractmethod
    def delay_for(self) -> Callable[[Attempt], float] | None:
        """Seconds until the next poll, from the attempt (None: the poller's backoff)."""

    def waiter(self) -> Callable[[float], None] | None:
        """Waits up to the given seconds between polls, less when a message comes (None: the
        poller sleeps)."""
        return None


class EveryPoll(Looks):
    """Every poll calls Vertex and reads the log; no beacon."""

    def before_call(self, attempt: Attempt) -> tuple[Beacon | None, bool]:
        return None, True

    def after_call(self, attempt: Attempt, beacon: Beacon | None) -> Beacon | None:
        return beacon

    def log_due(self) -> bool:
        return True

    def delay_for(self) -> Callable[[Attempt], float] | None:
        return None


class Planned(Looks):
    """Looks that follow a ``poll_plan.PollPlan`` over the job's beacon.

    Args:
        backend: Where the attempt runs (its jobs write beacons).
        settings: The plan's intervals.
        clock: Monotonic time source (the supervisor's).
    """

    def __init__(
        self, backend: TrainingBackend, settings: poll_plan.PlanSettings, clock: polling.Clock
    ):
        self.backend = backend
        self.plan = poll_plan.PollPlan(settings)
        self.clock = clock
        self._log_read_at: float | None = None
        self.heartbeat_seconds = settings.heartbeat_seconds
        self.cache_seconds = settings.cache_seconds

    def before_call(self, attempt: Attempt) -> tuple[Beacon | None, bool]:
        read = self.plan.read_due(self.clock.now())
        self.read_now = read
        beacon = self.backend.beacon(attempt) if read else self.plan.last_beacon
        return beacon, self.plan.look(self.clock.now(), beacon, read=read)

    def after_call(self, attempt: Attempt, beacon: Beacon | None) -> Beacon | None:
        log.debug("job %s: called Vertex (%s)", attempt.job_id, self.plan.reason)
        channel = self.backend.beacon_channel(attempt)
        if channel and self.plan.channel != channel:
            log.warning(
                "job %s keeps its progress beacon in its Slurm comment (it could not write its "
                "beacon folder; its log says why): the step reads it from the Vertex calls it "
                "makes",
                attempt.job_id,
            )
        comment = self.backend.beacon(attempt) if channel else None
        self.plan.called(
            self.clock.now(), attempt.outcome.value, comment, channel, attempt.requeues
        )
        return self.plan.last_beacon

    def log_due(self) -> bool:
        if self._log_read_at is None:
            return True
        return self.clock.now() - self._log_read_at >= self.plan.settings.cap_seconds

    def log_read(self) -> None:
        # A read for a state change counts too: the next one without a change comes a whole
        # cap later (a read just after the first look's cost a call and showed nothing new).
        self._log_read_at = self.clock.now()

    def delay_for(self) -> Callable[[Attempt], float] | None:
        return lambda _: self.plan.next_look()


class Pushed(Planned):
    """``Planned`` looks that wait on the job's progress messages between polls.

    Args:
        backend: Where the attempt runs (its jobs write beacons and publish messages).
        settings: The plan's intervals.
        clock: Monotonic time source (the supervisor's).
        feed: The run's subscription (opened).
    """

    def __init__(
        self,
        backend: TrainingBackend,
        settings: poll_plan.PlanSettings,
        clock: polling.Clock,
        feed: progress_feed.ProgressFeed,
    ):
        super().__init__(backend, settings, clock)
        self.feed = feed
        self.listening = True
        self._job = ""
        self._quiet_pulls = 0  # pulls since Vertex said RUNNING, no message from the job yet
        self._news_at: float | None = None  # when the job's newest message was pulled

    def before_call(self, attempt: Attempt) -> tuple[Beacon | None, bool]:
        self._job = attempt.job_id
        now = self.clock.now()
        self._check_quiet(attempt.job_id)
        pushed = self.feed.latest(attempt.job_id)
        if pushed is not None:
            self.plan.push_on()
        read = self.plan.read_due(now)
        self.read_now = read
        seen = self.plan.last_beacon
        beacon = progress_feed.newest(self.backend.beacon(attempt) if read else seen, pushed)
        return beacon, self.plan.look(now, beacon, read=read)

    def _check_quiet(self, job_id: str) -> None:
        """Stops pulling when a job Vertex said runs sent no message in two whole pulls (its
        ``started`` is sent before it runs anything)."""
        if not self.listening or self.feed.latest(job_id) is not None:
            self._quiet_pulls = 0
            return
        if self._quiet_pulls >= 2:
            self.listening = False
            log.warning(
                "job %s runs but sent no progress message to %s (its log says why): the step "
                "reads its beacon instead",
                job_id,
                self.feed.topic,
            )

    def waiter(self) -> Callable[[float], None] | None:
        return self._wait

    def _soon(self) -> bool:
        """Whether the job said, within ``soon_seconds``, that its run ends: its next message
        (the exit, or the next run's start after a requeue) is due soon."""
        latest = self.feed.latest(self._job)
        return (
            latest is not None
            and latest.state in ("notice", "exiting")
            and self._news_at is not None
            and self.clock.now() - self._news_at < self.feed.settings.soon_seconds
        )

    def _wait(self, seconds: float) -> None:
        """Pulls until a newer state of the job comes or ``seconds`` have passed; a pull is
        never cut short, so the wait may end up to one pull's hold late (the next look's
        Vertex call with it: only slow rules wait on that, each change the job can tell
        comes as a message). Sleeps when not listening, or for a short wait (the plan expects
        Vertex to show a change the job cannot tell, as a requeue after the job's exit).
        Between two empty pulls it pauses ``gap_seconds`` unless the job's next message is
        due soon (``_soon``), and at least ``least_wait_seconds`` after a pull that came back
        empty early, so as not to spin."""
        end = self.clock.now() + seconds
        settings = self.feed.settings
        while True:
            left = end - self.clock.now()
            if left <= 0:
                return
            if not self.listening or left < settings.least_wait_seconds:
                self.clock.sleep(left)
                return
            started = self.clock.now()
            before = self.feed.latest(self._job)
            running = self.plan.vertex_state == poll_plan.RUNNING
            self.feed.pull()
            if self.feed.latest(self._job) != before:
                self._news_at = self.clock.now()
                return
            if running and before is None:
                self._quiet_pulls += 1
            pause = 0.0 if self._soon() else settings.gap_seconds
            if self.clock.now() - started < settings.least_wait_seconds:  # early, empty
                pause = max(pause, settings.least_wait_seconds)
            if pause > 0:
                self.clock.sleep(min(pause, max(0.0, end - self.clock.now())))


def for_backend(
    backend: TrainingBackend,
    settings: poll_plan.PlanSettings | None,
    clock: polling.Clock,
    feed: progress_feed.ProgressFeed | None = None,
) -> Looks:
    """``Pushed`` when ``feed`` is set too, ``Planned`` when ``settings`` is set and the
    backend's jobs write beacons, else ``EveryPoll``."""
    if settings is not None and backend.writes_beacons:
        if feed is not None:
            return Pushed(backend, settings, clock, feed)
        return Planned(backend, settings, clock)
    return EveryPoll()
