"""The recovery loop, driven through a scripted fake backend and a fake clock."""

from __future__ import annotations

import os
import signal

import pytest

from vsp.components.runtime.core import errors, gcp_resources, polling
from vsp.components.runtime.core.errors import StepCancelled
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.recovery import Attempt, SpotRecovery, Target
from vsp.components.runtime.training.supervisor import TrainingSupervisor

SPOT, ONDEMAND = Target("spot", spot=True), Target("ondemand", spot=False)
FAST = polling.Backoff(initial=1, maximum=1, jitter=0)


class ScriptedBackend(TrainingBackend):
    """Each submitted job plays the next script: a list of (outcome, requeues[, exit_code])."""

    resource_type = "SlurmJob"

    def __init__(self, scripts, existing=()):
        self.scripts = list(scripts)
        self.jobs: dict[str, list] = {}
        self.submitted: list[tuple[str, str]] = []
        self.cancelled: list[str] = []
        self.existing = list(existing)
        self.on_refresh = None

    def find(self, run_key):
        return [Attempt(job_id, target) for job_id, target in self.existing]

    def submit(self, run_key, index, target):
        job_id = str(100 + len(self.submitted) + len(self.existing))
        self.jobs[job_id] = list(self.scripts.pop(0))
        self.submitted.append((job_id, target.name))
        return Attempt(job_id, target)

    def refresh(self, attempt):
        if self.on_refresh:
            self.on_refresh(attempt)
        script = self.jobs[attempt.job_id]
        step = script.pop(0) if len(script) > 1 else script[0]
        attempt.outcome, attempt.requeues = step[0], step[1]
        attempt.exit_code = step[2] if len(step) > 2 else None
        attempt.detail = f"script {attempt.job_id}"

    def cancel(self, attempt):
        self.cancelled.append(attempt.job_id)
        self.jobs[attempt.job_id] = [(Outcome.CANCELLED, attempt.requeues)]

    def uri(self, attempt):
        return f"https://h/v1beta1/projects/p/locations/l/modelDevelopmentClusters/c/jobs/{attempt.job_id}"

    def log_tail(self, attempt):
        return "Traceback...\nValueError: bad learning rate"


R, P, OK = Outcome.RUNNING, Outcome.PENDING, Outcome.SUCCEEDED


def supervise(backend, tmp_path=None, **strategy):
    return TrainingSupervisor(
        backend,
        SpotRecovery(SPOT, strategy.pop("fallback", None), **strategy),
        "run-1",
        gcp_resources_path=str(tmp_path / "gcp_resources") if tmp_path else "",
        backoff=FAST,
        clock=polling.FakeClock(),
    )


def test_first_attempt_succeeds_and_is_recorded_before_polling(tmp_path):
    backend = ScriptedBackend([[(P, 0), (R, 0), (OK, 0)]])
    recorded_at_first_poll = []
    backend.on_refresh = lambda a: recorded_at_first_poll.append(
        gcp_resources.read(str(tmp_path / "gcp_resources"))
    )
    result = supervise(backend, tmp_path).run()
    assert result.job_ids == ["100"] and result.preemptions == 0
    assert [r.name.rsplit("/", 1)[-1] for r in recorded_at_first_poll[0]] == ["100"]


def test_requeue_in_place_counts_as_preemption_without_resubmitting():
    backend = ScriptedBackend([[(R, 0), (P, 1), (R, 1), (P, 2), (R, 2), (OK, 2)]])
    result = supervise(backend, max_preemptions=5).run()
    assert backend.submitted == [("100", "spot")]
    assert result.preemptions == 2 and result.resubmissions == 0


def test_preempted_job_is_resubmitted_on_the_same_target():
    backend = ScriptedBackend([[(R, 0), (Outcome.PREEMPTED, 0)], [(R, 0), (OK, 0)]])
    result = supervise(backend, max_preemptions=3).run()
    assert backend.submitted == [("100", "spot"), ("101", "spot")]
    assert result.preemptions == 1 and result.resubmissions == 1


def test_fallback_after_k_preemptions():
    preempted = [(R, 0), (Outcome.PREEMPTED, 0)]
    backend = ScriptedBackend([preempted, preempted, [(R, 0), (OK, 0)]])
    result = supervise(backend, fallback=ONDEMAND, fallback_after=2, max_preemptions=5).run()
    assert [t for _, t in backend.submitted] == ["spot", "spot", "ondemand"]
    assert result.preemptions == 2


