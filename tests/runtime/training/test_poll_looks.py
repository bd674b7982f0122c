"""What a poll reads: every poll calls Vertex without a plan; with one, the plan decides."""

from __future__ import annotations

from tests.runtime.training.test_poll_supervisor import SPOT, TimedBackend
from vsp.components.runtime.core import polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training import poll_looks, poll_plan, progress_feed
from vsp.components.runtime.training.beacon import Beacon
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
    assert looks.log_due()  # no read yet
    looks.log_read()
    assert not looks.log_due()
    clock.sleep(SETTINGS.cap_seconds - 1)
    assert not looks.log_due()
    clock.sleep(1)
    assert looks.log_due()  # a whole cap after the last read, whatever caused that read


class FakeFeed:
    """A progress feed whose pulls take ``hold`` seconds of the clock and bring the states
    queued for them (``arrive[i]``: the i-th pull's beacon, None: nothing)."""

    settings = progress_feed.FeedSettings(
        pull_seconds=120, ack_seconds=300, least_wait_seconds=12, gap_seconds=20, soon_seconds=300
    )
    topic = "projects/p/topics/t"

    def __init__(self, clock, hold, arrive):
        self.clock, self.hold, self.arrive = clock, hold, list(arrive)
        self.pulled_at: list[float] = []
        self._latest = None

    def latest(self, job_id):
        return self._latest

    def pull(self):
        self.pulled_at.append(self.clock.now())
        got = self.arrive.pop(0) if self.arrive else None
        if got is None:
            self.clock.sleep(self.hold)
            return False
        self.clock.sleep(1)
        self._latest = got
        return True


def test_pushed_looks_wait_on_pulls_and_a_message_ends_the_wait_as_a_fresh_look():
    clock = polling.FakeClock()
    backend = TimedBackend(clock, start=0, end=10**6)
    notice = Beacon("9", 0, "notice", 500, 500, None)
    feed = FakeFeed(clock, hold=90, arrive=[None, None, notice])
    looks = poll_looks.for_backend(backend, SETTINGS, clock, feed)
    assert isinstance(looks, poll_looks.Pushed)
    attempt = Attempt("9", SPOT)
    clock.sleep(2)
    beacon, called = looks.before_call(attempt)
    backend.refresh(attempt)
    looks.after_call(attempt, beacon)
    looks.waiter()(600)  # two empty 90 s pulls, each paused 20 s after, then the notice
    assert feed.pulled_at == [2, 112, 222] and clock.now() == 223
    beacon, called = looks.before_call(attempt)
    assert beacon == notice and looks.plan.pushed and not called  # waits for the exit message
    assert backend.read_at == [2]  # the message is the look: no file read
    looks.waiter()(5)  # too short for a pull (under a tenth of one): slept
    assert feed.pulled_at == [2, 112, 222] and clock.now() == 228
    looks.waiter()(20)  # a pull is never cut short: 90 s, nothing came
    assert feed.pulled_at == [2, 112, 222, 228] and clock.now() == 318


def test_after_a_notice_pulls_go_back_to_back_until_soon_seconds_pass():
    clock = polling.FakeClock()
    backend = TimedBackend(clock, start=0, end=10**6)
    notice = Beacon("9", 0, "notice", 500, 500, None)
    feed = FakeFeed(clock, hold=90, arrive=[notice])
    looks = poll_looks.for_backend(backend, SETTINGS, clock, feed)
    attempt = Attempt("9", SPOT)
    beacon, _ = looks.before_call(attempt)
    backend.refresh(attempt)
    looks.after_call(attempt, beacon)
    looks.waiter()(100)  # the notice, 1 s into the first pull
    assert clock.now() == 1
    looks.waiter()(500)  # its exit is due: no pause while within 300 s of the notice
    # Paused again once 300 s passed (361 + 20); the last 10 s, under least_wait, slept.
    assert feed.pulled_at == [0, 1, 91, 181, 271, 381] and clock.now() == 501


def test_a_running_job_that_sends_no_message_stops_the_pulls(caplog):
    clock = polling.FakeClock()
    backend = TimedBackend(clock, start=0, end=10**6)
    feed = FakeFeed(clock, hold=90, arrive=[])
    looks = poll_looks.for_backend(backend, SETTINGS, clock, feed)
    attempt = Attempt("9", SPOT)
    for _ in range(5):  # RUNNING from the look at 100 s; two pulls' time (240 s) by 400 s
        beacon, called = looks.before_call(attempt)
        if called:
            backend.refresh(attempt)
            looks.after_call(attempt, beacon)
        looks.waiter()(100)
    assert not looks.listening
    assert "sent no progress message to projects/p/topics/t" in caplog.text
    pulls = len(feed.pulled_at)
    looks.before_call(attempt)
    looks.waiter()(100)
    assert len(feed.pulled_at) == pulls  # sleeps now
