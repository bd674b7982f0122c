"""The stall rule on scripted progress reads, and what the supervisor does with a hang or a
timeout (a scripted backend and a fake clock)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from vsp.components.runtime.core import errors, polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.trainer import progress
from vsp.components.runtime.training import hang
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.recovery import Attempt, SpotRecovery, Target
from vsp.components.runtime.training.supervisor import TrainingSupervisor

SPOT = Target("spot", spot=True)
FAST = polling.Backoff(initial=1, maximum=1, jitter=0)


def record(step, time, *, rank=0, phase="step", step_seconds=0.0, pid=10, restart=0, beat=None):
    host = f"node-{rank}"
    beating = beat is not None
    beat = time if beat is None else beat
    return progress.Progress(
        "7", restart, rank, host, pid, step, phase, time, step_seconds, beat, beating
    )


def test_a_rank_without_progress_for_longer_than_the_floor_is_hung():
    watch = hang.HangWatch(hang.HangRule(floor_seconds=60, step_factor=20))
    assert watch.observe("7", 0, [record(10, 1000.0, step_seconds=0.5)], now=0) is None
    assert watch.observe("7", 0, [record(10, 1000.0, step_seconds=0.5)], now=60) is None
    stall = watch.observe("7", 0, [record(10, 1000.0, step_seconds=0.5)], now=61)
    assert (stall.step, stall.seconds, stall.bound, stall.rank) == (10, 61, 60, 0)
    assert stall.describe().startswith("hung at step 10 for 61 s")
    assert "rank 0 on node-0 stopped" in stall.describe()


def test_the_bound_follows_the_observed_step_time():
    watch = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=20))
    watch.observe("7", 0, [record(1, 100.0)], now=0)
    watch.observe("7", 0, [record(2, 105.0)], now=5)  # 5 s between writes: bound 100 s
    assert watch.observe("7", 0, [record(2, 105.0)], now=104) is None
    assert watch.observe("7", 0, [record(2, 105.0)], now=106).bound == 100


def test_reads_once_per_bound_keep_the_bound_at_the_step_rate():
    """A rank making a step a second, read about once per bound: the bound stays the floor (the
    time per step is 1 s, not the minute between two reads), so a stop is found a bound late."""
    watch = hang.HangWatch(hang.HangRule(floor_seconds=60, step_factor=20))
    now = 0.0
    for _ in range(5):
        assert watch.observe("7", 0, [record(int(now), 1000.0 + now)], now=now) is None
        assert not watch.due("7", now + 60)
        now += 61
    frozen = int(now - 61)  # no step since the last read
    assert watch.due("7", now) and watch.observe("7", 0, [record(frozen, 939.0 + now)], now=now)


def test_a_rank_last_seen_saving_is_read_again_at_its_step_bound():
    """The save ended just after the read and the rank stopped in its next step: that stall is
    due a step bound after the save ended, not at the save's wider bound."""
    watch = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=1))
    watch.observe("7", 0, [record(20, 100.0, phase="saving")], now=0)
    assert not watch.due("7", 10) and watch.due("7", 10.5)  # not at 3 x 10 s
    assert watch.observe("7", 0, [record(20, 100.0, phase="saving")], now=10.5) is None
    watch.observe("7", 0, [record(25, 101.0, phase="step")], now=11)  # the save ended; stopped
    assert watch.due("7", 21.5)
    assert watch.observe("7", 0, [record(25, 101.0)], now=21.5).step == 25


def test_the_start_up_is_not_counted_and_a_save_has_a_wider_bound():
    watch = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=2))
    assert watch.observe("7", 0, [], now=0) is None  # starting: no file yet
    assert watch.observe("7", 0, [], now=500) is None
    watch.observe("7", 0, [record(5, 10.0, phase="saving")], now=500)
    assert watch.observe("7", 0, [record(5, 10.0, phase="saving")], now=530) is None  # 3 x 10 s
    watch.observe("7", 0, [record(5, 30.0)], now=530)  # a save of 20 s finished
    assert watch.observe("7", 0, [record(5, 30.0)], now=541).step == 5
    watch.observe("7", 0, [record(6, 31.0, phase="saving")], now=541)
    # The bound of the next save is 2 x the longest save seen: 40 s.
    assert watch.observe("7", 0, [record(6, 31.0, phase="saving")], now=581) is None
    stall = watch.observe("7", 0, [record(6, 31.0, phase="saving")], now=582)
    assert (stall.step, stall.bound, stall.saving) == (6, 40, True)
    assert "rank 0 on node-0 (in a blocking save) stopped" in stall.describe()


