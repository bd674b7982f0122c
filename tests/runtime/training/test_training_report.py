"""The run report renders every attempt, escapes job text and draws the charts."""

from __future__ import annotations

from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training import report as training_report
from vsp.components.runtime.training.recovery import Attempt, Outcome, Target
from vsp.components.runtime.training.supervisor import RunResult


def _result():
    attempts = [
        Attempt("7", Target("spot", True), Outcome.PREEMPTED, detail="<b>NODE_FAIL</b>"),
        Attempt("8", Target("spot", True), Outcome.SUCCEEDED),
    ]
    events = [
        {"time": 0.0, "job_id": "7", "event": "running"},
        {"time": 50.0, "job_id": "7", "event": "preempted"},
        {"time": 60.0, "job_id": "8", "event": "running"},
        {"time": 100.0, "job_id": "8", "event": "succeeded"},
    ]
    return RunResult(attempts, 100.0, events=events)


def test_html_report_has_metrics_timeline_loss_and_escapes_details():
    result = _result()
    metrics = training_metrics.compute(result)
    page = training_report.html_report("run <x>", result, metrics, losses=[3.0, 2.0, 1.5])
    assert "<title>run &lt;x&gt;</title>" in page
    assert "&lt;b&gt;NODE_FAIL&lt;/b&gt;" in page and "<b>NODE_FAIL" not in page
    assert page.count('<rect class="bar"') == 2 and page.count('fill="#4e79a7">') == 2  # Spot
    assert page.count('<g class="marker preemption">') == 2  # on the timeline and the loss
    assert 'aria-label="timeline"' in page and 'aria-label="loss"' in page
    assert "<td>preemptions</td><td>1</td>" in page
    assert "<td>wall_seconds</td><td>100 (1 min 40 s)</td>" in page


def test_markdown_report_lists_attempts():
    result = _result()
    text = training_report.markdown("run", result, training_metrics.compute(result))
    assert "| 1 | 7 | spot | PREEMPTED | 0 | <b>NODE_FAIL</b> |" in text
    assert "| preemptions | 1 |" in text


def test_running_stretches_show_the_last_checkpoint_and_the_work_lost():
    result = _result()
    times = [20.0, 45.0, 80.0]
    metrics = training_metrics.compute(result, checkpoint_times=times)
    page = training_report.html_report("run", result, metrics, checkpoint_times=times)
    assert (
        '<tr><td>7</td><td data-epoch="0.000">1970-01-01 00:00:00 UTC</td>'
        '<td data-epoch="50.000">1970-01-01 00:00:50 UTC</td><td>50 s</td><td>preempted</td>'
        '<td data-epoch="45.000">1970-01-01 00:00:45 UTC</td><td>5 s</td></tr>'
    ) in page
    assert (
        '<tr><td>8</td><td data-epoch="60.000">1970-01-01 00:01:00 UTC</td>'
        '<td data-epoch="100.000">1970-01-01 00:01:40 UTC</td><td>40 s</td><td>succeeded</td>'
        '<td data-epoch="80.000">1970-01-01 00:01:20 UTC</td><td>0 s</td></tr>'
    ) in page
    assert metrics["work_lost_seconds"] == 5.0


def test_running_stretches_without_visible_checkpoints_say_unknown():
    result = _result()
    metrics = training_metrics.compute(result, checkpoint_times=None)
    page = training_report.html_report("run", result, metrics, checkpoint_times=None)
    assert "<td>preempted</td><td>unknown</td><td>unknown</td></tr>" in page
    assert "<td>succeeded</td><td>unknown</td><td>0 s</td></tr>" in page
