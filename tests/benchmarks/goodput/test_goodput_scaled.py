"""Tests of the pure parts of the scaled goodput benchmark (records to figures, goals, report);
the emulator runs themselves are the benchmark's (``python -m benchmarks.goodput.scaled``)."""

from __future__ import annotations

import pytest

from benchmarks.goodput import grid, replay, scaled, scaled_bounds, scaled_report, scaled_run

EVENTS = [  # unsorted, as a caller might pass them
    {"epoch": 140.0, "runSeconds": 27.0, "noticeSeconds": 0.5},
    {"epoch": 110.0, "runSeconds": 10.0, "noticeSeconds": 0.5},
]
JOB = {"start_time": 142.5, "end_time": 200.0}


def test_runs_gaps_and_startups_come_from_the_records() -> None:
    windows = scaled_run.run_windows(EVENTS, JOB)
    assert windows == [(100.0, 110.5), (113.0, 140.5), (142.5, 200.0)]
    assert scaled_run.restart_gaps(windows) == [2.5, 2.0]
    begins = [100.25, 101.0, 113.375, 142.625, 150.0]
    assert scaled_run.startup_delays(windows, begins) == [0.25, 0.375, 0.125]
    assert scaled_run.startup_delays(windows, [101.0, 150.0]) == [1.0, None, 7.5]


def test_a_run_never_preempted_has_one_window_and_no_gap() -> None:
    windows = scaled_run.run_windows([], JOB)
    assert windows == [(142.5, 200.0)]
    assert scaled_run.restart_gaps(windows) == []


def test_trainer_flags_add_the_scaled_prior_and_notice() -> None:
    assert scaled_run.trainer_flags(["--save-mode", "blocking"]) == [
        *("--save-mode", "blocking", "--mtbf-seconds", "60", "--notice-seconds", "0.5")
    ]


def _run(train: float, billed: float, elapsed: float, metric: float, **rest: object) -> dict:
    return {
        "steps": 4000,
        "train_seconds": train,
        "billed_node_seconds": billed,
        "elapsed_seconds": elapsed,
        "step_metric": {"goodput": metric},
        "preemptions": len(rest.get("restart_gaps_s", [])),
        "restart_gaps_s": [],
        "startup_s": [],
        "checkpoint_policy": "notice-first: x",
        **rest,
    }


RUNS = [
    _run(90.0, 100.0, 120.0, 0.95, restart_gaps_s=[2.0, 3.0], startup_s=[0.5, None]),
    _run(80.0, 100.0, 100.0, 0.85, startup_s=[0.25]),
]


def test_summarize_takes_goodput_over_the_runs_billed_and_elapsed_time() -> None:
    got = scaled_run.summarize(RUNS)
    assert got["goodput_per_seed"] == [0.9, 0.8]
    assert got["goodput_mean"] == pytest.approx(0.85, abs=1e-12)
    assert got["goodput_elapsed_per_seed"] == [0.75, 0.8]
    assert got["step_metric_mean"] == pytest.approx(0.9, abs=1e-12)
    assert (got["preemptions_per_seed"], got["preemptions"]) == ([2, 0], 2)
    assert got["unannounced_per_seed"] == [0, 0]
    assert scaled_run.summarize([{**RUNS[0], "unannounced": 1}])["unannounced_per_seed"] == [1]
    assert (got["restart_gap_mean_s"], got["restart_gap_max_s"]) == (2.5, 3.0)
    assert got["startup_mean_s"] == 0.375
    assert got["step_time_mean_s"] == (90.0 / 4000 + 80.0 / 4000) / 2


def _case(name: str, mean: float, elapsed: float, per_seed: list[int]) -> dict:
    return {
        "name": name,
        "runs": [_run(90.0, 100.0, 110.0, 0.9)],
        "goodput_per_seed": [mean],
        "goodput_mean": mean,
        "goodput_elapsed_mean": elapsed,
        "step_metric_mean": 0.97,
        "preemptions_per_seed": per_seed,
        "preemptions": sum(per_seed),
        "restart_gap_mean_s": 2.03,
        "restart_gap_max_s": 2.1,
        "startup_mean_s": 0.16,
        "step_time_mean_s": 0.0203,
    }