def test_a_file_of_the_run_before_a_requeue_is_start_up_of_the_next():
    watch = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=1))
    watch.observe("7", 0, [record(5, 10.0)], now=0)
    assert watch.observe("7", 1, [record(5, 10.0)], now=100) is None  # restart 1 not started
    watch.observe("7", 1, [record(5, 150.0, restart=1, pid=11)], now=101)
    assert watch.observe("7", 1, [record(5, 150.0, restart=1, pid=11)], now=110) is None
    assert watch.observe("7", 1, [record(5, 150.0, restart=1, pid=11)], now=112) is not None


def test_several_ranks_name_the_one_that_stopped():
    watch = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=1))
    watch.observe("7", 0, [record(3, 0.0, rank=0), record(3, 0.0, rank=1)], now=0)
    going = [record(9, 11.0, rank=0), record(3, 0.0, rank=1)]
    stall = watch.observe("7", 0, going, now=11)
    assert (stall.rank, stall.host, stall.all_stalled) == (1, "node-1", False)
    assert "rank 1 on node-1 (of 2 ranks; the others went on) stopped" in stall.describe()
    both = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=1))
    both.observe("7", 0, [record(4, 0.0, rank=0), record(3, 0.0, rank=1)], now=0)
    stall = both.observe("7", 0, [record(4, 0.0, rank=0), record(3, 0.0, rank=1)], now=11)
    assert (stall.rank, stall.step, stall.all_stalled) == (1, 3, True)


def test_a_rank_that_stopped_altogether_is_named_over_the_ranks_alive_waiting_for_it():
    # Both ranks at step 55 (rank 0 blocked in the collective rank 1 never joins); rank 0's
    # heartbeat goes on, rank 1's stopped. Seen stalled together, rank 1 is named.
    watch = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=1))
    frozen = record(55, 0.0, rank=1, beat=0.0)
    watch.observe("7", 0, [record(55, 0.0, rank=0, beat=0.0), frozen], now=0)
    for now in range(1, 11):
        beats = [record(55, 0.0, rank=0, beat=float(now)), frozen]
        assert watch.observe("7", 0, beats, now=now) is None  # a beat is no step
    stall = watch.observe("7", 0, [record(55, 0.0, rank=0, beat=11.0), frozen], now=11)
    assert (stall.rank, stall.host, stall.step, stall.silent) == (1, "node-1", 55, True)
    assert "rank 1 on node-1 (of 2 ranks; its process stopped altogether" in stall.describe()
    assert "its process stopped altogether, while the others are alive" in stall.describe()
    # Every rank silent (the whole job stopped): the lowest step, then the lowest rank.
    gone = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=1))
    both = [record(55, 0.0, rank=0, beat=0.0), frozen]
    gone.observe("7", 0, both, now=0)
    stall = gone.observe("7", 0, both, now=11)
    assert (stall.rank, stall.silent, stall.all_stalled) == (0, False, True)
    # Without heartbeats (files of an older trainer) the same.
    old = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=1))
    old.observe("7", 0, [record(55, 0.0, rank=0), record(55, 0.0, rank=1)], now=0)
    stall = old.observe("7", 0, [record(55, 0.0, rank=0), record(55, 0.0, rank=1)], now=11)
    assert (stall.rank, stall.silent, stall.all_stalled) == (0, False, True)


