"""Running stretches from polls: a requeue between two polls that both see RUNNING closes the old
stretch and opens a new one at the new run's start; starts and ends use the backend's times."""

from __future__ import annotations

from vsp.components.runtime.core import polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training import metrics
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.poll_window import PollWindow
from vsp.components.runtime.training.recovery import Attempt, SpotRecovery, Target
from vsp.components.runtime.training.supervisor import TrainingSupervisor

SPOT = Target("spot", spot=True)
R, P, OK = Outcome.RUNNING, Outcome.PENDING, Outcome.SUCCEEDED
POLL = polling.Backoff(initial=10, maximum=10, jitter=0)


class TimedBackend(TrainingBackend):
    """One job; each poll plays the next (outcome, restart count, run start, end) row, with
    the requeue's time (Slurm's submit time after a requeue) as an optional fifth field."""

    resource_type = "SlurmJob"

    def __init__(self, rows):
        self.rows = list(rows)

    def find(self, run_key):
        return []

    def submit(self, run_key, index, target):
        return Attempt("1", target)

    def refresh(self, attempt):
        row = self.rows.pop(0) if len(self.rows) > 1 else self.rows[0]
        attempt.outcome, attempt.requeues, attempt.run_started_at, attempt.ended_at = row[:4]
        attempt.requeued_at = row[4] if len(row) > 4 else None

    def cancel(self, attempt):
        raise AssertionError("nothing is cancelled here")

    def uri(self, attempt):
        return f"https://h/jobs/{attempt.job_id}"


def run(rows, start=1000.0):
    clock = polling.FakeClock(start)
    supervisor = TrainingSupervisor(
        TimedBackend(rows),
        SpotRecovery(SPOT, max_preemptions=5),
        "run-1",
        backoff=POLL,
        clock=clock,
        wall=clock.now,
    )
    result = supervisor.run()
    return result, metrics.run_intervals(result, clock.now())


def stretches(intervals):
    return [(i.start, i.end, i.ended_by) for i in intervals]


def test_a_requeue_between_two_running_polls_splits_the_stretch_at_the_new_start():
    # Polls at 1000, 1010, 1020, 1030: the job started at 1000, was requeued and started again
    # at 1016 (between the polls at 1010 and 1020, which both see RUNNING), and ended at 1027.
    result, intervals = run(
        [(R, 0, 1000.0, None), (R, 0, 1000.0, None), (R, 1, 1016.0, None), (OK, 1, 1016.0, 1027.0)]
    )
    assert result.preemptions == 1
    assert stretches(intervals) == [(1000.0, 1016.0, "requeued"), (1016.0, 1027.0, "succeeded")]
    # Before, the second "running" never came: everything after the requeue was dropped.
    assert sum(i.end - i.start for i in intervals) == 27.0


def test_a_requeue_seen_pending_ends_at_that_poll_and_the_next_run_at_its_start_time():
    result, intervals = run(
        [(R, 0, 1000.0, None), (P, 1, None, None), (R, 1, 1013.0, None), (OK, 1, 1013.0, 1024.0)]
    )
    # Seen pending at the poll at 1010: it ended since the poll at 1000, so at 1005 +- 5.
    assert stretches(intervals) == [(1000.0, 1005.0, "requeued"), (1013.0, 1024.0, "succeeded")]
    assert [e["event"] for e in result.events] == [
        "submitted",
        "running",
        "requeued",
        "pending",
        "running",
        "succeeded",
    ]


def test_a_requeue_seen_only_after_the_next_start_ends_when_slurm_says_it_ended():
    # Polls at 1000, 1010, 1020, 1030 see RUNNING, then RUNNING restarted at 1016 (the pending
    # hold fell between two polls); Slurm's submit time says the requeue ended the old run at
    # 1012 (this backend's times are exact). Without it the old run would bill until 1016.
    result, intervals = run(
        [
            (R, 0, 1000.0, None),
            (R, 0, 1000.0, None),
            (R, 1, 1016.0, None, 1012.0),
            (OK, 1, 1016.0, 1027.0, 1012.0),
        ]
    )
    assert stretches(intervals) == [(1000.0, 1012.0, "requeued"), (1016.0, 1027.0, "succeeded")]
    assert sum(i.end - i.start for i in intervals) == 23.0