def test_fallback_after_k_in_place_requeues_cancels_and_moves():
    backend = ScriptedBackend([[(R, 0), (P, 1), (R, 1), (P, 2), (R, 2)], [(R, 0), (OK, 0)]])
    result = supervise(backend, fallback=ONDEMAND, fallback_after=2, max_preemptions=5).run()
    assert backend.cancelled == ["100"]
    assert backend.submitted == [("100", "spot"), ("101", "ondemand")]
    assert result.attempts[0].outcome is Outcome.CANCELLED
    assert "fallback_after=2" in result.attempts[0].detail


def test_user_failure_budget_exhausted_names_exit_code_and_log_tail():
    failed = [(R, 0), (Outcome.USER_FAILURE, 0, 3)]
    backend = ScriptedBackend([failed, failed])
    with pytest.raises(errors.UserError) as info:
        supervise(backend, max_user_failures=1).run()
    assert len(backend.submitted) == 2
    assert "exit code 3" in str(info.value)
    assert "ValueError: bad learning rate" in str(info.value)


def test_preemption_budget_exhausted_is_transient():
    preempted = [(R, 0), (Outcome.PREEMPTED, 0)]
    backend = ScriptedBackend([preempted] * 3)
    with pytest.raises(errors.TransientError, match="preemption budget exhausted: 3") as info:
        supervise(backend, max_preemptions=2).run()
    # The last attempt's log tail too (it was left out of every error but a user failure).
    tail = "last lines of the job's log:\nTraceback...\nValueError: bad learning rate"
    assert str(info.value).endswith(tail)


def test_capacity_deadline_moves_a_pending_spot_job_to_the_fallback():
    backend = ScriptedBackend([[(P, 0)], [(R, 0), (OK, 0)]])
    result = supervise(backend, fallback=ONDEMAND, capacity_wait_seconds=30).run()
    assert backend.cancelled == ["100"]
    assert [t for _, t in backend.submitted] == ["spot", "ondemand"]
    assert "no Spot capacity after 31 s" in result.attempts[0].detail


class RequeueHoldBackend(ScriptedBackend):
    """Pending after a requeue is Slurm's begin-time hold (reason BeginTime), as on Slurm 24.11."""

    def refresh(self, attempt):
        super().refresh(attempt)
        attempt.begin_time_hold = attempt.outcome is P and attempt.requeues > 0


def test_requeue_hold_is_not_counted_as_missing_spot_capacity():
    # Slurm holds a requeued job about 121 s (cred_expire) whatever the capacity; 60 polls of
    # 1 s pending in that hold must not trip a 30 s capacity deadline.
    held = [(P, 1)] * 60
    backend = RequeueHoldBackend([[(R, 0), *held, (R, 1), (OK, 1)]])
    result = supervise(backend, fallback=ONDEMAND, capacity_wait_seconds=30).run()
    assert backend.cancelled == [] and backend.submitted == [("100", "spot")]
    assert result.preemptions == 1


def test_pending_without_the_hold_still_trips_the_capacity_deadline():
    backend = ScriptedBackend([[(R, 0), *[(P, 1)] * 60], [(R, 0), (OK, 0)]])
    supervise(backend, fallback=ONDEMAND, capacity_wait_seconds=30).run()
    assert backend.cancelled == ["100"]
    assert [t for _, t in backend.submitted] == ["spot", "ondemand"]


def test_capacity_deadline_without_fallback_fails_the_run():
    backend = ScriptedBackend([[(P, 0)]])
    with pytest.raises(errors.TransientError, match="no Spot capacity.*no fallback target"):
        supervise(backend, capacity_wait_seconds=30).run()
    assert backend.cancelled == ["100"]


def test_retried_step_reattaches_to_the_running_job(tmp_path):
    backend = ScriptedBackend([], existing=[("99", SPOT)])
    backend.jobs["99"] = [(R, 0), (OK, 0)]
    result = supervise(backend, tmp_path).run()
    assert backend.submitted == [] and result.reattached
    assert result.job_ids == ["99"]
    (recorded,) = gcp_resources.read(str(tmp_path / "gcp_resources"))
    assert recorded.uri.endswith("/jobs/99")


