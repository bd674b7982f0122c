"""The poll plan: when Vertex is called, given the beacon, on made-up time."""

from __future__ import annotations

import pytest

from vsp.components.runtime.training import shared_plan
from vsp.components.runtime.training.beacon import Beacon
from vsp.components.runtime.training.poll_plan import PENDING, RUNNING, PlanSettings, PollPlan

SETTINGS = PlanSettings(
    beacon_seconds=5, cap_seconds=240, expect_seconds=10, stale_seconds=30, fallback_seconds=20,
    pending_seconds=60, cache_seconds=0,
)  # fmt: skip


def beacon(state, since, time=None, restart=0, rc=None, job="7"):
    return Beacon(job, restart, state, since, since if time is None else time, rc)


def beat(t):
    """The write time of the newest heartbeat at t (one every 15 s)."""
    return t - t % 15


def drive(plan, until, beacon_at, vertex_at, start=0.0):
    """Looks every beacon_seconds from ``start`` to ``until``; returns the times Vertex was
    called. ``beacon_at(t)`` and ``vertex_at(t)`` give what each source shows at t."""
    calls = []
    now = start
    while now <= until:
        if plan.look(now, beacon_at(now)):
            plan.called(now, vertex_at(now))
            calls.append(now)
        now += plan.next_look()
    return calls


def test_quiet_running_job_is_called_only_at_the_cap():
    plan = PollPlan(SETTINGS)
    heartbeats = lambda t: beacon("running", 0, beat(t))  # noqa: E731
    calls = drive(plan, 1000, heartbeats, lambda t: RUNNING)
    assert calls == [0, 240, 480, 720, 960]
    assert plan.calls == 5


def test_a_beacon_state_change_calls_at_the_next_look():
    plan = PollPlan(SETTINGS)
    states = lambda t: beacon("running", 0, beat(t)) if t < 101 else beacon("exiting", 101, rc=0)  # noqa: E731
    vertex = lambda t: RUNNING if t < 102 else "SUCCEEDED"  # noqa: E731
    calls = drive(plan, 120, states, vertex)
    # 105: the beacon changed (Vertex already ended); the plan agrees with Vertex afterwards.
    assert calls == [0, 105]
    assert plan.vertex_state == "SUCCEEDED"


def test_notice_polls_vertex_at_the_expect_interval_until_it_shows_the_end():
    plan = PollPlan(SETTINGS)
    states = lambda t: beacon("running", 0, beat(t)) if t < 50 else beacon("notice", 50, beat(t))  # noqa: E731
    vertex = lambda t: RUNNING if t < 83 else PENDING  # noqa: E731
    calls = drive(plan, 200, states, vertex)
    # Then no pending checks: the beacon, once seen, shows the next run's start.
    assert calls == [0, 50, 60, 70, 80, 90]
    assert plan.vertex_state == PENDING


def test_requeue_is_seen_from_a_new_run_in_the_beacon():
    plan = PollPlan(SETTINGS)

    def states(t):
        if t < 20:
            return beacon("running", 0, beat(t))
        if t < 150:
            return beacon("exiting", 20, rc=143)
        return beacon("started", 150, beat(t), restart=1)

    vertex = lambda t: RUNNING if t < 20 or t >= 150 else PENDING  # noqa: E731
    calls = drive(plan, 300, states, vertex)
    # 20: exiting; 80 and 140: pending checks (the beacon has not moved for stale_seconds, 30
    # s here); 150: the new run's beacon.
    assert calls == [0, 20, 80, 140, 150]
    assert plan.vertex_state == RUNNING


def test_a_lost_beacon_falls_back_to_the_fixed_interval():
    plan = PollPlan(SETTINGS)
    # Heartbeats every 15 s until 100, then nothing (the node died); Vertex says RUNNING.
    states = lambda t: beacon("running", 0, beat(min(t, 100)))  # noqa: E731
    calls = drive(plan, 200, states, lambda t: RUNNING)
    # Last change seen at 90 (the 90 s heartbeat); lost from 120, then every 20 s.
    assert calls == [0, 120, 140, 160, 180, 200]
    assert plan.beacon_lost(200)


def test_no_beacon_at_all_polls_pending_then_the_fallback():
    plan = PollPlan(SETTINGS)
    vertex = lambda t: PENDING if t < 100 else RUNNING  # noqa: E731
    calls = drive(plan, 200, lambda t: None, vertex)
    # Pending every 60 s; RUNNING seen at 120 with no beacon seen yet: every 20 s (the
    # fallback), as the job may keep its beacon in its comment.
    assert calls == [0, 60, 120, 140, 160, 180, 200]


def test_beacon_ahead_of_vertex_is_rechecked_at_the_expect_interval():
    plan = PollPlan(SETTINGS)
    states = lambda t: None if t < 40 else beacon("started", 40, beat(t))  # noqa: E731
    vertex = lambda t: PENDING if t < 52 else RUNNING  # noqa: E731
    calls = drive(plan, 100, states, vertex)
    assert calls == [0, 40, 50, 60]


def test_shared_plan_makes_one_list_call_for_many_jobs():
    shared = shared_plan.SharedPlan(SETTINGS)
    now = 0.0
    while now <= 500:
        beacons = {
            "1": beacon("running", 0, beat(now), job="1"),
            "2": beacon("running", 0, beat(now), job="2")
            if now < 300
            else beacon("exiting", 300, rc=0, job="2"),
        }
        if shared.look(now, beacons):
            shared.called(now, {"1": RUNNING, "2": RUNNING if now < 300 else "SUCCEEDED"})
        now += 5
    assert shared.calls == 3  # 0, 240, 300 (job 2's beacon), not 0/240/480 per job
    assert shared.plans["1"].vertex_state == RUNNING
    assert shared.plans["2"].vertex_state == "SUCCEEDED"


