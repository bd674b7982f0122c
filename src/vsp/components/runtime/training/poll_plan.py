"""The poll plan: when a training step calls Vertex, given what the job's beacon shows.

Polling the Slurm job through Vertex (``callSlurmRestApi``) every 20 s costs about 185 calls per
job-hour against the project's Vertex quota. The job's progress beacon (``training.beacon``)
lives on Cloud Storage, another quota, and is read every ``beacon_seconds``; Vertex is called:

1. at the first look (the baseline);
2. when the beacon shows a state change (a new state or a new run after a requeue);
3. every ``fallback_seconds`` while the beacon is lost, as a fixed poller would: Vertex said
   RUNNING but the beacon has not changed for ``stale_seconds`` (the node died without a
   notice, or the beacon is not visible from the step), until the beacon moves again;
4. every ``expect_seconds`` while Vertex and the beacon disagree: the beacon says the payload
   runs (``started``/``running``) but Vertex said PENDING, or it says the job is ending
   (``notice``/``exiting``) but Vertex still said RUNNING;
5. every ``pending_seconds`` while Vertex says PENDING (a start the beacon cannot show, as when
   it is not visible from here, is seen within that time);
6. otherwise every ``cap_seconds``, for what no beacon shows (a job cancelled by someone else,
   a hold).

Pure: time is passed in (monotonic seconds of an injectable ``polling.Clock``), the plan reads
nothing and calls nothing, so the runtime and the benchmark (``benchmarks/polling/run.py``) run the
same code. ``SharedPlan`` merges the plans of many jobs on one cluster: one list call
(``GET /slurm/v0.0.42/jobs``) answers for all of them. Hand-rolled: a small state machine of
this project's own rules.
"""

from __future__ import annotations

import dataclasses

from vsp.components.runtime.training.beacon import Beacon

PENDING, RUNNING = "PENDING", "RUNNING"


@dataclasses.dataclass(frozen=True)
class PlanSettings:
    """The plan's intervals, seconds.

    Attributes:
        beacon_seconds: Between two reads of the beacon (Cloud Storage, not Vertex).
        cap_seconds: Longest time between two Vertex calls when nothing is expected.
        expect_seconds: Between Vertex calls while Vertex and the beacon disagree.
        stale_seconds: A beacon unchanged this long while Vertex says RUNNING is lost (keep it
            above the job's heartbeat, ``VSP_BEACON_HEARTBEAT``, plus Cloud Storage delays).
        fallback_seconds: Between Vertex calls while the beacon is lost.
        pending_seconds: Between Vertex calls while the job is PENDING.
    """

    beacon_seconds: float = 5.0
    cap_seconds: float = 240.0
    expect_seconds: float = 10.0
    stale_seconds: float = 30.0
    fallback_seconds: float = 20.0
    pending_seconds: float = 60.0

    @classmethod
    def for_poll_seconds(cls, poll_seconds: float) -> PlanSettings:
        """Settings scaled from a component's ``poll_seconds`` (the fixed poller's interval,
        which becomes the fallback): 20 s gives the defaults (beacon read 5 s, expect 10 s,
        stale 30 s, pending 60 s, cap 240 s)."""
        p = float(poll_seconds)
        return cls(
            beacon_seconds=p / 4,
            cap_seconds=12 * p,
            expect_seconds=p / 2,
            stale_seconds=max(1.5 * p, 2.0),
            fallback_seconds=p,
            pending_seconds=3 * p,
        )

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
            if not value > 0:
                found.append(f"{field.name}={value!r} must be a positive number of seconds")
        if not found and self.stale_seconds <= self.beacon_seconds:
            found.append(
                f"stale_seconds={self.stale_seconds:g} must exceed beacon_seconds="
                f"{self.beacon_seconds:g}: a beacon cannot be called lost before it is re-read"
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

    def look(self, now: float, beacon: Beacon | None) -> bool:
        """Records a read of the beacon at ``now``; True when Vertex should be called now.

        ``reason`` then says why (for the step's log).
        """
        if beacon is not None and beacon != self._seen:
            self._seen, self._changed_at = beacon, now
            self.beacon_ever_seen, self.beacon_missing = True, False
        if self.beacon_lost(now):
            self.beacon_missing = True
        self.reason = self._why(now, beacon)
        return bool(self.reason)

    def _why(self, now: float, beacon: Beacon | None) -> str:
        s = self.settings
        if self._last_call is None:
            return "first look"
        since_call = now - self._last_call
        if beacon is not None and beacon.key != self._called_key:
            return f"beacon: {beacon.state} (run {beacon.restart})"
        if self.beacon_missing:
            if since_call >= s.fallback_seconds:
                return "beacon lost: polling at the fallback interval"
            return ""
        if self._disagrees(beacon) and since_call >= s.expect_seconds:
            return f"beacon says {beacon.state}, Vertex said {self.vertex_state}"
        if self.vertex_state == PENDING and since_call >= s.pending_seconds:
            return "pending"
        if since_call >= s.cap_seconds:
            return "cap reached"
        return ""

    def _disagrees(self, beacon: Beacon | None) -> bool:
        if beacon is None or self.vertex_state is None:
            return False
        if beacon.live and beacon.state != "notice":
            return self.vertex_state == PENDING
        return self.vertex_state == RUNNING  # notice or exiting: the end is near

    def beacon_lost(self, now: float) -> bool:
        """Whether Vertex says RUNNING but the beacon has not moved for ``stale_seconds``."""
        if self.vertex_state != RUNNING or self._running_since is None:
            return False
        moved = self._changed_at if self._changed_at is not None else self._running_since
        return now - max(moved, self._running_since) >= self.settings.stale_seconds

    def called(self, now: float, state: str) -> None:
        """Records a Vertex call at ``now`` that found the job in ``state`` (PENDING, RUNNING,
        or a final state)."""
        self.calls += 1
        self._last_call = now
        if state == RUNNING and self.vertex_state != RUNNING:
            self._running_since = now
        self.vertex_state = state
        self._called_key = self._seen.key if self._seen is not None else None

    def next_look(self) -> float:
        """Seconds until the next read of the beacon."""
        return self.settings.beacon_seconds


def call_metrics(calls: int, seconds: float) -> dict[str, float]:
    """``vertex_calls`` and ``vertex_calls_per_job_hour`` (the latter only when time passed).

    Args:
        calls: Vertex API calls the step made for the run.
        seconds: Wall seconds the step supervised the run.
    """
    found = {"vertex_calls": float(calls)}
    if seconds > 0:
        found["vertex_calls_per_job_hour"] = round(calls * 3600.0 / seconds, 1)
    return found


class SharedPlan:
    """The plans of many jobs on one cluster: one list call serves every job that wants one.

    Args:
        settings: Intervals shared by every job's plan.
    """

    def __init__(self, settings: PlanSettings = PlanSettings()):
        self.settings = settings
        self.plans: dict[str, PollPlan] = {}
        self.calls = 0

    def look(self, now: float, beacons: dict[str, Beacon | None]) -> bool:
        """Reads each job's beacon; True when one list call should be made now."""
        wanted = False
        for job, beacon in beacons.items():
            plan = self.plans.setdefault(job, PollPlan(self.settings))
            wanted = plan.look(now, beacon) or wanted
        return wanted

    def called(self, now: float, states: dict[str, str]) -> None:
        """Records one list call at ``now`` answering ``states`` for every job."""
        self.calls += 1
        for job, state in states.items():
            self.plans.setdefault(job, PollPlan(self.settings)).called(now, state)
