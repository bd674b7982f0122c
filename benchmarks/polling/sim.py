"""Simulated Spot training jobs and the two ways of polling them, on made-up time.

A ``Trace`` is one Slurm job as the two sources show it: its Vertex-visible state changes
(PENDING, RUNNING, SUCCEEDED) and the copies of its progress beacon with the time each becomes
visible on Cloud Storage. Traces are drawn from a seeded ``random.Random``, at full scale:

* the job waits 30-120 s in the queue, then needs ``work`` seconds of running time;
* preemptions come at exponential times with mean ``mtbp`` (M = 1 h) of running time; each gives
  a ``notice`` (30 s) on which the trainer saves and exits 10-30 s later (the job ends then), or,
  in the ``hard-kill`` family for a quarter of them, no notice at all (the host vanishes: no
  ``notice``, no ``exiting``);
* a requeued job is held 121 s plus 15-30 s of scheduling (measured on Slurm 24.11), then runs
  again with the restart count one higher;
* the beacon is written on each state change and every ``heartbeat`` seconds; each write is
  visible 0.2-2 s later. ``beacon-lost``: writes stop for good at a random time in the first
  hour (the job carries on). ``no-beacon``: the step never sees a beacon.

``run_plan`` drives the project's ``poll_plan.PollPlan`` (counting its beacon reads, the
reads a FUSE cache would serve left out, or with the beacon in the job's comment) and
``run_fixed`` the fixed poller the step used before (``polling.Backoff(initial=2,
maximum=20)``, jitter 0.2); both read the trace at the times they look, so no test or result
depends on the wall clock.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import random

from vsp.components.runtime.core import polling
from vsp.components.runtime.training import poll_plan, shared_plan
from vsp.components.runtime.training.beacon import Beacon

FAMILIES = ("spot", "hard-kill", "beacon-lost", "no-beacon")
PENDING, RUNNING, SUCCEEDED = "PENDING", "RUNNING", "SUCCEEDED"
REQUEUE_HOLD = 121.0


@dataclasses.dataclass
class Trace:
    """One job as Vertex and the beacon show it.

    Attributes:
        changes: ``(time, state)`` of each Vertex-visible state, the first at 0 (PENDING).
        beacons: ``(visible_at, Beacon)`` sorted by ``visible_at``.
        end: Time the job ended (SUCCEEDED), seconds.
    """

    changes: list[tuple[float, str]]
    beacons: list[tuple[float, Beacon]]
    end: float

    def state_at(self, t: float) -> str:
        """The state a Vertex call at ``t`` returns."""
        index = bisect.bisect_right([c[0] for c in self.changes], t) - 1
        return self.changes[max(0, index)][1]

    def beacon_at(self, t: float) -> Beacon | None:
        """The beacon a read at ``t`` returns (None before the first visible write)."""
        index = bisect.bisect_right(self._visible, t) - 1
        return self.beacons[index][1] if index >= 0 else None

    def restart_at(self, t: float) -> int:
        """The job's restart count a Vertex call at ``t`` returns (requeues so far)."""
        return sum(1 for at, state in self.changes[1:] if at <= t and state == PENDING)

    def __post_init__(self) -> None:
        self._visible = [b[0] for b in self.beacons]