def _cases(ours: float, elapsed: float, ours_counts: list[int]) -> list[dict]:
    return [
        _case(scaled.OURS_ASYNC, ours, elapsed, ours_counts),
        _case(scaled.YOUNG_DALY, 0.93, 0.9, [4, 5, 6]),
        _case(scaled.OURS_BLOCKING, 0.86, 0.83, [4, 5, 6]),
    ]


def test_goals_mark_the_async_goal_met_only_at_or_above_095() -> None:
    met = scaled.goals(_cases(0.95, 0.949, [4, 5, 6]), seeds=3)
    assert [g["id"] for g in met] == [
        "goodput-scaled-ours-async",
        "goodput-scaled-ours-async-elapsed",
        "goodput-scaled-ours-blocking",
        "goodput-scaled-young-daly-async",
    ]
    assert [(g["measured"], g["met"]) for g in met] == [
        (0.95, True),
        (0.949, False),
        (0.86, None),
        (0.93, None),
    ]
    assert met[0]["where"] == "15 preemptions (4/5/6 per seed)"
    assert met[1]["where"] == (
        "restart gap mean 2.03 s; 3 seeds, 15 preemptions; not evidence enough for the goal,"
        " which needs at least 6 seeds and 30 preemptions"
    )
    assert "Daly's analytic 0.848" in met[2]["goal"]


def test_goals_say_when_a_seed_saw_too_few_preemptions() -> None:
    found = scaled.goals(_cases(0.97, 0.95, [5, 1, 6]), seeds=3)
    assert found[0]["where"] == (
        "12 preemptions (5/1/6 per seed); seed 1: too few to be meaningful"
    )
    assert found[0]["met"] is True


def _results(cases: list[dict], goals: list[dict]) -> dict:
    """A results document as ``goodput_scaled.run`` writes it, for the report."""
    return {
        "command": "python -m benchmarks.goodput.scaled --seeds 3",
        "machine": {"date": "D", "platform": "P", "cpus": 2, "python": "3.11"},
        "wall_seconds": 700.0,
        "work_steps": 15000,
        "step_seconds": 0.02,
        "setting": {
            "mtbf_s": 60.0,
            "notice_s": 0.5,
            "requeue_delay_s": 2.0,
            "node_recovery_s": 2.0,
            "plan_max_count": 40,
            "min_preemptions_per_seed": 2,
        },
        "cases": cases,
        "goals": goals,
    }


def test_report_rows_and_goal_lines() -> None:
    cases = _cases(0.951, 0.93, [4, 5, 6])
    results = _results(cases, scaled.goals(cases, 3))
    text = scaled_report.markdown(results)
    assert (
        f"| {scaled.OURS_ASYNC} | 0.951 | 0.951 | 0.930 | 0.970 | 4, 5, 6 |"
        " 2.03 / 2.10 | 0.16 | 0.0203 |  |"
    ) in text
    assert "Expected preemptions per run (billed running time / M): 1.7, 1.7, 1.7 by case." in text
    assert "**0.9510** (15 preemptions (4/5/6 per seed)): met" in text
    assert "**0.9300** (restart gap mean 2.03 s; 3 seeds, 15 preemptions; not evidence" in text
    assert "too few" not in text


def test_the_unannounced_case_is_reported_without_a_target() -> None:
    cases = [
        *_cases(0.97, 0.95, [5, 5, 6]),
        {
            **_case(scaled.OURS_UNANNOUNCED, 0.96, 0.94, [5, 5, 6]),
            "unannounced_per_seed": [1, 2, 0],
        },
    ]
    found = scaled.goals(cases, seeds=3)
    assert [g["id"] for g in found][-1] == "goodput-scaled-ours-async-unannounced"
    assert (found[-1]["measured"], found[-1]["met"]) == (0.96, None)
    assert found[-1]["where"] == "16 preemptions (5/5/6 per seed)"
    assert scaled.PLANS == {scaled.OURS_UNANNOUNCED: {"unannounced_share": 0.25}}
    results = _results(cases, found)
    text = scaled_report.markdown(results)
    assert (
        f"{scaled.OURS_UNANNOUNCED}: unannounced preemptions per seed (SIGKILL at once,"
        " no notice save): 1, 2, 0 of 5, 5, 6."
    ) in text
    assert "**0.9600** (16 preemptions (5/5/6 per seed)): reported" in text


