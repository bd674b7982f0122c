"""A self-contained report of a training run: Markdown for logs, HTML with inline SVG charts.

The HTML needs no network and no script: the metrics, a timeline of the attempts and, when the
trainer wrote one, the loss curve (both charts in ``report_charts``, with preemptions and
resumes marked), the attempts and the running stretches. Times read as ``2026-12-04 13:05:10
UTC`` and durations as ``3 min 12 s``. Every text that comes from a job (ids, details) is
escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from vsp.components.runtime.core import readable_time
from vsp.components.runtime.trainer.history import Record
from vsp.components.runtime.training import goodput, report_charts
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training.backends.interface import RunResult


def markdown(title: str, result: RunResult, metrics: dict[str, float]) -> str:
    """The report as Markdown: metrics table and one row per attempt."""
    lines = [f"# {title}", "", "| metric | value |", "|---|---|"]
    lines += [f"| {key} | {value:g} |" for key, value in metrics.items()]
    lines += [
        "",
        "| attempt | job | target | outcome | requeues | detail |",
        "|---|---|---|---|---|---|",
    ]
    for index, attempt in enumerate(result.attempts, 1):
        detail = attempt.detail.replace("|", "/")
        lines.append(
            f"| {index} | {attempt.job_id} | {attempt.target.name} | {attempt.outcome.value} | "
            f"{attempt.requeues} | {detail} |"
        )
    return "\n".join(lines) + "\n"


def _when(epoch: float | None) -> str:
    """A table cell: the UTC time, with the exact epoch seconds in ``data-epoch``."""
    if epoch is None:
        return "<td>none</td>"
    return f'<td data-epoch="{epoch:.3f}">{readable_time.utc(epoch)}</td>'


def _stretches_table(result: RunResult, now: float, history: Sequence[Record] | None) -> str:
    """Each running stretch and where its node-seconds went."""
    intervals = training_metrics.run_intervals(result, now, history)
    known = bool(history) and bool(goodput.segments(history or ()))
    rows = goodput.stretch_figures(intervals, history or ()) if known else []
    cells = []
    for index, interval in enumerate(sorted(intervals, key=lambda i: i.start)):
        figures = rows[index].seconds if rows else {}
        shown = "".join(
            f"<td>{figures[name]:.3f}</td>" if figures else "<td>unknown</td>"
            for name in goodput.FIGURES
        )
        cells.append(
            f"<tr><td>{html.escape(interval.job_id)}</td>{_when(interval.start)}"
            f"{_when(interval.end)}<td>{interval.node_seconds:.3f}</td>"
            f"<td>{html.escape(interval.ended_by or 'still running')}</td>{shown}</tr>"
        )
    heads = "".join(f"<th>{name.replace('_', ' ')} (node-s)</th>" for name in goodput.FIGURES)
    return (
        "<h2>Running stretches</h2><p>Billed from each run's start to its end (times within "
        "the poll window); where the node-seconds went, from the trainer's checkpoint "
        "history.</p>"
        "<table id='stretches'><tr><th>job</th><th>start</th><th>end</th>"
        "<th>billed (node-s)</th><th>ended by</th>" + heads + "</tr>" + "".join(cells) + "</table>"
    )


def _metric_cell(key: str, value: float) -> str:
    """A metric's value; seconds also as a readable duration (``173.8 (2 min 54 s)``)."""
    if key.endswith("_seconds"):
        return f"{value:g} ({readable_time.duration(value)})"
    return f"{value:g}"


def html_report(
    title: str,
    result: RunResult,
    metrics: dict[str, float],
    *,
    losses: Sequence[float] = (),
    history: Sequence[Record] | None = None,
    extra_sections: Sequence[tuple[str, str]] = (),
    now: float | None = None,
) -> str:
    """The report as one HTML page.

    Args:
        title: Page title.
        result: The run.
        metrics: From ``training_metrics.compute``.
        losses: Loss per step, if the trainer recorded them.
        history: The trainer's checkpoint history; None when the step cannot see it. Each
            running stretch is shown with where its node-seconds went; its saves are marked on
            the timeline and place preemptions and resumes on the loss curve exactly
            (estimated without).
        extra_sections: (heading, pre-escaped HTML) pairs appended at the end.
        now: End of still-open intervals (default: the last event).
    """
    end = now if now is not None else max((e["time"] for e in result.events), default=0.0)
    checkpoints = None
    if history is not None:
        checkpoints = [(r.step, r.end) for r in history if r.event == "save"]
    checkpoint_times = None if checkpoints is None else sorted(t for _, t in checkpoints)
    rows = "".join(
        f"<tr><td>{html.escape(k)}</td><td>{_metric_cell(k, v)}</td></tr>"
        for k, v in metrics.items()
    )
    attempts = "".join(
        f"<tr><td>{i}</td><td>{html.escape(a.job_id)}</td><td>{html.escape(a.target.name)}</td>"
        f"<td>{a.outcome.value}</td><td>{a.requeues}</td><td>{html.escape(a.detail)}</td></tr>"
        for i, a in enumerate(result.attempts, 1)
    )
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        "<h2>Timeline</h2><p>Bars: running (blue Spot, green on-demand); red dashed lines: "
        "preemptions; green dashed lines: resumes; orange: checkpoint saves. Hover a mark for "
        "its time.</p>",
        report_charts.timeline_svg(result, end, checkpoint_times),
    ]
    if len(losses) >= 2:
        sections += [
            "<h2>Loss</h2><p>Red dashed lines: where a preemption stopped training and the step "
            "it resumed from (green dot); orange dots: checkpoint saves.</p>",
            report_charts.loss_svg(losses, result, end, checkpoints),
        ]
    sections += [
        "<h2>Metrics</h2><table>" + rows + "</table>",
        "<h2>Attempts</h2><table><tr><th>#</th><th>job</th><th>target</th><th>outcome</th>"
        "<th>requeues</th><th>detail</th></tr>" + attempts + "</table>",
        _stretches_table(result, end, history),
    ]
    sections += [f"<h2>{html.escape(h)}</h2>{body}" for h, body in extra_sections]
    style = "body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:2px 6px}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>{''.join(sections)}</body></html>\n"
    )