def make_trace(
    rng: random.Random,
    family: str,
    *,
    work: float = 4 * 3600.0,
    mtbp: float = 3600.0,
    notice: float = 30.0,
    heartbeat: float = 15.0,
) -> Trace:
    """A seeded job of ``family`` (see the module docstring); times in seconds."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; use one of {FAMILIES}")
    changes: list[tuple[float, str]] = [(0.0, PENDING)]
    writes: list[tuple[float, Beacon]] = []
    lost_at = rng.uniform(600.0, 3600.0) if family == "beacon-lost" else math.inf

    def write(at: float, state: str, since: float, restart: int, rc: int | None = None) -> None:
        if family != "no-beacon" and at < lost_at:
            writes.append((at + rng.uniform(0.2, 2.0), Beacon("1", restart, state, since, at, rc)))

    t, done, restart = rng.uniform(30.0, 120.0), 0.0, 0
    while True:
        changes.append((t, RUNNING))
        start = t
        remaining = work - done
        until = rng.expovariate(1.0 / mtbp)
        hard = family == "hard-kill" and rng.random() < 0.25
        if until >= remaining:
            end, notice_at, exit_code = start + remaining, math.inf, 0
        elif hard:
            end, notice_at, exit_code = start + until, math.inf, None
        else:
            notice_at = start + max(0.0, until - notice)
            end, exit_code = min(start + until, notice_at + rng.uniform(10.0, 30.0)), 143
        write(start + 0.05, "started", start + 0.05, restart)
        write(start + 0.1, "running", start + 0.1, restart)
        beat = start + heartbeat
        while beat < end - 0.05:  # the batch script stops its heartbeat before ``exiting``
            noticed = beat >= notice_at
            state, since = ("notice", notice_at) if noticed else ("running", start + 0.1)
            write(beat, state, since, restart)
            beat += heartbeat
        if notice_at < end:
            write(notice_at, "notice", notice_at, restart)
        if exit_code is not None:
            write(end - 0.05, "exiting", end - 0.05, restart, exit_code)
        done += end - start
        if exit_code == 0:
            changes.append((end, SUCCEEDED))
            break
        changes.append((end, PENDING))
        t = end + REQUEUE_HOLD + rng.uniform(15.0, 30.0)
        restart += 1
    # Cloud Storage keeps the last write: a copy never shows after a later one.
    writes.sort(key=lambda w: w[1].time)
    visible = 0.0
    for index, (at, doc) in enumerate(writes):
        visible = max(visible, at)
        writes[index] = (visible, doc)
    return Trace(changes, writes, changes[-1][0])


def run_plan(
    trace: Trace, settings: poll_plan.PlanSettings, channel: str = poll_plan.BEACON
) -> tuple[list[tuple[float, str]], int]:
    """The poll plan on ``trace``: its Vertex calls ``(time, state seen)`` and its beacon reads.

    In the ``beacon`` channel the plan reads the beacon file when ``read_due`` says so (each
    read a Cloud Storage call; the reads it skips are the ones the FUSE cache would serve); in
    the ``comment`` channel the beacon comes with each Vertex call (the job's comment) and
    nothing else is read.
    """
    clock = polling.FakeClock()
    plan = poll_plan.PollPlan(settings)
    calls: list[tuple[float, str]] = []
    reads = 0
    while True:
        now = clock.now()
        read = channel == poll_plan.BEACON and plan.read_due(now)
        reads += read
        beacon = trace.beacon_at(now) if read else plan.last_beacon
        if plan.look(now, beacon, read=read):
            state = trace.state_at(now)
            if channel == poll_plan.COMMENT:
                comment = trace.beacon_at(now)
                plan.called(now, state, comment, poll_plan.COMMENT, trace.restart_at(now))
            else:
                plan.called(now, state, restart=trace.restart_at(now))
            calls.append((now, state))
            if state == SUCCEEDED:
                return calls, reads
        clock.sleep(plan.next_look())


def run_fixed(trace: Trace, rng: random.Random, poll_seconds: float = 20.0) -> list[tuple]:
    """The Vertex calls of the fixed poller (the step's backoff up to ``poll_seconds``)."""
    clock = polling.FakeClock()
    delays = polling.Backoff(initial=min(2.0, poll_seconds), maximum=poll_seconds).delays(rng)
    calls: list[tuple[float, str]] = []
    while True:
        state = trace.state_at(clock.now())
        calls.append((clock.now(), state))
        if state == SUCCEEDED:
            return calls
        clock.sleep(next(delays))


def detections(trace: Trace, calls: list[tuple[float, str]]) -> list[tuple[float, bool]]:
    """For each state change after the first: (seconds until a call saw it, whether it was
    missed, i.e. the state had changed again before any call)."""
    times = [c[0] for c in calls]
    found = []
    for t, state in trace.changes[1:]:
        at = bisect.bisect_left(times, t)
        if at == len(calls):
            raise ValueError(f"no call after the change at {t:.1f} s")
        found.append((calls[at][0] - t, calls[at][1] != state))
    return found


def percentile(values: list[float], q: float) -> float:
    """The ``q`` (0-100) percentile, nearest rank; nan for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


def run_shared(
    traces: list[Trace], settings: poll_plan.PlanSettings
) -> tuple[int, int, list[tuple[float, bool]]]:
    """Jobs on one cluster polled with one list call per cycle (``shared_plan.SharedPlan``), each
    job's beacon read once per read interval.

    Returns:
        The number of list calls, of beacon reads, and every job's detections.
    """
    clock = polling.FakeClock()
    shared = shared_plan.SharedPlan(settings)
    calls: dict[int, list[tuple[float, str]]] = {i: [] for i in range(len(traces))}
    active = set(calls)
    reads = 0
    while active:
        now = clock.now()
        beacons = {str(i): traces[i].beacon_at(now) for i in sorted(active)}
        reads += len(beacons)
        if shared.look(now, beacons):
            states = {str(i): traces[i].state_at(now) for i in sorted(active)}
            shared.called(now, states)
            for i in sorted(active):
                calls[i].append((now, states[str(i)]))
                if states[str(i)] == SUCCEEDED:
                    active.discard(i)
        clock.sleep(settings.read_seconds)
    found = [d for i, trace in enumerate(traces) for d in detections(trace, calls[i])]
    return shared.calls, reads, found