def test_the_goal_billing_the_restart_gaps_needs_6_seeds_and_30_preemptions() -> None:
    def elapsed_goal(counts: list[int], seeds: int, elapsed: float = 0.96) -> dict:
        ours = {
            **_case(scaled.OURS_ASYNC, 0.97, elapsed, counts),
            "goodput_elapsed_per_seed": [elapsed] * len(counts),
        }
        [_, goal] = scaled.goals([ours], seeds=seeds)  # only the goal's case ran
        return goal

    goal = elapsed_goal([5, 5, 5, 5, 5, 5], seeds=6)
    assert goal["met"] is True and goal["measured"] == 0.96
    assert "(6 seeds, 30 preemptions, restart gaps billed;" in goal["goal"]
    assert goal["where"] == "restart gap mean 2.03 s" + "".join(
        f"; seed {seed}: 0.960" for seed in range(6)
    )
    assert elapsed_goal([5, 5, 5, 5, 5, 4], seeds=6)["met"] is False  # 29 preemptions
    assert elapsed_goal([10, 10, 10], seeds=3)["met"] is False  # 3 seeds
    assert elapsed_goal([5, 5, 5, 5, 5, 5], seeds=6, elapsed=0.949)["met"] is False


def test_the_report_names_the_cases_not_run() -> None:
    cases = [_case(scaled.OURS_ASYNC, 0.97, 0.96, [5, 5, 6])]
    results = {
        **_results(cases, scaled.goals(cases, 3)),
        "cases_not_run": [scaled.YOUNG_DALY, scaled.OURS_BLOCKING],
    }
    text = scaled_report.markdown(results)
    assert (
        f"Not run here (`--cases`): {scaled.YOUNG_DALY}; {scaled.OURS_BLOCKING}. Their last"
        " results, with the date and command of their run, are kept in"
        " `benchmarks/results/previous/`."
    ) in text
    assert "Not run here" not in scaled_report.markdown(_results(cases, []))
    assert set(scaled.CASE_KEYS.values()) == set(scaled.CASES)


def test_the_setting_of_a_case_is_its_measured_numbers_at_full_scale() -> None:
    policy_line = (
        "notice-first: a save takes 0.441 s (0.0324 s blocking), mean time between preemptions"
    )
    case = {
        "restart_gap_mean_s": 2.0,
        "startup_mean_s": 0.4,
        "step_time_mean_s": 0.02,
        "runs": [{"checkpoint_policy": policy_line}, {"checkpoint_policy": policy_line}],
    }
    scenario = scaled_bounds.setting_scenario(case)
    assert scenario is not None
    assert (scenario.mtbf_s, scenario.notice_s, scenario.p_no_notice) == (3600.0, 30.0, 0.0)
    assert scenario.restart_s == pytest.approx(144.0)
    assert scenario.step_s == pytest.approx(1.2)
    assert scenario.block_s == pytest.approx(0.0324 * 60)
    assert scenario.persist_s == pytest.approx((0.441 - 0.0324) * 60)
    assert (
        scaled_bounds.setting_scenario({**case, "runs": []}) is None
    )  # no measured save: no bound
    assert scaled_bounds.setting_scenario({**case, "startup_mean_s": None}) is None


