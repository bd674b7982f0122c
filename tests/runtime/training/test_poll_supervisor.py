"""The supervisor's polls under the poll plan: Vertex is called when the beacon says so."""

from __future__ import annotations

import logging

import pytest

from vsp.components.runtime.core import polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training import driver, poll_plan
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.beacon import Beacon
from vsp.components.runtime.training.recovery import Attempt, SpotRecovery, Target
from vsp.components.runtime.training.supervisor import TrainingSupervisor

SPOT = Target("spot", spot=True)


class TimedBackend(TrainingBackend):
    """One job: PENDING until ``start``, RUNNING until ``end``, then SUCCEEDED; its beacon
    appears at ``start + 1`` with a heartbeat every 15 s and shows ``exiting`` at ``end``."""

    resource_type = "SlurmJob"

    def __init__(self, clock, start, end, beacons=True):
        self.clock, self.start, self.end, self.beacons = clock, start, end, beacons
        self.refreshed_at: list[float] = []
        self.read_at: list[float] = []

    def find(self, run_key):
        return []

    def submit(self, run_key, index, target):
        return Attempt("9", target)

    def refresh(self, attempt):
        now = self.clock.now()
        self.refreshed_at.append(now)
        if now < self.start:
            attempt.outcome = Outcome.PENDING
        else:
            attempt.outcome = Outcome.RUNNING if now < self.end else Outcome.SUCCEEDED

    def cancel(self, attempt):
        raise AssertionError("nothing to cancel")

    def uri(self, attempt):
        return f"https://h/jobs/{attempt.job_id}"

    @property
    def writes_beacons(self):
        return self.beacons

    def storage_calls(self):
        return len(self.read_at)

    def beacon(self, attempt):
        now = self.clock.now()
        self.read_at.append(now)
        if not self.beacons or now < self.start + 1:
            return None
        if now >= self.end:
            return Beacon("9", 0, "exiting", self.end, self.end, 0)
        beat = now - (now - self.start - 1) % 15
        return Beacon("9", 0, "running", self.start + 1, beat)


def supervisor(backend, clock):
    return TrainingSupervisor(
        backend,
        SpotRecovery(SPOT, None),
        "run-1",
        clock=clock,
        poll_settings=poll_plan.PlanSettings.for_poll_seconds(20),
    )


def test_vertex_is_called_at_the_start_the_pending_poll_and_the_end_only():
    clock = polling.FakeClock()
    backend = TimedBackend(clock, start=30, end=500)
    result = supervisor(backend, clock).run()
    assert [a.outcome for a in result.attempts] == [Outcome.SUCCEEDED]
    # 0: first look (PENDING); 60: the pending interval (RUNNING; the beacon read at 160 only
    # confirms it); the beacon is read every 100 s (the look, above the 60 s cache) and the
    # read at 560 shows exiting (SUCCEEDED). The cap (1200 s) is not reached.
    assert backend.refreshed_at == [0, 60, 560]
    assert backend.read_at == [0, 160, 260, 360, 460, 560]
    assert (result.vertex_calls, result.storage_calls) == (3, 6)
    assert result.seconds == 560
    seen = [(o["outcome"], o["beacon"]) for o in result.observations]
    assert seen == [
        ("PENDING", None),
        ("RUNNING", None),
        ("RUNNING", [0, "running"]),
        ("SUCCEEDED", [0, "exiting"]),
    ]


def test_a_long_quiet_run_is_called_at_the_cap():
    clock = polling.FakeClock()
    backend = TimedBackend(clock, start=30, end=1500)
    supervisor(backend, clock).run()
    # The cap: 1200 s after the last call (a look on the 100 s grid 160, 260, ...): 1260; then
    # 1560, the read showing exiting.
    assert backend.refreshed_at == [0, 60, 1260, 1560]


def test_without_beacons_every_poll_calls_vertex_as_before():
    clock = polling.FakeClock()
    backend = TimedBackend(clock, start=30, end=100, beacons=False)
    run = TrainingSupervisor(
        backend,
        SpotRecovery(SPOT, None),
        "run-1",
        clock=clock,
        backoff=polling.Backoff(initial=20, maximum=20, jitter=0),
        poll_settings=poll_plan.PlanSettings.for_poll_seconds(20),
    )
    result = run.run()
    assert backend.refreshed_at == [0, 20, 40, 60, 80, 100]
    assert result.vertex_calls == 6


def test_call_metrics_are_per_hour_of_supervision():
    assert training_metrics.call_metrics(30, 1800, storage_calls=12) == {
        "vertex_calls": 30.0,
        "storage_calls": 12.0,
        "api_calls": 42.0,
        "vertex_calls_per_job_hour": 60.0,
        "storage_calls_per_job_hour": 24.0,
        "api_calls_per_job_hour": 84.0,
    }
    assert training_metrics.call_metrics(2, 0) == {
        "vertex_calls": 2.0,
        "storage_calls": 0.0,
        "api_calls": 2.0,
    }