def test_retried_step_keeps_counting_earlier_preemptions():
    backend = ScriptedBackend([[(R, 0), (OK, 0)]], existing=[("98", SPOT), ("99", SPOT)])
    backend.jobs["98"] = [(Outcome.PREEMPTED, 0)]
    backend.jobs["99"] = [(Outcome.PREEMPTED, 0)]
    result = supervise(backend, fallback=ONDEMAND, fallback_after=2, max_preemptions=5).run()
    assert backend.submitted == [("102", "ondemand")]
    assert result.preemptions == 2 and result.job_ids == ["98", "99", "102"]


def test_sigterm_cancels_the_running_job_before_the_step_exits():
    backend = ScriptedBackend([[(R, 0)]])
    before = signal.getsignal(signal.SIGTERM)
    calls = {"n": 0}

    def cancel_after_two_polls(attempt):
        calls["n"] += 1
        if calls["n"] == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    backend.on_refresh = cancel_after_two_polls
    with pytest.raises(StepCancelled):
        supervise(backend).run()
    assert backend.cancelled == ["100"]
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is restored


@pytest.fixture
def ctrl_c_delivered():
    """SIGINT raises KeyboardInterrupt, as in a terminal: a job a script started in the
    background inherits it ignored, and the supervisor leaves an ignored SIGINT ignored (the
    test then polled on for ever)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_cancels_the_running_job_too_and_a_second_one_waits_for_the_cleanup(
    ctrl_c_delivered,
):
    backend = ScriptedBackend([[(R, 0)]])
    before = signal.getsignal(signal.SIGINT)
    calls = {"n": 0}

    def interrupt_after_two_polls(attempt):
        calls["n"] += 1
        assert calls["n"] <= 3, "the Ctrl-C did not stop the run"
        if calls["n"] == 2:
            os.kill(os.getpid(), signal.SIGINT)  # the terminal's Ctrl-C (kfp.local's steps)
        if calls["n"] == 3:  # the cleanup's refresh: a second Ctrl-C is ignored meanwhile
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)

    backend.on_refresh = interrupt_after_two_polls
    with pytest.raises(KeyboardInterrupt):
        supervise(backend).run()
    assert backend.cancelled == ["100"] and calls["n"] == 3  # the cleanup refreshed it once
    assert signal.getsignal(signal.SIGINT) is before


def test_timeline_records_each_state_change_and_requeue():
    backend = ScriptedBackend([[(P, 0), (R, 0), (P, 1), (R, 1), (OK, 1)]])
    ticks = iter(range(1000))
    supervisor = supervise(backend, max_preemptions=3)
    supervisor.wall = lambda: float(next(ticks))
    result = supervisor.run()
    assert [(e["job_id"], e["event"]) for e in result.events] == [
        ("100", "submitted"),
        ("100", "running"),
        ("100", "requeued"),
        ("100", "pending"),
        ("100", "running"),
        ("100", "succeeded"),
    ]


def test_requeues_past_the_preemption_budget_cancel_the_job_and_fail():
    # Slurm requeues a preempted job in place: the job never ends PREEMPTED, so the budget is
    # held against its requeues while it runs. Before, three requeues with a budget of 2 ran on.
    backend = ScriptedBackend([[(R, 0), (R, 1), (R, 2), (R, 3), (R, 3), (OK, 3)]])
    with pytest.raises(errors.TransientError) as info:
        supervise(backend, max_preemptions=2, fallback=ONDEMAND, fallback_after=5).run()
    assert backend.cancelled == ["100"] and backend.submitted == [("100", "spot")]
    assert str(info.value).startswith(
        "training did not finish: preemption budget exhausted: 3 preemptions (job 100 requeued "
        "3 time(s)), budget 2: "
        "cancelling it. Raise max_preemptions or set a fallback target."
    )


def test_requeues_within_the_budget_run_on():
    backend = ScriptedBackend([[(R, 0), (R, 1), (R, 2), (OK, 2)]])
    result = supervise(backend, max_preemptions=2).run()
    assert backend.cancelled == [] and result.preemptions == 2
