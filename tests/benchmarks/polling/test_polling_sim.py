"""The polling benchmark's simulator: traces, detection latency, and both pollers on them."""

from __future__ import annotations

import random

import pytest

from benchmarks.polling import goals as polling_goals
from benchmarks.polling import run, sim
from vsp.components.runtime.training import poll_plan
from vsp.components.runtime.training.beacon import Beacon

SETTINGS = poll_plan.PlanSettings.for_poll_seconds(20)


def hand_trace():
    """PENDING, RUNNING at 50, notice at 1000, requeued at 1020, RUNNING at 1170, done 2000."""
    changes = [(0.0, "PENDING"), (50.0, "RUNNING"), (1020.0, "PENDING"), (1170.0, "RUNNING")]
    changes.append((2000.0, "SUCCEEDED"))
    writes = [(51.0, Beacon("1", 0, "running", 50.1, 50.1))]
    writes += [
        (51.0 + k * 15, Beacon("1", 0, "running", 50.1, 50.1 + k * 15)) for k in range(1, 64)
    ]
    writes += [(1001.0, Beacon("1", 0, "notice", 1000.0, 1000.0))]
    writes += [(1016.0, Beacon("1", 0, "notice", 1000.0, 1015.0))]
    writes += [(1020.5, Beacon("1", 0, "exiting", 1019.9, 1019.9, 143))]
    writes += [
        (1171.0 + k * 15, Beacon("1", 1, "running", 1170.1, 1170.1 + k * 15)) for k in range(56)
    ]
    writes += [(2000.5, Beacon("1", 1, "exiting", 1999.9, 1999.9, 0))]
    return sim.Trace(changes, writes, 2000.0)


def test_the_plan_sees_each_change_of_the_hand_trace_at_the_next_beacon_read():
    trace = hand_trace()
    calls, reads = sim.run_plan(trace, SETTINGS)
    # 60: the pending poll; reads every 100 s from 160: 1060 shows exiting, 1260 the new run
    # (no pending polls meanwhile: the beacon moved at 1060), 2060 the end.
    assert calls == [
        (0.0, "PENDING"), (60.0, "RUNNING"), (1060.0, "PENDING"), (1260.0, "RUNNING"),
        (2060.0, "SUCCEEDED"),
    ]  # fmt: skip
    # Reads at 0, then every 100 s from 160 to 2060: each a Cloud Storage call.
    assert reads == 1 + len(range(160, 2061, 100))
    assert sim.detections(trace, calls) == [(10.0, False), (40.0, False), (90.0, False),
                                            (60.0, False)]  # fmt: skip


def test_in_the_comment_channel_every_look_is_a_vertex_call_and_nothing_is_read():
    trace = hand_trace()
    calls, reads = sim.run_plan(trace, SETTINGS, poll_plan.COMMENT)
    times = [t for t, _ in calls]
    # Every 100 s while RUNNING, 60 s while PENDING (1060, 1120, 1180: RUNNING again).
    assert times == [0, 60, *range(160, 1061, 100), 1120, 1180, *range(1280, 2081, 100)]
    assert reads == 0
    assert sim.detections(trace, calls) == [(10.0, False), (40.0, False), (10.0, False),
                                            (80.0, False)]  # fmt: skip


def test_a_change_undone_before_any_call_is_counted_missed():
    trace = sim.Trace([(0.0, "RUNNING"), (10.0, "PENDING"), (15.0, "RUNNING")], [], 15.0)
    assert sim.detections(trace, [(0.0, "RUNNING"), (20.0, "RUNNING")]) == [
        (10.0, True),
        (5.0, False),
    ]


@pytest.mark.parametrize("family", sim.FAMILIES)
def test_traces_alternate_states_and_end_succeeded(family):
    trace = sim.make_trace(random.Random(3), family)
    states = [s for _, s in trace.changes]
    assert states[0] == "PENDING" and states[-1] == "SUCCEEDED"
    assert all(a != b for a, b in zip(states, states[1:], strict=False))
    running = sum(
        b[0] - a[0]
        for a, b in zip(trace.changes, trace.changes[1:], strict=False)
        if a[1] == "RUNNING"
    )
    assert running == pytest.approx(4 * 3600.0)
    visible = [at for at, _ in trace.beacons]
    assert visible == sorted(visible)
    assert (trace.beacons == []) == (family == "no-beacon")


def test_fixed_poller_calls_about_every_20_seconds():
    trace = sim.make_trace(random.Random(1), "spot")
    calls = sim.run_fixed(trace, random.Random(2))
    assert len(calls) * 3600 / trace.end == pytest.approx(181, abs=3)


def test_simulated_rows_count_the_beacon_reads_and_stay_labelled():
    simulated = run.simulate(seeds=2, shared_jobs=2)
    assert [(r["family"], r["poller"]) for r in simulated["rows"]] == [
        *((f, f"plan, {c}") for f, c in run.SIM_ROWS), ("spot", "fixed 20 s, no beacon"),
    ]  # fmt: skip
    spot = simulated["rows"][0]
    assert spot["calls_per_job_hour_mean"] > spot["vertex_calls_per_job_hour_mean"] + 30
    goals = polling_goals.goals([], simulated)
    assert [g["id"] for g in goals] == ["simulated-beacon", "simulated-comment"]
    assert {g["met"] for g in goals} == {None}
