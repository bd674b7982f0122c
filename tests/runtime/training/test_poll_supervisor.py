"""The supervisor's polls under the poll plan: Vertex is called when the beacon says so."""

from __future__ import annotations

from vsp.components.runtime.core import polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training import driver, poll_plan
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

    def beacon(self, attempt):
        now = self.clock.now()
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


def test_vertex_is_called_at_the_start_the_cap_and_the_end_only():
    clock = polling.FakeClock()
    backend = TimedBackend(clock, start=30, end=500)
    result = supervisor(backend, clock).run()
    assert [a.outcome for a in result.attempts] == [Outcome.SUCCEEDED]
    # 0: first look (PENDING); 35: the beacon appeared (RUNNING); 275: the cap (240 s);
    # 500: the beacon says exiting (SUCCEEDED).
    assert backend.refreshed_at == [0, 35, 275, 500]
    assert result.vertex_calls == 4
    assert result.seconds == 500


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
    assert poll_plan.call_metrics(30, 1800) == {
        "vertex_calls": 30.0,
        "vertex_calls_per_job_hour": 60.0,
    }
    assert poll_plan.call_metrics(2, 0) == {"vertex_calls": 2.0}


def test_component_options_scale_the_plan_from_poll_seconds():
    options = driver.component_options(
        spot_price=1, ondemand_price=2, poll_seconds=20, timeout_seconds=60,
        gcp_resources_path="", report_path="/dev/null",
    )  # fmt: skip
    settings = options["poll_settings"]
    assert (
        settings.beacon_seconds, settings.expect_seconds, settings.stale_seconds,
        settings.fallback_seconds, settings.pending_seconds, settings.cap_seconds,
        settings.heartbeat_seconds,
    ) == (5, 10, 30, 20, 60, 240, 15)  # fmt: skip