def test_a_requeue_seen_pending_is_narrowed_by_slurms_time_of_it():
    result, intervals = run(
        [(R, 0, 1000.0, None), (P, 1, None, None, 1003.0), (R, 1, 1013.0, None, 1003.0)]
        + [(OK, 1, 1013.0, 1024.0, 1003.0)]
    )
    # Seen pending at the poll at 1010; Slurm says 1003, not 1005 +- 5.
    assert stretches(intervals) == [(1000.0, 1003.0, "requeued"), (1013.0, 1024.0, "succeeded")]


def test_a_requeue_time_after_the_next_start_is_held_to_that_start():
    # A requeue time past the new run's start (clock skew) cannot make the stretches overlap.
    result, intervals = run(
        [(R, 0, 1000.0, None), (R, 0, 1000.0, None), (R, 1, 1016.0, None, 1018.0)]
        + [(OK, 1, 1016.0, 1027.0, 1018.0)]
    )
    assert stretches(intervals) == [(1000.0, 1016.0, "requeued"), (1016.0, 1027.0, "succeeded")]


def test_a_requeue_and_the_end_between_two_polls_still_bill_the_last_run():
    result, intervals = run([(R, 0, 1000.0, None), (OK, 2, 1004.0, 1008.0)])
    assert result.preemptions == 2
    assert stretches(intervals) == [(1000.0, 1004.0, "requeued"), (1004.0, 1008.0, "succeeded")]


def test_times_from_the_backend_never_go_past_now_nor_before_the_previous_event():
    # A start time in the future (clock skew) is taken as now; an end before the window as the
    # window's start.
    result, intervals = run([(R, 0, 1500.0, None), (P, 1, None, None), (OK, 1, 1012.0, 900.0)])
    assert stretches(intervals)[0] == (1000.0, 1005.0, "requeued")
    assert result.events[-1] == {"time": 1010.0, "job_id": "1", "event": "succeeded"}
    times = [e["time"] for e in result.events]
    assert times == sorted(times)


def test_the_poll_window_narrows_whole_second_times_and_bounds_the_error():
    now = [100.0]
    window = PollWindow(lambda: now[0], resolution=1.0, since=100.0)
    now[0] = 100.4
    window.open()
    now[0] = 100.5
    # Slurm says 100 (whole seconds): the change was in [100, 100.5] -> 100.25.
    assert window.when(100.0) == 100.25
    assert window.when() == 100.25
    window.close()
    now[0] = 102.0
    window.open()
    now[0] = 102.1
    # The window is [100.4, 102.1]; Slurm's 101 narrows it to [101, 102].
    assert window.when(101.0) == 101.5
    assert window.when(99.0) == 100.4  # before the window: its start
    assert window.when(105.0) == 102.1  # after it: its end


def test_a_write_of_the_running_job_starts_the_window_and_its_silence_ends_it():
    now = [0.0]
    window = PollWindow(lambda: now[0], resolution=1.0, since=0.0)
    now[0] = 500.0
    # The job wrote its beacon at 400 (heartbeat 100 s, reads at most 10 s stale): it was alive
    # then, so a requeue seen now happened after 400, not in [0, 500].
    window.alive(400.0, read_at=480.0, heartbeat=100.0, cache=10.0)
    assert window.when() == 450.0 and window.ended() == 450.0
    window.close()
    # A later read at 505 shows the same write: 505 - 10 < 400 + 100, the next beat may not
    # be visible yet, so nothing bounds the end but now.
    now[0] = 505.0
    window.alive(400.0, read_at=505.0, heartbeat=100.0, cache=10.0)
    assert window.ended() == 452.5
    window.close()
    # At 700 it still shows the 400 write although a live job rewrites it by 500: gone by 500.
    now[0] = 700.0
    window.alive(400.0, read_at=700.0, heartbeat=100.0, cache=10.0)
    assert window.ended() == 450.0  # within [400, 500], not the middle of [400, 700]
    assert window.when() == 550.0  # a start is not bounded by the old run's silence
    assert window.ended(400.0) == 400.5  # Slurm's whole second 400 -> [400, 401]
    assert window.ended(600.0) == 500.0  # a reported time past the bound moves to it
    window.close()
    # The bound holds for that poll only; a newer write lifts it.
    now[0] = 720.0
    assert window.ended() == 560.0  # [400, 720]: no Vertex call moved the start meanwhile
    window.alive(715.0, read_at=720.0, heartbeat=100.0, cache=10.0)
    assert window.previous == 715.0 and window.ended() == 717.5
    # A write dated ahead of now (clock skew) counts as now; no heartbeat promised: no bound.
    window.close()
    now[0] = 900.0
    window.alive(950.0, read_at=900.0)
    assert window.previous == 900.0 and window.ended() == 900.0


