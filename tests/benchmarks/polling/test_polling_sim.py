"""The polling benchmark's simulator: traces, detection latency, and both pollers on them."""

from __future__ import annotations

import random

import pytest

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
    calls = sim.run_plan(trace, SETTINGS)
    assert [c for c in calls if c[1] != "RUNNING" or c[0] in (55.0, 1175.0)][:6] == [
        (0.0, "PENDING"),
        (55.0, "RUNNING"),
        (1025.0, "PENDING"),
        (1085.0, "PENDING"),
        (1145.0, "PENDING"),
        (1175.0, "RUNNING"),
    ]
    assert calls[-1] == (2005.0, "SUCCEEDED")
    found = sim.detections(trace, calls)
    assert found == [(5.0, False), (5.0, False), (5.0, False), (5.0, False)]


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


def test_benchmark_results_hold_every_family_and_the_goals():
    results = run.run(seeds=2, shared_jobs=2)
    assert [(r["family"], r["poller"]) for r in results["rows"]] == [
        (f, p) for f in sim.FAMILIES for p in ("plan", "fixed-20s")
    ]
    assert [g["id"] for g in results["goals"]] == [
        "calls-spot", "p95-spot", "calls-hard-kill", "p95-hard-kill",
    ]  # fmt: skip
    assert "## Goals" in run.markdown(results)