def test_a_rank_that_beat_after_one_read_and_then_stopped_is_named_at_the_next_read():
    # Reads come once per bound: rank 1 beat twice after the first read, then froze at 2 s;
    # rank 0 beats on. At the next read both beats changed since the first, but rank 1's is
    # 9 s older than rank 0's: it stopped altogether (a real 2-node run once named both).
    watch = hang.HangWatch(hang.HangRule(floor_seconds=8, step_factor=1))
    watch.observe("7", 0, [record(51, 0.0, rank=0, beat=0.0), record(51, 0.0, rank=1, beat=0.0)], 0)
    read = [record(51, 0.0, rank=0, beat=11.0), record(51, 0.0, rank=1, beat=2.0)]
    stall = watch.observe("7", 0, read, now=11)
    assert (stall.rank, stall.silent, stall.all_stalled) == (1, True, True)
    # Beats of one age (within half the bound): no rank is told apart.
    alike = hang.HangWatch(hang.HangRule(floor_seconds=8, step_factor=1))
    alike.observe("7", 0, [record(51, 0.0, rank=0, beat=0.0), record(51, 0.0, rank=1, beat=0.0)], 0)
    read = [record(51, 0.0, rank=0, beat=11.0), record(51, 0.0, rank=1, beat=7.5)]
    assert alike.observe("7", 0, read, now=11).silent is False


def test_the_reporter_heartbeat_writes_the_pending_step_then_only_the_beat(tmp_path):
    reporter = progress.Reporter(tmp_path, "42", interval=0.05, heartbeat=True, host="n-3")
    reporter.step(1)
    reporter.step(2)  # within the interval: pending
    first = progress.read_job(tmp_path, "42")[0]
    assert (first.step, first.host) == (1, "n-3")
    time.sleep(0.3)
    flushed = progress.read_job(tmp_path, "42")[0]
    assert flushed.step == 2 and flushed.time > first.time  # the heartbeat wrote step 2
    time.sleep(0.3)
    later = progress.read_job(tmp_path, "42")[0]
    assert (later.step, later.time) == (2, flushed.time) and later.beat > flushed.beat


def test_a_floor_of_zero_turns_detection_off():
    watch = hang.HangWatch(hang.HangRule(floor_seconds=0))
    watch.observe("7", 0, [record(1, 0.0)], now=0)
    assert watch.observe("7", 0, [record(1, 0.0)], now=10**6) is None


def test_the_reporter_writes_rate_limited_and_marks_saves(tmp_path):
    now = [100.0]
    reporter = progress.Reporter(tmp_path, "42", rank=1, interval=5, clock=lambda: now[0])
    path = tmp_path / "progress" / "42.1.json"
    reporter.step(1)
    assert json.loads(path.read_text())["step"] == 1
    now[0] = 101.0
    reporter.step(2)  # within the interval: not written
    assert json.loads(path.read_text())["step"] == 1
    with reporter.saving():
        assert json.loads(path.read_text())["phase"] == "saving"
        now[0] = 130.0
    written = json.loads(path.read_text())
    assert (written["phase"], written["step"], written["step_seconds"]) == ("step", 2, 1.0)
    now[0] = 131.0
    reporter.step(3)  # the 29 s save is not a step's time
    assert progress.read_job(tmp_path, "42")[0].step_seconds == pytest.approx(1.0)


def test_past_the_final_checkpoint_a_slow_exit_has_the_save_bound_and_a_stuck_one_is_named():
    # A torch process group's teardown and the interpreter's exit once took longer than the
    # step bound after the model was written, and the finished job was cancelled as hung.
    watch = hang.HangWatch(hang.HangRule(floor_seconds=3, step_factor=1))
    watch.observe("7", 0, [record(120, 50.0, phase="finishing")], now=0)
    assert watch.observe("7", 0, [record(120, 50.0, phase="finishing")], now=8.9) is None
    stall = watch.observe("7", 0, [record(120, 50.0, phase="finishing")], now=9.1)
    assert (stall.step, stall.bound, stall.finishing, stall.saving) == (120, 9, True, False)
    assert "rank 0 on node-0 (after its final checkpoint: writing the model or exiting)" in (
        stall.describe()
    )


