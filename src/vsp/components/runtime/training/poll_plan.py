"""The poll plan: when a training step calls Vertex, given what the job's beacon shows.

Polling the Slurm job through Vertex (``callSlurmRestApi``) every 20 s costs about 180 calls per
job-hour. The job's progress beacon (``training.beacon``) lives on Cloud Storage, and each read
of it that reaches Cloud Storage is a call too (``storage_reads``): the step's mount keeps a read
for ``cache_seconds`` (Cloud Storage FUSE's stat cache, 60 s by default), so a read within that
time is free but stale, and reading more often buys nothing. The beacon is therefore read every
``max(beacon_seconds, cache_seconds)`` (100 s by default: 36 reads per job-hour); Vertex is called:

1. at the first look (the baseline);
2. when the beacon shows a state change (a new state or a new run after a requeue);
3. every ``fallback_seconds`` while the beacon is lost, as a fixed poller would: Vertex said
   RUNNING but the beacon has not changed for ``stale_seconds`` (the node died without a
   notice, or the beacon is not visible from the step), until the beacon moves again; the
   beacon is then read only every ``cap_seconds`` (each read of a lost beacon is a call);
   also while no beacon was seen yet in a running job, as the job may keep it in its comment;
4. every ``expect_seconds`` while Vertex and the beacon disagree: the beacon shows a run that
   started (``started``/``running``) after Vertex said PENDING, or it says the run Vertex sees
   is ending (``notice``/``exiting``) but Vertex still said RUNNING;
5. every ``pending_seconds`` while Vertex says PENDING, unless the beacon moved within
   ``stale_seconds`` (then the next run's ``started`` shows the start, rule 2, as after a
   requeue); so a start the beacon cannot show, as when it is not visible from here, is seen
   within that time;
6. otherwise every ``cap_seconds``, for what no beacon shows (a job cancelled by someone else,
   a hold).

When the job keeps its beacon in its Slurm comment (``channel="comment"``: it could not write
the beacon folder), every Vertex call returns the beacon with the job's state, no Cloud Storage
read is made, and Vertex is called every ``fallback_seconds`` besides rules 1, 4 and 5.

Per job-hour with the defaults: 36 beacon reads, a call every ``cap_seconds`` (3) and a few per
preemption (the notice, the end of the notice, the next run's start), so about 45 calls;
through the comment 36 plus the preemptions' (the requeue's pending time). The hang rule's
progress reads and the job's log add a few (``supervisor``). A change nothing announces (a
preemption, the job's end) is seen within one look interval, so the p95 detection time is near
``0.95 x 100 s``: a look every 30 s would bring it to 30 s but cost 120 calls per job-hour.

With progress messages (``progress_feed``: the job publishes its changes to Pub/Sub and the
step waits on a pull between looks) each change the job can tell is seen in seconds; the plan
then switches to ``PlanSettings.pushed`` (``push_on``): the beacon file is read, and Vertex
called for the cap, every ``push_read_seconds`` only (1800 s), and after a notice Vertex is not
asked until the exit message came (or ``fallback_seconds`` passed), nor after the exit of a
noticed run until the next run's ``started`` came (or ``restart_seconds`` passed), nor within
``expect_seconds`` of any other exit message, while the job's batch script ends.

Pure: time is passed in (monotonic seconds of an injectable ``polling.Clock``), the plan reads
nothing and calls nothing, so the runtime and the benchmark (``benchmarks/polling/run.py``) run the
same code (``shared_plan`` merges the plans of many jobs on one cluster). Hand-rolled: a small
state machine of this project's own rules.
"""

from __future__ import annotations

import dataclasses

from vsp.components.runtime.training import storage_reads
from vsp.components.runtime.training.beacon import Beacon

PENDING, RUNNING = "PENDING", "RUNNING"
BEACON, COMMENT = "beacon", "comment"  # where the job keeps its beacon