def test_the_last_write_of_a_lost_run_bounds_its_end_within_a_heartbeat():
    now = [1020.0]
    window = PollWindow(lambda: now[0], resolution=1.0, since=1010.0)
    assert not window.bounded
    window.last_write(1005.0, heartbeat=10.0)  # found by the next run: gone by 1015
    assert window.bounded and window.ended() == 1012.5  # [1010, 1015], not [1010, 1020]
    assert window.when() == 1015.0  # a start is not bounded by it
    window.close()
    assert not window.bounded
    window.last_write(1005.0, heartbeat=0.0)  # no heartbeat promised: no bound
    assert not window.bounded


def test_the_exit_a_run_tells_bounds_its_end_until_a_later_window_starts():
    now = [1000.0]
    window = PollWindow(lambda: now[0], resolution=1.0, since=900.0)
    window.final_write(950.0)  # its exit message, seen at a look that asked Vertex nothing
    window.close()
    now[0] = 1100.0  # Vertex asked only now (the next run has started)
    window.open()
    assert window.bounded and window.ended() == 950.5  # [950, 951], not [950, 1100]
    window.close()  # this poll's window started after the exit: it bounds nothing more
    now[0] = 1200.0
    window.open()
    assert not window.bounded and window.ended() == 1150.0


class BeaconRowsBackend(TimedBackend):
    """``TimedBackend`` whose job writes beacons: each read plays the next beacon row."""

    def __init__(self, rows, beacons):
        super().__init__(rows)
        self.beacons = list(beacons)

    @property
    def writes_beacons(self):
        return True

    def beacon(self, attempt):
        return self.beacons.pop(0) if len(self.beacons) > 1 else self.beacons[0]


def test_a_run_lost_without_notice_ends_by_its_last_write_not_at_the_next_start():
    from vsp.components.runtime.training.beacon import Beacon
    from vsp.components.runtime.training.poll_plan import PlanSettings

    # Looks and Vertex calls every 10 s; the job's heartbeat is stale / 2 = 10 s.
    settings = PlanSettings(
        beacon_seconds=10, cap_seconds=10, expect_seconds=10, stale_seconds=20,
        fallback_seconds=10, pending_seconds=10, cache_seconds=0,
    )  # fmt: skip
    rows = [
        (R, 0, 1000.0, None),
        (R, 0, 1000.0, None),
        (R, 1, 1016.0, None),
        (OK, 1, 1016.0, 1027.0),
    ]
    beacons = [
        Beacon("1", 0, "running", 1000.0, 1000.0),
        Beacon("1", 0, "running", 1000.0, 1005.0),  # its last write: lost at about 1008
        Beacon("1", 1, "started", 1016.0, 1016.0, None, prev_restart=0, prev_time=1005.0),
        Beacon("1", 1, "exiting", 1027.0, 1027.0, 0, prev_restart=0, prev_time=1005.0),
    ]
    clock = polling.FakeClock(1000.0)
    supervisor = TrainingSupervisor(
        BeaconRowsBackend(rows, beacons),
        SpotRecovery(SPOT, max_preemptions=5),
        "run-1",
        clock=clock,
        wall=clock.now,
        poll_settings=settings,
    )
    result = supervisor.run()
    intervals = metrics.run_intervals(result, clock.now())
    # Gone within [1010, 1015] (the last write 1005 + a heartbeat; the poll at 1010 saw it
    # RUNNING): its end is 1012.5, not the next run's start 1016, and the gap is not billed.
    assert stretches(intervals) == [(1000.0, 1012.5, "requeued"), (1016.0, 1027.0, "succeeded")]