def test_a_final_save_marks_the_progress_file_finishing_until_training_goes_on(
    tmp_path, monkeypatch
):
    from vsp.components.runtime.trainer import checkpoint, contract  # noqa: PLC0415

    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv(contract.CHECKPOINT_DIR_ENV, str(tmp_path))
    monkeypatch.setenv(progress.INTERVAL_ENV, "0")  # every step written
    monkeypatch.setattr(progress, "_active", [])
    progress.step(7)
    checkpoint.save(tmp_path, 7, {"w": np.zeros(2)}, {}, reason="periodic")
    assert progress.read_job(tmp_path, "42")[0].phase == "step"
    with progress.saving():  # a trainer marking its own save around the library's
        checkpoint.save(tmp_path, 8, {"w": np.zeros(2)}, {}, reason="final")
        assert progress.read_job(tmp_path, "42")[0].phase == "saving"
    assert progress.read_job(tmp_path, "42")[0].phase == "finishing"
    progress.step(9)
    assert progress.read_job(tmp_path, "42")[0].phase == "step"


class HangingBackend(TrainingBackend):
    """Jobs that run without ever ending; the first one's progress stops at step 12."""

    resource_type = "SlurmJob"

    def __init__(self, clock):
        self.clock, self.submitted, self.cancelled = clock, [], []

    def find(self, run_key):
        return []

    def submit(self, run_key, index, target):
        self.submitted.append(str(100 + index))
        return Attempt(self.submitted[-1], target)

    def refresh(self, attempt):
        cancelled = attempt.job_id in self.cancelled
        attempt.outcome = Outcome.CANCELLED if cancelled else Outcome.RUNNING

    def cancel(self, attempt):
        self.cancelled.append(attempt.job_id)

    def uri(self, attempt):
        return f"jobs/{attempt.job_id}"

    def progress(self, attempt):
        moving = int(self.clock.now()) if attempt.job_id != "100" else 12
        return [progress.Progress(attempt.job_id, 0, 0, "n", 1, moving, "step", moving, 1.0)]

    def log_tail(self, attempt):
        return "step 12/100"


def supervisor(backend, clock, **options):
    return TrainingSupervisor(
        backend,
        SpotRecovery(SPOT, max_hangs=options.pop("max_hangs", 1)),
        "run-1",
        backoff=FAST,
        clock=clock,
        hang_rule=hang.HangRule(floor_seconds=30, step_factor=1),
        **options,
    )


def test_a_hung_job_is_cancelled_and_resubmitted_then_the_timeout_cancels_the_next():
    clock = polling.FakeClock()
    backend = HangingBackend(clock)
    with pytest.raises(errors.TransientError) as info:
        supervisor(backend, clock, timeout=200).run()
    assert backend.submitted == ["100", "101"]
    assert backend.cancelled == ["100", "101"]  # hung, then the timeout
    assert "Job 101 was cancelled (set keep_job_on_timeout" in str(info.value)


def test_keep_job_on_timeout_leaves_the_job_running():
    clock = polling.FakeClock()
    backend = HangingBackend(clock)
    loop = supervisor(backend, clock, timeout=200, keep_job_on_timeout=True, max_hangs=1)
    with pytest.raises(errors.TransientError) as info:
        loop.run()
    assert backend.cancelled == ["100"]
    assert "Job 101 was left running (keep_job_on_timeout)" in str(info.value)
    first = loop.attempts[0]
    assert first.hung_because.startswith("hung at step 12 for 3")
    # Found after 31 s without progress (one-second polls): 200 - 31 s of the run were left.
    assert first.hang_saved_seconds == pytest.approx(169, abs=1)


def test_hangs_beyond_the_budget_fail_as_a_user_error_with_the_log_tail():
    clock = polling.FakeClock()
    with pytest.raises(errors.UserError) as info:
        supervisor(HangingBackend(clock), clock, timeout=500, max_hangs=0).run()
    text = str(info.value)
    assert "hung at step 12" in text and "budget max_hangs=0" in text
    assert text.endswith("last lines of the job's log:\nstep 12/100")