def test_the_bound_goal_compares_the_elapsed_goodput_with_the_settings_bound(monkeypatch) -> None:
    monkeypatch.setattr(
        scaled_bounds,
        "setting_bound",
        lambda case: {"bound": 0.96, "ours_simulated": 0.955, "restart_s": 144.0},
    )
    cases = _cases(0.97, 0.9408, [5] * 6)
    [bound_goal] = [g for g in scaled.goals(cases, seeds=6) if g["id"].endswith("to-bound")]
    assert bound_goal["measured"] == pytest.approx(0.98)
    assert bound_goal["met"] is True
    assert bound_goal["where"].startswith("bound 0.9600 (restart 144 s); ours measured 0.9408")
    low = _cases(0.97, 0.94, [5] * 6)
    [missed] = [g for g in scaled.goals(low, seeds=6) if g["id"].endswith("to-bound")]
    assert missed["met"] is False


def test_a_two_node_job_is_told_the_jobs_mtbf_a_node_s_over_two() -> None:
    assert scaled_run.trainer_flags([], nodes=2) == [
        *("--mtbf-seconds", "30", "--notice-seconds", "0.5")
    ]


def test_a_two_node_runs_useful_time_counts_both_nodes() -> None:
    one = _run(90.0, 100.0, 120.0, 0.9)
    two = {**one, "nodes": 2, "billed_node_seconds": 200.0}
    got = scaled_run.summarize([one, two])
    assert got["goodput_per_seed"] == [0.9, 0.9]  # 90 s x 2 nodes over 200 node-s
    assert got["goodput_elapsed_per_seed"] == [0.75, 0.75]  # both nodes billed throughout


def test_a_blocking_save_is_read_from_the_policy_line_too() -> None:
    blocking = "notice-first: a save blocks training 0.0274 s, mean time between preemptions"
    assert scaled_bounds.measured_save(blocking) == (0.0274, 0.0274)
    asynchronous = "notice-first: a save takes 0.441 s (0.0324 s blocking), mean time"
    assert scaled_bounds.measured_save(asynchronous) == (0.441, 0.0324)
    assert scaled_bounds.measured_save("fixed: a periodic save every 10 steps") is None


def test_the_setting_of_a_two_node_case_has_the_jobs_mtbf() -> None:
    line = "notice-first: a save blocks training 0.03 s, mean time between preemptions 30 s"
    case = {
        "nodes": 2,
        "restart_gap_mean_s": 2.0,
        "startup_mean_s": 3.0,
        "step_time_mean_s": 0.025,
        "runs": [{"checkpoint_policy": line}],
    }
    scenario = scaled_bounds.setting_scenario(case)
    assert scenario is not None
    assert (scenario.mtbf_s, scenario.restart_s) == (1800.0, pytest.approx(300.0))
    assert (scenario.block_s, scenario.persist_s) == (pytest.approx(1.8), 0.0)


def _two_node_case(elapsed: float, per_seed: list[int]) -> dict:
    line = "notice-first: a save blocks training 0.03 s, mean time between preemptions 30 s"
    case = _case(scaled.OURS_TWO_NODES, 0.9, elapsed, per_seed)
    return {**case, "nodes": 2, "runs": [_run(90.0, 100.0, 110.0, 0.9, checkpoint_policy=line)]}


def test_the_two_node_case_alone_is_set_against_its_own_bound(monkeypatch) -> None:
    monkeypatch.setattr(
        scaled_bounds,
        "setting_bound",
        lambda case: {"bound": 0.90, "ours_simulated": 0.89, "restart_s": 300.0},
    )
    goals = scaled.goals([_two_node_case(0.882, [5] * 6)], seeds=6)
    assert [g["id"] for g in goals] == [
        "goodput-scaled-2-nodes",
        "goodput-scaled-2-nodes-elapsed",
        "goodput-scaled-2-nodes-to-bound",
    ]
    assert [g["met"] for g in goals] == [None, None, True]
    assert goals[2]["measured"] == pytest.approx(0.98)
    assert "of its own setting" in goals[2]["goal"]  # the records hold no replay: the setting's
    few = scaled.goals([_two_node_case(0.882, [4] * 6)], seeds=6)  # 24 preemptions: too few
    assert few[2]["met"] is False
    assert few[2]["where"].endswith(
        "; not evidence enough for the goal, which needs at least 6 seeds and 30 preemptions"
    )
    assert "not evidence enough" not in goals[2]["where"]
    low = scaled.goals([_two_node_case(0.88, [5] * 6)], seeds=6)
    assert low[2]["met"] is False


