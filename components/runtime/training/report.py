"""A self-contained report of a training run: Markdown for logs, HTML with inline SVG charts.

The HTML needs no network and no script: a timeline of the attempts (running stretches as bars,
requeues and preemptions as red marks) and, when the trainer wrote one, the loss curve. Every
text that comes from a job (ids, details) is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from vsp.components.runtime.trainer.history import Record
from vsp.components.runtime.training import goodput
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training.supervisor import RunResult

_WIDTH, _ROW, _LEFT = 720, 26, 90


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


def _timeline_svg(result: RunResult, now: float) -> str:
    intervals = training_metrics.run_intervals(result, now)
    times = [e["time"] for e in result.events] or [0.0]
    t0, t1 = min(times), max(max(times), now)
    span = max(t1 - t0, 1e-9)
    jobs = [a.job_id for a in result.attempts]
    height = _ROW * len(jobs) + 30

    def x(t: float) -> float:
        return _LEFT + (t - t0) / span * (_WIDTH - _LEFT - 10)

    parts = [f'<svg width="{_WIDTH}" height="{height}" role="img" aria-label="timeline">']
    for row, job_id in enumerate(jobs):
        y = 10 + row * _ROW
        parts.append(f'<text x="4" y="{y + 14}" font-size="12">job {html.escape(job_id)}</text>')
        for interval in (i for i in intervals if i.job_id == job_id):
            color = "#4e79a7" if interval.spot else "#59a14f"
            parts.append(
                f'<rect x="{x(interval.start):.1f}" y="{y}" height="18" fill="{color}" '
                f'width="{max(1.0, x(interval.end) - x(interval.start)):.1f}"/>'
            )
        for event in (e for e in result.events if e["job_id"] == job_id):
            if event["event"] in ("requeued", "preempted"):
                parts.append(
                    f'<rect x="{x(event["time"]) - 1:.1f}" y="{y - 2}" width="3" height="22" '
                    f'fill="#e15759"><title>{event["event"]}</title></rect>'
                )
    parts.append(
        f'<text x="{_LEFT}" y="{height - 4}" font-size="11">0 s</text>'
        f'<text x="{_WIDTH - 60}" y="{height - 4}" font-size="11">{span:.0f} s</text></svg>'
    )
    return "".join(parts)


def _loss_svg(losses: Sequence[float]) -> str:
    if len(losses) < 2:
        return ""
    low, high = min(losses), max(losses)
    scale = (high - low) or 1.0
    height = 160
    points = " ".join(
        f"{_LEFT + i / (len(losses) - 1) * (_WIDTH - _LEFT - 10):.1f},"
        f"{10 + (high - v) / scale * (height - 30):.1f}"
        for i, v in enumerate(losses)
    )
    return (
        f'<svg width="{_WIDTH}" height="{height}" role="img" aria-label="loss curve">'
        f'<polyline fill="none" stroke="#4e79a7" stroke-width="1.5" points="{points}"/>'
        f'<text x="4" y="16" font-size="11">{high:.4g}</text>'
        f'<text x="4" y="{height - 20}" font-size="11">{low:.4g}</text>'
        f'<text x="{_LEFT}" y="{height - 4}" font-size="11">step 0</text>'
        f'<text x="{_WIDTH - 80}" y="{height - 4}" font-size="11">step {len(losses)}</text></svg>'
    )


def _stretches_table(result: RunResult, now: float, history: Sequence[Record] | None) -> str:
    """Each running stretch (times in epoch seconds) and where its node-seconds went."""
    intervals = training_metrics.run_intervals(result, now)
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
            f"<tr><td>{html.escape(interval.job_id)}</td><td>{interval.start:.3f}</td>"
            f"<td>{interval.end:.3f}</td><td>{interval.node_seconds:.3f}</td>"
            f"<td>{html.escape(interval.ended_by or 'still running')}</td>{shown}</tr>"
        )
    heads = "".join(f"<th>{name.replace('_', ' ')} (node-s)</th>" for name in goodput.FIGURES)
    return (
        "<h2>Running stretches</h2><p>Billed from each run's start to its end, narrowed "
        "within the poll window by Slurm's whole-second times (a requeue's end, which Slurm does "
        "not report, is the middle of the poll window that saw it). Where the node-seconds "
        "went comes from the checkpoint history the trainer wrote: useful training, start-up, "
        "checkpoint reload, periodic saves, the notice window after a notice save, the final "
        "save and exit, and work lost (computed again after an interruption).</p>"
        "<table id='stretches'><tr><th>job</th><th>start</th><th>end</th>"
        "<th>billed (node-s)</th><th>ended by</th>" + heads + "</tr>" + "".join(cells) + "</table>"
    )


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
            running stretch is shown with where its node-seconds went.
        extra_sections: (heading, pre-escaped HTML) pairs appended at the end.
        now: End of still-open intervals (default: the last event).
    """
    end = now if now is not None else max((e["time"] for e in result.events), default=0.0)
    rows = "".join(f"<tr><td>{html.escape(k)}</td><td>{v:g}</td></tr>" for k, v in metrics.items())
    attempts = "".join(
        f"<tr><td>{i}</td><td>{html.escape(a.job_id)}</td><td>{html.escape(a.target.name)}</td>"
        f"<td>{a.outcome.value}</td><td>{a.requeues}</td><td>{html.escape(a.detail)}</td></tr>"
        for i, a in enumerate(result.attempts, 1)
    )
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        "<h2>Metrics</h2><table>" + rows + "</table>",
        "<h2>Timeline</h2><p>Bars: running (blue Spot, green on-demand); red: preemption.</p>",
        _timeline_svg(result, end),
        "<h2>Attempts</h2><table><tr><th>#</th><th>job</th><th>target</th><th>outcome</th>"
        "<th>requeues</th><th>detail</th></tr>" + attempts + "</table>",
    ]
    sections.append(_stretches_table(result, end, history))
    if len(losses) >= 2:
        sections += ["<h2>Loss</h2>", _loss_svg(losses)]
    sections += [f"<h2>{html.escape(h)}</h2>{body}" for h, body in extra_sections]
    style = "body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:2px 6px}"
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>{''.join(sections)}</body></html>\n"
    )