def test_component_options_scale_the_plan_from_poll_seconds():
    options = driver.component_options(
        spot_price=1, ondemand_price=2, poll_seconds=20, timeout_seconds=60,
        gcp_resources_path="", report_path="/dev/null",
    )  # fmt: skip
    settings = options["poll_settings"]
    assert (
        settings.beacon_seconds, settings.expect_seconds, settings.stale_seconds,
        settings.fallback_seconds, settings.pending_seconds, settings.cap_seconds,
        settings.heartbeat_seconds, settings.cache_seconds, settings.read_seconds,
    ) == (100, 10, 250, 100, 60, 1200, 125, 60, 100)  # fmt: skip


class CommentBackend(TimedBackend):
    """One job that keeps its beacon in its Slurm comment (its beacon folder is not writable):
    PENDING until 30; run 0 RUNNING 30-215 (notice at 200, exiting at 214); requeued, PENDING
    until 340; run 1 RUNNING 340-700; SUCCEEDED. The comment's word follows each state."""

    def __init__(self, clock):
        super().__init__(clock, start=30, end=700)
        self.comment: Beacon | None = None

    def _state(self, now):
        if now < 30:
            return Outcome.PENDING, 0, None
        if now < 215:
            word = ("running", 31) if now < 200 else ("notice", 200)
            word = ("exiting", 214) if now >= 214 else word
            return Outcome.RUNNING, 0, word
        if now < 340:
            return Outcome.PENDING, 1, ("exiting", 214)
        if now < 700:
            return Outcome.RUNNING, 1, ("running", 341)
        return Outcome.SUCCEEDED, 1, ("exiting", 700)

    def refresh(self, attempt):
        now = self.clock.now()
        self.refreshed_at.append(now)
        attempt.outcome, attempt.requeues, word = self._state(now)
        restart = attempt.requeues if now >= 340 or now < 215 else 0
        rc = {214: 143, 700: 0}.get(word[1]) if word else None
        self.comment = None if word is None else Beacon("9", restart, word[0], word[1], word[1], rc)

    def beacon_channel(self, attempt):
        return "comment" if self.comment is not None else ""

    def beacon(self, attempt):
        if self.comment is not None:
            return self.comment
        self.read_at.append(self.clock.now())  # the beacon file, absent
        return None


def test_the_comment_channel_calls_vertex_at_the_look_interval_with_exact_counts():
    clock = polling.FakeClock()
    backend = CommentBackend(clock)
    result = supervisor(backend, clock).run()
    assert [a.outcome for a in result.attempts] == [Outcome.SUCCEEDED]
    # 0: first look; 60: the pending interval (RUNNING, the comment carries the beacon from
    # now on: no more file reads); every 100 s (the look) while RUNNING: 160, 260 (PENDING:
    # requeued); every 60 s while pending: 320, 380 (RUNNING, run 1); 480 ... 780 (SUCCEEDED).
    assert backend.refreshed_at == [0, 60, 160, 260, 320, 380, 480, 580, 680, 780]
    assert backend.read_at == [0]
    assert (result.vertex_calls, result.storage_calls) == (10, 1)
    seen = [(o["outcome"], o["requeues"], o["beacon"], o["channel"]) for o in result.observations]
    assert seen == [
        ("PENDING", 0, None, "beacon"),
        ("RUNNING", 0, [0, "running"], "comment"),
        ("PENDING", 1, [0, "exiting"], "comment"),
        ("RUNNING", 1, [1, "running"], "comment"),
        ("SUCCEEDED", 1, [1, "exiting"], "comment"),
    ]


def test_a_notice_in_the_comment_brings_the_next_call_to_the_expect_interval():
    plan = poll_plan.PollPlan(poll_plan.PlanSettings.for_poll_seconds(20))
    notice = Beacon("9", 0, "notice", 200, 200)
    plan.look(205, None, read=False)
    plan.called(205, "RUNNING", notice, "comment", 0)
    assert plan.next_look() == 10
    assert not plan.look(214, notice, read=False)
    assert plan.look(215, notice, read=False)
    assert plan.reason == "the job's comment says notice, Vertex said RUNNING"


@pytest.mark.parametrize(
    ("then", "line"),
    [
        ("requeued", "job 9 was preempted and requeued (1 time(s) so far)"),
        ("restarted in place", "job 9 was preempted and restarted in place (1 time(s) so far)"),
    ],
)
def test_a_preemption_is_told_in_the_backends_words(then, line, caplog, monkeypatch):
    clock = polling.FakeClock()
    backend = CommentBackend(clock)
    monkeypatch.setattr(backend, "preempted_then", then)
    caplog.set_level(logging.WARNING, logger="vsp.components.runtime.training.supervisor")
    supervisor(backend, clock).run()
    assert [m for m in caplog.messages if "preempted" in m] == [line]