def test_the_two_node_case_is_asked_for_and_needs_torch(monkeypatch, tmp_path) -> None:
    assert "ours-2-nodes" not in scaled.DEFAULT_CASES
    assert "ours-async" in scaled.DEFAULT_CASES
    monkeypatch.setattr(scaled.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit) as stopped:
        scaled.main(["--out", str(tmp_path), "--cases", "ours-2-nodes"])
    assert stopped.value.code == 2
    assert not list(tmp_path.iterdir())  # refused before anything ran or was written


def test_runs_with_their_tails_are_held_to_the_bound_on_their_own_preemptions() -> None:
    line = "notice-first: a save blocks training 0.03 s, mean time between preemptions 30 s"
    runs = []
    for seed in range(6):
        run = _run(200.0, 470.0, 250.0, 0.85, checkpoint_policy=line, seed=seed, nodes=2)
        run |= {"startup_s": [3.0], "restart_gaps_s": [2.0], "tail_s": 0.5}
        run |= {"useful_seconds_step_log": 201.0}
        run |= {"plan": {"mean_s": 30.0, "max_count": 40}, "preemptions": 5}
        runs.append(run)
    case = {**_two_node_case(0.8, [5] * 6), "runs": runs}
    replayed = scaled_bounds.replay_bound(case)
    assert replayed is not None and len(replayed["per_seed"]) == 6
    for seed, row in enumerate(replayed["per_seed"]):
        trace = scaled_run.trace_of_run(runs[seed], 0.03, 0.0)
        assert row["bound"] == replay.bound(trace, [s / 60 for s in grid.SWEEP], seed)[0]
        assert row["ours_measured"] == 0.8 and row["ours_replayed"] <= row["bound"]
    [goal] = [g for g in scaled.goals([case], seeds=6) if g["id"].endswith("to-bound")]
    assert "on the runs' own preemptions" in goal["goal"]
    assert goal["measured"] == pytest.approx(0.8 / replayed["bound"], abs=1e-4)
    assert goal["met"] is (0.8 / replayed["bound"] >= 0.98)
    assert scaled_bounds.replay_bound({**case, "runs": [{**runs[0], "tail_s": None}]}) is None


def test_the_report_shows_each_seed_of_the_replay() -> None:
    cases = _cases(0.951, 0.93, [4, 5, 6])
    rows = [
        {"seed": 0, "bound": 0.8, "best_interval_s": None, "ours_replayed": 0.79},
        {"seed": 1, "bound": 0.9, "best_interval_s": 8.0, "ours_replayed": 0.89},
    ]
    rows[0]["ours_measured"], rows[1]["ours_measured"] = 0.78, 0.88
    cases[0]["replay"] = {"per_seed": rows, "bound": 0.85, "ours_replayed": 0.84}
    text = scaled_report.markdown(_results(cases, []))
    assert "| 0 | 0.7800 | 0.7900 | 0.8000 | notice saves alone |" in text
    assert "| 1 | 0.8800 | 0.8900 | 0.9000 | every 8 s |" in text
    assert "| mean | 0.8300 | 0.8400 | 0.8500 | |" in text
    assert text.count("replayed on its own preemptions") == 1  # the other cases have none


def test_the_report_says_what_differs_for_a_two_node_case() -> None:
    cases = [*_cases(0.951, 0.93, [4, 5, 6]), {**_two_node_case(0.8, [5, 5, 5])}]
    text = scaled_report.markdown(_results(cases, []))
    assert (
        f"{scaled.OURS_TWO_NODES}: the DDP example on 2 nodes instead, and the plan's mean is the"
        " job's, 30 s (a node's 60 s over 2: the first node to go ends a run)."
    ) in text
    assert text.count("the DDP example on") == 1