@dataclasses.dataclass(frozen=True)
class PlanSettings:
    """The plan's intervals, seconds.

    Attributes:
        beacon_seconds: Between two looks at the beacon (a Cloud Storage read; at least
            ``cache_seconds`` apart, as reads within the cache's time are stale copies).
        cap_seconds: Longest time between two Vertex calls when nothing is expected.
        expect_seconds: Between Vertex calls while Vertex and the beacon disagree.
        stale_seconds: A beacon unchanged this long while Vertex says RUNNING is lost (keep it
            above the job's heartbeat, ``VSP_BEACON_HEARTBEAT``, plus Cloud Storage delays).
        fallback_seconds: Between Vertex calls while the beacon is lost.
        pending_seconds: Between Vertex calls while the job is PENDING.
        cache_seconds: How long the step's Cloud Storage FUSE mount serves a read from its
            cache (``storage_reads.FUSE_TTL_SECONDS``, gcsfuse's default ``ttl-secs``).
        restart_seconds: With progress messages, how long after a preempted run's exit the
            next run's ``started`` is waited for before Vertex is asked (Slurm holds a requeued
            job 2 minutes before it may start again).
        push_read_seconds: Between two reads of the beacon file, and longest time between two
            Vertex calls, once the job's progress messages arrive (``progress_feed``; see
            ``pushed``).
    """

    beacon_seconds: float = 100.0
    cap_seconds: float = 1200.0
    expect_seconds: float = 10.0
    stale_seconds: float = 250.0
    fallback_seconds: float = 100.0
    pending_seconds: float = 60.0
    cache_seconds: float = storage_reads.FUSE_TTL_SECONDS
    restart_seconds: float = 180.0
    push_read_seconds: float = 1800.0

    @classmethod
    def for_poll_seconds(
        cls, poll_seconds: float, cache_seconds: float = storage_reads.FUSE_TTL_SECONDS
    ) -> PlanSettings:
        """Settings scaled from a component's ``poll_seconds`` (the fixed poller's interval):
        20 s gives the defaults (look 100 s, expect 10 s, pending 60 s, stale 250 s, cap 1200 s,
        restart 180 s, read with messages 1800 s).

        Args:
            poll_seconds: The component's poll interval, seconds.
            cache_seconds: The step's FUSE cache time (a fact of the mount, not scaled).
        """
        p = float(poll_seconds)
        look = max(5 * p, float(cache_seconds))
        return cls(
            beacon_seconds=look,
            cap_seconds=max(60 * p, look),
            expect_seconds=p / 2,
            stale_seconds=2.5 * look,
            fallback_seconds=look,
            pending_seconds=3 * p,
            cache_seconds=float(cache_seconds),
            restart_seconds=9 * p,
            push_read_seconds=max(90 * p, look),
        )

    def pushed(self) -> PlanSettings:
        """The settings once the job's progress messages arrive (``progress_feed``).

        Each change the job itself can tell (its start, a notice, its end) then comes as a
        message the step waits on, so the beacon file is only read every ``push_read_seconds``
        (for a node lost without notice), it is lost after that plus ``stale_seconds``
        unchanged, and the cap (the Vertex call for what no message tells, with the job's log)
        is at least as long. (``PollPlan`` also waits up to ``fallback_seconds`` after a
        notice for the job's exit message, and up to ``restart_seconds`` after a preempted
        run's exit for the next run's start, before it asks Vertex.)
        """
        read = max(self.push_read_seconds, self.read_seconds)
        return dataclasses.replace(
            self,
            beacon_seconds=read,
            stale_seconds=read + self.stale_seconds,
            cap_seconds=max(self.cap_seconds, read),
        )

    @property
    def read_seconds(self) -> float:
        """Between two reads of the beacon file: never within the cache's time."""
        return max(self.beacon_seconds, self.cache_seconds)

    @property
    def heartbeat_seconds(self) -> float:
        """The heartbeat the job is asked for: half the stale time, so one late write of the
        beacon is not taken for a lost job."""
        return self.stale_seconds / 2

    def problems(self) -> list[str]:
        """What is wrong with the settings, as fix-it sentences ([] = fine)."""
        found = []
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name == "cache_seconds" and value == 0:
                continue  # no cache
            if not value > 0:
                found.append(f"{field.name}={value!r} must be a positive number of seconds")
        if not found and self.stale_seconds <= self.read_seconds:
            found.append(
                f"stale_seconds={self.stale_seconds:g} must exceed the read interval "
                f"{self.read_seconds:g} (beacon_seconds, at least cache_seconds): a beacon "
                "cannot be called lost before it is re-read"
            )
        if not found and self.cap_seconds < self.fallback_seconds:
            found.append(
                f"cap_seconds={self.cap_seconds:g} is below fallback_seconds="
                f"{self.fallback_seconds:g}: the cap is the longest gap, raise it"
            )
        return found


