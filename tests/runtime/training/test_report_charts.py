"""The timeline and loss charts: readable time ticks, a marker per preemption and resume."""

from __future__ import annotations

import re

from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training import report_charts
from vsp.components.runtime.training.backends.interface import RunResult
from vsp.components.runtime.training.recovery import Attempt, Target

T0 = 1796389200.0  # 2026-12-04 13:00:00 UTC


def _three_requeues() -> RunResult:
    """Job 1 runs, is requeued three times in place, then succeeds after 150 s."""
    marks = [
        (0, "running"), (30, "requeued"), (34, "pending"), (40, "running"), (70, "requeued"),
        (75, "running"), (100, "requeued"), (110, "running"), (150, "succeeded"),
    ]  # fmt: skip
    events = [{"time": T0 + t, "job_id": "1", "event": e} for t, e in marks]
    attempt = Attempt("1", Target("spot", True), Outcome.SUCCEEDED, requeues=3)
    return RunResult([attempt], 150.0, events=events)


def _texts(svg: str, css: str) -> list[str]:
    return re.findall(rf'<text class="{css}"[^>]*>([^<]*)</text>', svg)


def test_the_timeline_reads_in_seconds_and_minutes_and_marks_each_preemption_and_resume():
    svg = report_charts.timeline_svg(_three_requeues(), T0 + 150, [T0 + 25, T0 + 65, T0 + 140])
    assert _texts(svg, "tick-x") == ["0 s", "30 s", "1 min", "1 min 30 s", "2 min", "2 min 30 s"]
    assert _texts(svg, "axis-title-x") == [
        "time since the first job started at 2026-12-04 13:00:00 UTC"
    ]
    titles = re.findall(r'<g class="marker (preemption|resume)">.*?<title>([^<]*)</title>', svg)
    assert titles == [
        ("preemption", "preemption 1: job 1 requeued at 2026-12-04 13:00:30 UTC"),
        ("resume", "resume 1: job 1 running again at 2026-12-04 13:00:40 UTC, "
                   "10 s after the preemption"),
        ("preemption", "preemption 2: job 1 requeued at 2026-12-04 13:01:10 UTC"),
        ("resume", "resume 2: job 1 running again at 2026-12-04 13:01:15 UTC, "
                   "5 s after the preemption"),
        ("preemption", "preemption 3: job 1 requeued at 2026-12-04 13:01:40 UTC"),
        ("resume", "resume 3: job 1 running again at 2026-12-04 13:01:50 UTC, "
                   "10 s after the preemption"),
    ]  # fmt: skip
    # Each marker sits at its time: x = 90 + t / 150 s * (860 - 40 - 90) px.
    lines = re.findall(r'<g class="marker preemption"><line x1="([\d.]+)"', svg)
    assert lines == ["236.0", "430.7", "576.7"]
    assert svg.count('<rect class="bar"') == 4  # four running stretches
    assert svg.count('<rect class="marker checkpoint"') == 3


def test_without_visible_checkpoints_the_timeline_has_no_checkpoint_row():
    svg = report_charts.timeline_svg(_three_requeues(), T0 + 150, None)
    assert "checkpoints</text>" not in svg and "marker checkpoint" not in svg


def test_the_loss_curve_marks_preemptions_at_the_step_training_resumed_from():
    losses = [1.0 - 0.008 * i for i in range(100)]
    history = [(20, T0 + 20), (25, T0 + 29), (50, T0 + 66), (70, T0 + 99), (100, T0 + 150)]
    svg = report_charts.loss_svg(losses, _three_requeues(), T0 + 150, history)
    assert _texts(svg, "tick-x") == ["0", "20", "40", "60", "80", "100"]
    assert _texts(svg, "tick-y") == ["0.2", "0.4", "0.6", "0.8", "1.0"]
    assert _texts(svg, "axis-title-x") == ["training step (steps completed)"]
    labels = re.findall(r'<g class="marker preemption">.*?<text[^>]*>([^<]*)</text>', svg)
    assert labels == ["P1/R1 step 25", "P2/R2 step 50", "P3/R3 step 70"]
    assert svg.count('<circle class="marker resume"') == 3
    assert svg.count('<circle class="marker checkpoint"') == 5
    assert "preemption 2 at 2026-12-04 13:01:10 UTC; resumed at 2026-12-04 13:01:15 UTC" in svg


def test_without_the_checkpoint_history_the_steps_are_estimated_and_say_so():
    losses = [1.0 - 0.008 * i for i in range(100)]
    svg = report_charts.loss_svg(losses, _three_requeues(), T0 + 150, None)
    # 100 steps times the running time before each preemption (30, 60, 85 s) over all 125 s.
    labels = re.findall(r'<g class="marker preemption">.*?<text[^>]*>([^<]*)</text>', svg)
    assert labels == ["P1/R1 ≈ step 24", "P2/R2 ≈ step 48", "P3/R3 ≈ step 68"]
    assert svg.count("(estimated: checkpoint history not visible)") == 3


def test_a_loss_history_under_two_steps_draws_nothing():
    assert report_charts.loss_svg([0.5], _three_requeues(), T0 + 150) == ""