def test_progress_is_read_only_when_a_stall_could_be_declared():
    watch = hang.HangWatch(hang.HangRule(floor_seconds=100, step_factor=1))
    assert watch.due("7", 0)  # nothing seen yet: read
    watch.observe("7", 0, [], 0)
    assert not watch.due("7", 10) and watch.due("7", 25)  # no record yet: every floor / 4
    watch.observe("7", 0, [record(1, 25)], 25)
    assert not watch.due("7", 125)  # the bound after the last change: not yet passed
    assert watch.due("7", 125.5)
    # A requeue drops the earlier run's ranks: until the new run writes, every floor / 4.
    watch.observe("7", 1, [record(1, 25)], 130)
    assert not watch.due("7", 150) and watch.due("7", 155)


def test_a_change_is_placed_at_its_write_time_between_two_reads():
    watch = hang.HangWatch(hang.HangRule(floor_seconds=100, step_factor=1))
    watch.observe("7", 0, [record(1, 1000.0)], 0, wall=1000.0)
    # Read 90 s later on the step's clock: the record was written 30 s before the read (its
    # cluster time), so the stall bound counts from then, not from the read.
    assert watch.observe("7", 0, [record(2, 1060.0)], 90, wall=1090.0) is None
    assert watch.observe("7", 0, [record(2, 1060.0)], 160, wall=1160.0) is None
    stall = watch.observe("7", 0, [record(2, 1060.0)], 161, wall=1161.0)
    assert stall is not None and stall.seconds == pytest.approx(101)
    # A write time outside the two reads (skewed clocks): the read's own time.
    other = hang.HangWatch(hang.HangRule(floor_seconds=100, step_factor=1))
    other.observe("7", 0, [record(1, 5.0)], 0, wall=1000.0)
    assert other.observe("7", 0, [record(2, 9.0)], 90, wall=1090.0) is None
    assert other.observe("7", 0, [record(2, 9.0)], 190, wall=1190.0) is None


def test_ranks_stalled_at_one_step_with_heartbeats_are_not_blamed_one_by_one():
    # A rank stuck in Python inside step 30 holds the other in the step's all-reduce: both show
    # step 30 and beat on. Before, the message named rank 0 (the lower rank) as the one that
    # stopped, whichever it was.
    watch = hang.HangWatch(hang.HangRule(floor_seconds=10, step_factor=1))
    watch.observe(
        "7", 0, [record(30, 0.0, rank=0, beat=0.0), record(30, 0.0, rank=1, beat=0.0)], now=0
    )
    beats = [record(30, 0.0, rank=0, beat=11.0), record(30, 0.0, rank=1, beat=11.0)]
    stall = watch.observe("7", 0, beats, now=11)
    assert (stall.step, stall.all_stalled, stall.silent, stall.tied) == (30, True, False, 2)
    assert stall.describe() == (
        "hung at step 30 for 11 s: no training step finished for longer than the bound of 10 s; "
        "2 of 2 ranks stopped at that step, none ahead (one stuck inside the step holds the "
        "others in its collective; which one, progress cannot tell: each rank's last log lines "
        "can)"
    )


class LoggingHangBackend(HangingBackend):
    """The hung job's log gets its last lines as it is cancelled."""

    def __init__(self, clock):
        super().__init__(clock)
        self.pending = {"100": ["saved step 10 (periodic)", "rank 1 stuck in step 12"]}

    def new_log_lines(self, attempt):
        # Written late (Slurm flushes a job's output as it ends it): there after the cancel.
        if attempt.job_id not in self.cancelled:
            return []
        return self.pending.pop(attempt.job_id, [])


def test_a_hung_jobs_last_log_lines_are_logged_after_its_cancel(caplog):
    # Before, log reads between polls were throttled and none followed the cancel: the lines
    # that told where the job hung stayed in its file only.
    clock = polling.FakeClock()
    backend = LoggingHangBackend(clock)
    with caplog.at_level("INFO"), pytest.raises(errors.TransientError):
        supervisor(backend, clock, timeout=200).run()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[job 100]")]
    assert lines == ["[job 100] saved step 10 (periodic)", "[job 100] rank 1 stuck in step 12"]