@pytest.mark.parametrize(
    "change, message",
    [
        ({"cap_seconds": 0}, "cap_seconds=0 must be a positive number of seconds"),
        ({"stale_seconds": 5}, "stale_seconds=5 must exceed the read interval 5"),
        ({"cache_seconds": 60}, "stale_seconds=30 must exceed the read interval 60"),
        ({"cap_seconds": 10}, "cap_seconds=10 is below fallback_seconds=20"),
    ],
)
def test_wrong_settings_are_refused_with_the_fix(change, message):
    settings = PlanSettings(**{**SETTINGS.__dict__, **change})
    with pytest.raises(ValueError, match=message):
        PollPlan(settings)


def test_beacon_documents_are_parsed_or_refused():
    text = '{"job": "12", "restart": 2, "state": "notice", "since": 100, "time": 115, "rc": null}'
    assert Beacon.parse(text) == Beacon("12", 2, "notice", 100.0, 115.0, None)
    assert Beacon.parse('{"job": "12", "state": "resting", "since": 1, "time": 1}') is None
    assert Beacon.parse('{"job": "12", "sta') is None  # a partly written copy
    assert Beacon.parse("[]") is None


def test_after_the_beacon_was_found_missing_pending_is_polled_at_the_fallback():
    plan = PollPlan(SETTINGS)
    vertex = lambda t: RUNNING if t < 200 else PENDING  # noqa: E731
    calls = drive(plan, 300, lambda t: None, vertex)
    # RUNNING at 0 and no beacon seen: every 20 s (missing from 30 on); PENDING from 200 still
    # every 20 s (not the 60 s of a job whose beacon was never looked for).
    assert calls == [20.0 * k for k in range(16)]
    assert plan.vertex_state == PENDING and plan.beacon_missing


def test_once_messages_arrive_the_file_is_read_rarely_and_a_notice_waits_for_the_exit():
    settings = PlanSettings.for_poll_seconds(20)
    pushed = settings.pushed()
    # Read once per 1800 s, with the Vertex call of the cap, raised to match.
    assert (pushed.read_seconds, pushed.stale_seconds, pushed.expect_seconds) == (1800, 2050, 10)
    assert (settings.cap_seconds, pushed.cap_seconds) == (1200, 1800) and not pushed.problems()
    plan = PollPlan(settings)
    assert plan.look(0, beacon("started", 0)) and plan.settings is settings
    plan.called(0, RUNNING, restart=0)
    plan.push_on()
    plan.push_on()  # once
    assert plan.pushed and plan.settings == pushed
    assert plan.next_look() == 1800
    assert not plan.read_due(1799) and plan.read_due(1800)
    # A notice does not call Vertex: the job's exit message comes within its notice; the next
    # look is due when that wait ends (a message ends the wait between looks sooner).
    assert not plan.look(30, beacon("notice", 30), read=False)
    assert plan.waiting and plan.next_look() == 100
    assert not plan.look(120, beacon("notice", 30), read=False)
    assert plan.next_look() == 10
    # The noticed run's exit (not 0): a preemption, whose requeue Vertex would show, and the
    # next run's start comes as a message: no call before that or restart_seconds (180 s).
    assert not plan.look(131, beacon("exiting", 131, rc=143), read=False)
    assert plan.waiting and plan.next_look() == 180
    assert not plan.look(300, beacon("exiting", 131, rc=143), read=False)
    assert plan.look(260, beacon("started", 260, restart=1), read=False)
    assert plan.reason == "beacon: started (run 1)"
    plan.called(260, RUNNING, restart=1)
    assert not plan.waiting and plan.next_look() == 1800
    # The start never came: Vertex once restart_seconds passed since the exit.
    late = PollPlan(settings)
    late.look(0, beacon("started", 0))
    late.called(0, RUNNING, restart=0)
    late.push_on()
    late.look(30, beacon("notice", 30), read=False)
    assert not late.look(40, beacon("exiting", 40, rc=143), read=False)
    assert not late.look(219, beacon("exiting", 40, rc=143), read=False)
    assert late.look(220, beacon("exiting", 40, rc=143), read=False)
    assert late.reason == "beacon: exiting (run 0)"
    late.called(220, RUNNING, restart=0)
    # Vertex still says RUNNING after the exit: asked again every expect_seconds, as before.
    assert not late.look(225, beacon("exiting", 40, rc=143), read=False)
    assert late.look(230, beacon("exiting", 40, rc=143), read=False)
    # An exit with 0 after a notice, or one without a notice, is the end: Vertex once its
    # batch script had expect_seconds to end (it sends the message first).
    for before in ([beacon("notice", 30)], []):
        done = PollPlan(settings)
        done.look(0, beacon("started", 0))
        done.called(0, RUNNING, restart=0)
        done.push_on()
        for seen in before:
            done.look(30, seen, read=False)
        rc = 0 if before else 143
        assert not done.look(40, beacon("exiting", 40, rc=rc), read=False)
        assert done.waiting and done.next_look() == 10
        assert done.look(50, beacon("exiting", 40, rc=rc), read=False) and not done.waiting
    # No exit message after a notice (the node died in it): Vertex after fallback_seconds.
    again = PollPlan(settings)
    again.look(0, beacon("started", 0))
    again.called(0, RUNNING, restart=0)
    again.push_on()
    assert not again.look(30, beacon("notice", 30), read=False)
    assert not again.look(129, beacon("notice", 30), read=False)
    assert again.look(130, beacon("notice", 30), read=False)
    # Without messages a notice is a call at once, as before.
    plain = PollPlan(settings)
    plain.look(0, beacon("started", 0))
    plain.called(0, RUNNING, restart=0)
    assert plain.look(30, beacon("notice", 30), read=False)
