"""The run report renders every attempt, escapes job text and draws the charts."""

from __future__ import annotations

from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.trainer.history import Record
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training import report
from vsp.components.runtime.training.backends.interface import RunResult
from vsp.components.runtime.training.recovery import Attempt, Target


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
    page = report.html_report("run <x>", result, metrics, losses=[3.0, 2.0, 1.5])
    assert "<title>run &lt;x&gt;</title>" in page
    assert "&lt;b&gt;NODE_FAIL&lt;/b&gt;" in page and "<b>NODE_FAIL" not in page
    assert page.count('<rect class="bar"') == 2 and page.count('fill="#4e79a7">') == 2  # Spot
    assert page.count('<g class="marker preemption">') == 2  # on the timeline and the loss
    assert 'aria-label="timeline"' in page and 'aria-label="loss"' in page
    assert "<td>preemptions</td><td>1</td>" in page
    assert "<td>wall_seconds</td><td>100 (1 min 40 s)</td>" in page


def test_markdown_report_lists_attempts():
    result = _result()
    text = report.markdown("run", result, training_metrics.compute(result))
    assert "| 1 | 7 | spot | PREEMPTED | 0 | <b>NODE_FAIL</b> |" in text
    assert "| preemptions | 1 |" in text


HISTORY = [
    Record("start", 2.0, 0, 1.0),
    Record("save", 20.0, 20, 1.0, "periodic"),
    Record("save", 45.0, 45, 1.0, "periodic"),  # preempted at 50: 4 s lost
    Record("resume", 61.0, 45, 1.0),
    Record("save", 80.0, 80, 1.0, "periodic"),
    Record("save", 95.0, 100, 1.0, "final"),
]


def test_running_stretches_show_where_their_node_seconds_went():
    result = _result()
    metrics = training_metrics.compute(result, history=HISTORY)
    page = report.html_report("run", result, metrics, history=HISTORY)
    # useful, startup, reload, periodic save, notice window, finish, work lost
    assert (
        '<tr><td>7</td><td data-epoch="0.000">1970-01-01 00:00:00 UTC</td>'
        '<td data-epoch="50.000">1970-01-01 00:00:50 UTC</td><td>50.000</td><td>preempted</td>'
        "<td>41.000</td><td>2.000</td><td>1.000</td><td>2.000</td><td>0.000</td><td>0.000</td>"
        "<td>4.000</td></tr>"
    ) in page
    assert (
        '<tr><td>8</td><td data-epoch="60.000">1970-01-01 00:01:00 UTC</td>'
        '<td data-epoch="100.000">1970-01-01 00:01:40 UTC</td><td>40.000</td><td>succeeded</td>'
        "<td>32.000</td><td>1.000</td><td>1.000</td><td>1.000</td><td>0.000</td><td>5.000</td>"
        "<td>0.000</td></tr>"
    ) in page
    assert metrics["work_lost_node_seconds"] == 4.0
    assert "<th>notice window (node-s)</th>" in page


def test_running_stretches_without_visible_history_say_unknown():
    result = _result()
    metrics = training_metrics.compute(result, history=None)
    page = report.html_report("run", result, metrics, history=None)
    assert "<td>preempted</td>" + "<td>unknown</td>" * 7 + "</tr>" in page
    assert "goodput" not in metrics
