"""What a poll reads: every poll calls Vertex without a plan; with one, the plan decides."""

from __future__ import annotations

from tests.runtime.training.test_poll_supervisor import SPOT, TimedBackend
from vsp.components.runtime.core import polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training import poll_looks, poll_plan
from vsp.components.runtime.training.recovery import Attempt

SETTINGS = poll_plan.PlanSettings.for_poll_seconds(20)


def test_without_a_plan_or_a_beacon_every_poll_calls_vertex_and_reads_the_log():
    clock = polling.FakeClock()
    for backend, settings in [
        (TimedBackend(clock, 0, 100), None),
        (TimedBackend(clock, 0, 100, beacons=False), SETTINGS),
    ]:
        looks = poll_looks.for_backend(backend, settings, clock)
        assert isinstance(looks, poll_looks.EveryPoll)
        attempt = Attempt("9", SPOT)
        assert looks.before_call(attempt) == (None, True) and looks.log_due() and looks.log_due()
        assert looks.delay_for() is None and backend.read_at == []


def test_a_plan_reads_the_beacon_calls_vertex_when_it_says_and_the_log_once_per_cap():
    clock = polling.FakeClock()
    backend = TimedBackend(clock, start=0, end=10**6)
    looks = poll_looks.for_backend(backend, SETTINGS, clock)
    assert isinstance(looks, poll_looks.Planned)
    attempt = Attempt("9", SPOT)
    clock.sleep(2)
    beacon, called = looks.before_call(attempt)
    assert called and beacon is not None and beacon.state == "running"  # the first look
    backend.refresh(attempt)
    assert attempt.outcome is Outcome.RUNNING
    assert looks.after_call(attempt, beacon) == beacon and looks.plan.vertex_state == "RUNNING"
    clock.sleep(1)
    assert looks.before_call(attempt) == (beacon, False)  # nothing changed, read not due
    assert backend.read_at == [2]
    assert looks.delay_for()(attempt) == SETTINGS.read_seconds
    assert looks.log_due() and not looks.log_due()
    clock.sleep(SETTINGS.cap_seconds)
    assert looks.log_due()
