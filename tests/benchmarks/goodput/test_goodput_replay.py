"""The replay of a scaled run (``benchmarks.goodput.replay``): its own preemptions, its costs."""

from __future__ import annotations

import pytest

from benchmarks.goodput import grid, replay, scaled_run
from vsp.vertex_emulator.slurm import preemption

COSTS = {
    "work_s": 20.0,
    "startup_s": 1.0,
    "gap_s": 2.0,
    "tail_s": 0.5,
    "notice_s": 0.5,
    "block_s": 0.1,
    "persist_s": 0.0,
    "step_s": 0.0,  # the notice is seen the moment it comes: exact arithmetic
    "mtbf_s": 30.0,
}


def trace(delays: tuple[float, ...], announced: tuple[bool, ...] | None = None, **costs):
    announced = announced if announced is not None else (True,) * len(delays)
    return replay.Trace(delays=delays, announced=announced, **{**COSTS, **costs})


def test_a_run_never_preempted_bills_its_start_up_its_work_and_its_tail() -> None:
    tally = replay.replay(trace(()), None)
    assert (tally.finished, tally.preemptions) == (True, 0)
    assert tally.billed == pytest.approx(1.0 + 20.0 + 0.5)
    assert tally.goodput == pytest.approx(20.0 / 21.5)


def test_goodput_counts_the_runs_own_useful_time_over_the_wall_time_billed() -> None:
    tally = replay.replay(trace((), useful_s=19.0), None)
    assert tally.billed == pytest.approx(21.5)  # the 20 s of steps' wall time are done
    assert tally.goodput == pytest.approx(19.0 / 21.5)


def test_an_announced_preemption_whose_save_fits_loses_nothing() -> None:
    # Run 0: SIGTERM 10 s after its start, SIGKILL 0.5 s later; 1 s of start-up, so 9 s trained
    # and saved on the notice. Then the gap, and run 1 trains the other 11 s.
    tally = replay.replay(trace((10.0,)), None)
    assert (tally.preemptions, tally.notice_saves_landed, tally.lost) == (1, 1, 0.0)
    assert tally.billed == pytest.approx(10.5 + 2.0 + 1.0 + 11.0 + 0.5)
    assert tally.goodput == pytest.approx(20.0 / 25.0)


def test_an_unannounced_preemption_loses_the_work_since_the_last_save() -> None:
    lost = replay.replay(trace((10.0,), (False,)), None)  # notice saves only: all 9 s lost
    assert (lost.lost, lost.notice_saves_landed) == (pytest.approx(9.0), 0)
    assert lost.billed == pytest.approx(10.0 + 2.0 + 1.0 + 20.0 + 0.5)
    # Saves of 0.1 s at 4 s and 8.1 s of training hold the progress of 4 s and 8 s; the SIGKILL
    # at 9 s of training finds 8.8 s done.
    every_4 = replay.replay(trace((10.0,), (False,)), grid.FixedInterval(4.0))
    assert (every_4.periodic_saves, every_4.lost) == (4, pytest.approx(8.8 - 8.0))  # 2 a run


def test_a_preemption_while_starting_up_trains_nothing_and_is_billed_to_its_sigkill() -> None:
    tally = replay.replay(trace((0.3, 10.0)), None)
    assert tally.preemptions == 2
    first = 0.3 + 0.5 + 2.0  # start-up cut at the SIGKILL, then the gap
    assert tally.billed == pytest.approx(first + 10.5 + 2.0 + 1.0 + 11.0 + 0.5)


def test_the_bound_is_the_best_of_the_sweep_and_notice_saves() -> None:
    announced = trace((10.0, 7.0, 12.0))
    best, interval = replay.bound(announced, [1.0, 4.0, 16.0])
    assert interval is None  # every notice save lands: periodic saves only cost
    assert best == replay.replay(announced, None).goodput == pytest.approx(20.0 / 28.5)
    assert replay.replay(announced, replay.ours(announced)).goodput <= best
    silent = trace((10.0, 7.0, 12.0), (False, False, False))
    best, interval = replay.bound(silent, [1.0, 4.0, 16.0])
    assert interval in (1.0, 4.0) and best > replay.replay(silent, None).goodput


def test_a_plan_trace_has_the_emulators_draws() -> None:
    costs = {k: v for k, v in COSTS.items()}
    got = replay.Trace.from_plan(5, 30.0, 8, 0.25, **costs)
    assert got.delays == tuple(preemption.poisson_delays(5, 30.0, 8))
    plan = {"seed": 5, "unannounced_share": 0.25}
    assert got.announced == tuple(not preemption.is_unannounced(plan, k) for k in range(8))


def test_a_run_record_becomes_its_trace() -> None:
    run = {
        "seed": 3,
        "steps": 1000,
        "train_seconds": 24.0,
        "useful_seconds_step_log": 25.0,
        "startup_s": [3.0, None, 2.0],
        "restart_gaps_s": [2.0, 2.1],
        "tail_s": 0.7,
        "plan": {"mean_s": 30.0, "max_count": 40},
    }
    got = scaled_run.trace_of_run(run, 0.03, 0.0)
    assert got is not None
    assert got.delays == tuple(preemption.poisson_delays(3, 30.0, 40))
    assert all(got.announced)
    assert (got.startup_s, got.gap_s, got.tail_s) == (2.5, pytest.approx(2.05), 0.7)
    assert (got.work_s, got.step_s, got.mtbf_s, got.block_s) == (25.0, 0.025, 30.0, 0.03)
    assert got.useful_s == 24.0  # the steps' wall time is done, the trainer's own time counted
    assert scaled_run.trace_of_run({**run, "tail_s": None}, 0.03, 0.0) is None