class PollPlan:
    """The plan of one job; see the module docstring.

    Args:
        settings: Intervals (checked: ``ValueError`` naming the wrong one).
    """

    def __init__(self, settings: PlanSettings = PlanSettings()):
        problems = settings.problems()
        if problems:
            raise ValueError("poll plan settings: " + "; ".join(problems))
        self.settings = settings
        self.vertex_state: str | None = None
        self.calls = 0
        self.reason = ""
        self._last_call: float | None = None
        self._running_since: float | None = None
        self._called_key: tuple | None = None
        self._seen: Beacon | None = None
        self._seen_key: tuple | None = None
        self._changed_at: float | None = None
        self.beacon_ever_seen = False
        self.beacon_missing = False
        self.channel = BEACON
        self._last_read: float | None = None
        self._pending_key: tuple | None = None
        self._vertex_restart: int | None = None
        self.pushed = False
        self.waiting = False  # for the job's next message (``pushed`` only; ``look``)
        self._waiting_until: float | None = None
        self._noticed: tuple[str, int] | None = None  # (job, run) of the last notice seen
        self._looked_at: float | None = None

    def push_on(self) -> None:
        """Switches to ``PlanSettings.pushed``: the job's progress messages arrive."""
        if not self.pushed:
            self.pushed = True
            self.settings = self.settings.pushed()

    @property
    def last_beacon(self) -> Beacon | None:
        """The last beacon seen (None: none yet)."""
        return self._seen

    def read_due(self, now: float) -> bool:
        """Whether the beacon file should be read at ``now`` (the caller passes the last beacon
        seen to ``look`` otherwise): never in the comment channel, at most once per read
        interval, and only every ``cap_seconds`` while the beacon is lost (Vertex is called
        at the fallback interval then, and each read of a lost beacon is a call too)."""
        if self.channel == COMMENT:
            return False
        every = self.settings.read_seconds
        if self.beacon_missing:  # Vertex is called at the fallback interval meanwhile
            every = self.settings.cap_seconds
        return self._last_read is None or now - self._last_read >= every

    def look(self, now: float, beacon: Beacon | None, *, read: bool = True) -> bool:
        """Records a look at the beacon at ``now``; True when Vertex should be called now.

        Args:
            now: Monotonic seconds.
            beacon: The beacon as seen (read now, or the last one seen).
            read: Whether the beacon file was read now (False: ``beacon`` is the last seen).

        ``reason`` then says why (for the step's log).
        """
        self._looked_at = now
        if read and self.channel != COMMENT:
            self._last_read = now
        self._see(now, beacon)
        if self.channel != COMMENT and self.beacon_lost(now):
            self.beacon_missing = True
        self.reason = self._why(now, beacon)
        return bool(self.reason)

    def _see(self, now: float, beacon: Beacon | None) -> None:
        if beacon is not None and beacon != self._seen:
            self._seen, self._changed_at = beacon, now
            self.beacon_ever_seen, self.beacon_missing = True, False
            if beacon.state == "notice":
                self._noticed = (beacon.job, beacon.restart)

    def _why(self, now: float, beacon: Beacon | None) -> str:
        s = self.settings
        if self._last_call is None:
            return "first look"
        since_call = now - self._last_call
        if self.channel == COMMENT:
            if self._disagrees(beacon) and since_call >= s.expect_seconds:
                return f"the job's comment says {beacon.state}, Vertex said {self.vertex_state}"
            if self.vertex_state == PENDING and since_call >= s.pending_seconds:
                return "pending"
            if since_call >= s.fallback_seconds:
                return "look at the job's comment"
            return ""
        waiting = self._wait_for_message(now, beacon)
        if beacon is not None and beacon.key != self._called_key and not self._agrees(beacon):
            if not waiting:
                return f"beacon: {beacon.state} (run {beacon.restart})"
        if self.beacon_missing or (not self.beacon_ever_seen and self.vertex_state == RUNNING):
            if since_call >= s.fallback_seconds:
                return "beacon lost: polling at the fallback interval"
            return ""
        if self._disagrees(beacon) and since_call >= s.expect_seconds and not waiting:
            return f"beacon says {beacon.state}, Vertex said {self.vertex_state}"
        if self.vertex_state == PENDING and since_call >= s.pending_seconds:
            # A beacon that moves shows the next start itself; one still for stale_seconds
            # (a long wait for capacity, a beacon lost) does not.
            if self._changed_at is None or now - self._changed_at >= s.stale_seconds:
                return "pending"
        if since_call >= s.cap_seconds:
            return "cap reached"
        return ""

    def _wait_for_message(self, now: float, beacon: Beacon | None) -> bool:
        """Whether Vertex need not be asked yet as the job's next message is due: with
        messages, after a notice the job's exit message (it tells more than Vertex can while
        the job runs out its notice), up to ``fallback_seconds``; after the exit of a noticed
        run with a code other than 0 (a preemption, not the end) the next run's ``started``
        (Vertex would only show the requeue in between), up to ``restart_seconds``; after any
        other exit, ``expect_seconds``, for Vertex to show the end (the job sends its exit
        message before its batch script ends). Sets ``waiting`` and ``_waiting_until``."""
        self._waiting_until = None
        s = self.settings
        if self.pushed and beacon is not None and self._changed_at is not None:
            preempted = (
                beacon.state == "exiting"
                and beacon.rc != 0
                and self._noticed == (beacon.job, beacon.restart)
            )
            if beacon.state == "notice":
                until = self._changed_at + s.fallback_seconds
            elif preempted:
                until = self._changed_at + s.restart_seconds
            elif beacon.state == "exiting" and beacon.key != self._called_key:
                until = self._changed_at + s.expect_seconds  # its batch script is exiting
            else:
                until = now
            if now < until:
                self._waiting_until = until
        self.waiting = self._waiting_until is not None
        return self.waiting

    def _agrees(self, beacon: Beacon) -> bool:
        """Whether a new beacon only confirms what Vertex said: the run Vertex saw RUNNING is
        running (no call needed; unknown when the caller gave no restart count)."""
        return (
            self.vertex_state == RUNNING
            and beacon.state in ("started", "running")
            and beacon.restart == self._vertex_restart
        )

    def _disagrees(self, beacon: Beacon | None) -> bool:
        """Whether the beacon says the job ends but Vertex said RUNNING, or (beacon file) it
        shows a run that started after Vertex said PENDING."""
        if beacon is None or self.vertex_state is None:
            return False
        if beacon.live and beacon.state != "notice":
            if self.channel == COMMENT:
                return False  # read with the state: an older run's word
            return self.vertex_state == PENDING and beacon.key != self._pending_key
        if self._vertex_restart is not None and beacon.restart < self._vertex_restart:
            return False  # an earlier run's end: the run Vertex sees started after it
        return self.vertex_state == RUNNING  # notice or exiting: the end is near

    def beacon_lost(self, now: float) -> bool:
        """Whether Vertex says RUNNING but the beacon has not moved for ``stale_seconds``."""
        if self.vertex_state != RUNNING or self._running_since is None:
            return False
        moved = self._changed_at if self._changed_at is not None else self._running_since
        return now - max(moved, self._running_since) >= self.settings.stale_seconds

    def called(
        self,
        now: float,
        state: str,
        comment_beacon: Beacon | None = None,
        channel: str = "",
        restart: int | None = None,
    ) -> None:
        """Records a Vertex call at ``now`` that found the job in ``state`` (PENDING, RUNNING,
        or a final state).

        Args:
            now: Monotonic seconds.
            state: The state the call found.
            comment_beacon: The beacon the call's answer carried in the job's comment (None:
                none).
            channel: ``comment`` once the job keeps its beacon in its comment ('' = unchanged).
            restart: The job's restart count the call found (None: not known).
        """
        self._vertex_restart = restart
        self.calls += 1
        self._last_call = now
        if state == RUNNING and self.vertex_state != RUNNING:
            self._running_since = now
        if state == PENDING and self.vertex_state != PENDING:
            self._pending_key = self._seen.key if self._seen is not None else None
        self.vertex_state = state
        if channel:
            self.channel = channel
        if self.channel == COMMENT:
            self._see(now, comment_beacon)
        self._called_key = self._seen.key if self._seen is not None else None

    def next_look(self) -> float:
        """Seconds until the next look: the look interval, or ``expect_seconds`` while the
        job is pending or Vertex and the beacon disagree (such looks reuse the cached read).
        With messages a pending job's next start and a notice's exit come as messages: the
        look interval then, but no later than the end of the wait for the job's next message
        (a message ends the wait between looks sooner)."""
        s = self.settings
        base = s.fallback_seconds if self.channel == COMMENT else s.read_seconds
        pending = self.vertex_state is None or (self.vertex_state == PENDING and not self.pushed)
        if pending or (self._disagrees(self._seen) and not self.waiting):
            return min(base, s.expect_seconds)
        if self._waiting_until is not None and self._looked_at is not None:
            return min(base, max(0.0, self._waiting_until - self._looked_at))
        return base
