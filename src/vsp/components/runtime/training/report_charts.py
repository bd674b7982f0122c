"""The training report's charts: the run timeline and the loss curve, as inline SVG.

The timeline has one row per job: running stretches as bars (blue on Spot, green on-demand),
every preemption (``requeued`` or ``preempted`` event) as a red dashed line ``P1, P2, ...``,
every resume (the next ``running`` after one) as a green line ``R1, R2, ...``, and checkpoint
saves as orange ticks on a row of their own; its x axis is the time since the first job started
(``0 s, 30 s, 1 min, ...``). The loss curve plots the loss per training step and marks where
each preemption stopped training and where it resumed: the step of the last checkpoint
written before the preemption (the step training went on from), exact when the checkpoint
history is visible, estimated from running time otherwise (labelled ``≈``). Checkpoint saves
are orange dots on the curve. Chart primitives: ``core/svg_chart.py`` (why not matplotlib is
measured there).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from vsp.components.runtime.core import readable_time, svg_chart
from vsp.components.runtime.training import metrics
from vsp.components.runtime.training.backends.interface import RunResult

WIDTH = 860
PREEMPTING = ("requeued", "preempted")
_ROW = 26
_LABELS = 30  # room above the rows for the P and R labels
RED, GREEN, BLUE, ORANGE = (svg_chart.PALETTE[c] for c in ("red", "green", "blue", "orange"))


@dataclasses.dataclass(frozen=True)
class Interruption:
    """A preemption and the resume that followed it (if any).

    Attributes:
        number: 1 for the first preemption of the run.
        job_id: The job that was preempted.
        event: What the step saw: ``requeued`` (in place) or ``preempted`` (the job ended).
        time: When this step saw it (epoch s).
        resumed_at: When a job ran again (epoch s), None if none did.
        resumed_job: The job that ran again ('' if none).
    """

    number: int
    job_id: str
    event: str
    time: float
    resumed_at: float | None
    resumed_job: str


def interruptions(result: RunResult) -> list[Interruption]:
    """Every preemption of the run, in time order, with the resume that followed it."""
    events = sorted(result.events, key=lambda e: e["time"])
    found = []
    for index, event in enumerate(events):
        if event["event"] not in PREEMPTING:
            continue
        after = (e for e in events[index + 1 :] if e["event"] == "running")
        resume = next(after, None)
        found.append(
            Interruption(
                len(found) + 1,
                event["job_id"],
                event["event"],
                event["time"],
                None if resume is None else resume["time"],
                "" if resume is None else resume["job_id"],
            )
        )
    return found


def _time_axis(chart: svg_chart.Chart, span: float, start: float) -> None:
    ticks = [(t, readable_time.duration(t)) for t in readable_time.duration_ticks(span)]
    chart.x_axis(ticks, f"time since the first job started at {readable_time.utc(start)}")


def timeline_svg(
    result: RunResult, now: float, checkpoint_times: Sequence[float] | None = None
) -> str:
    """The run timeline: a row per job, preemptions, resumes and checkpoint saves marked."""
    intervals = metrics.run_intervals(result, now)
    times = [e["time"] for e in result.events] or [now]
    t0 = min(times)
    span = max(max(times), now) - t0 or 1.0
    jobs = list(dict.fromkeys(a.job_id for a in result.attempts))
    saves = [t for t in checkpoint_times or () if t0 <= t <= t0 + span]
    rows = len(jobs) + (1 if checkpoint_times is not None else 0)
    height = 24 + _LABELS + _ROW * rows + 48
    chart = svg_chart.Chart(WIDTH, height, (0.0, span), None, "timeline", (90, 40, 24, 48))
    chart.legend(
        [(BLUE, "running on Spot"), (GREEN, "running on-demand"), (RED, "preemption P"),
         (GREEN, "resume R"), (ORANGE, "checkpoint saved")]
    )  # fmt: skip
    _time_axis(chart, span, t0)
    for row, job_id in enumerate(jobs):
        y = chart.top + _LABELS + row * _ROW
        chart.text(4, y + 13, f"job {job_id}", css="row-label")
        for interval in (i for i in intervals if i.job_id == job_id):
            title = (
                f"job {job_id} running {readable_time.clock(interval.start)} to "
                f"{readable_time.clock(interval.end)} UTC "
                f"({readable_time.duration(interval.end - interval.start)})"
            )
            color = BLUE if interval.spot else GREEN
            chart.bar(interval.start - t0, interval.end - t0, y, 18, color, title)
    if checkpoint_times is not None:
        y = chart.top + _LABELS + len(jobs) * _ROW
        chart.text(4, y + 13, "checkpoints", css="row-label")
        for when in saves:
            chart.parts.append(
                f'<rect class="marker checkpoint" x="{chart.x(when - t0) - 1:.1f}" y="{y}" '
                f'width="3" height="18" fill="{ORANGE}"><title>checkpoint saved at '
                f"{readable_time.utc(when)}</title></rect>"
            )
    for stop in interruptions(result):
        chart.vline(
            stop.time - t0, RED, "marker preemption", label=f"P{stop.number}",
            title=f"preemption {stop.number}: job {stop.job_id} {stop.event} at "
            f"{readable_time.utc(stop.time)}",
        )  # fmt: skip
        if stop.resumed_at is not None:
            down = readable_time.duration(stop.resumed_at - stop.time)
            chart.vline(
                stop.resumed_at - t0, GREEN, "marker resume", label=f"R{stop.number}", row=1,
                title=f"resume {stop.number}: job {stop.resumed_job} running again at "
                f"{readable_time.utc(stop.resumed_at)}, {down} after the preemption",
            )  # fmt: skip
    return chart.svg()


def resume_steps(
    result: RunResult,
    now: float,
    steps: int,
    checkpoints: Sequence[tuple[int, float]] | None,
) -> list[tuple[Interruption, int, bool]]:
    """Each preemption with the step training went on from, and whether that step is exact.

    Exact: the step of the last checkpoint written before the preemption (0 without one).
    Without the checkpoint history, the step is estimated from the running time before the
    preemption as a share of all running time.
    """
    stops = interruptions(result)
    if checkpoints is not None:
        ordered = sorted(checkpoints, key=lambda c: c[1])
        return [
            (s, max([step for step, when in ordered if when <= s.time], default=0), True)
            for s in stops
        ]
    intervals = metrics.run_intervals(result, now)
    total = sum(i.end - i.start for i in intervals) or 1.0
    found = []
    for stop in stops:
        before = sum(min(i.end, stop.time) - i.start for i in intervals if i.start < stop.time)
        found.append((stop, round(steps * before / total), False))
    return found


def loss_svg(
    losses: Sequence[float],
    result: RunResult,
    now: float,
    checkpoints: Sequence[tuple[int, float]] | None = None,
) -> str:
    """The loss per step with preemption/resume lines and checkpoint dots ('' under 2 steps).

    Args:
        losses: Loss of steps 1, 2, ... in order.
        result: The run (for its preemptions).
        now: End of still-open intervals (epoch s).
        checkpoints: (step, epoch s) of every checkpoint written; None when not visible.
    """
    if len(losses) < 2:
        return ""
    steps = len(losses)
    y_ticks = svg_chart.nice_ticks(min(losses), max(losses), 5)
    x_ticks = [t for t in svg_chart.nice_ticks(0, steps, 8) if t <= steps]
    chart = svg_chart.Chart(WIDTH, 300, (0.0, float(steps)), (y_ticks[0], y_ticks[-1]), "loss")
    chart.legend(
        [(BLUE, "loss"), (RED, "preemption P / resume R"), (GREEN, "resumed from this step"),
         (ORANGE, "checkpoint saved")]
    )  # fmt: skip
    chart.x_axis([(t, f"{t:g}") for t in x_ticks], "training step (steps completed)")
    chart.y_axis([(v, svg_chart.number(v, y_ticks)) for v in y_ticks], "loss (no unit)")
    chart.polyline([(i + 1, v) for i, v in enumerate(losses)], BLUE, "loss-curve")
    for step, when in checkpoints or ():
        if 1 <= step <= steps:
            chart.dot(
                step, losses[step - 1], ORANGE, "marker checkpoint",
                f"checkpoint at step {step}, saved {readable_time.utc(when)}",
            )  # fmt: skip
    for stop, step, exact in resume_steps(result, now, steps, checkpoints):
        at = "" if exact else "≈ "
        where = f"{at}step {step}"
        resumed = (
            "not resumed"
            if stop.resumed_at is None
            else f"resumed at {readable_time.utc(stop.resumed_at)}"
        )
        chart.vline(
            step, RED, "marker preemption", label=f"P{stop.number}/R{stop.number} {where}",
            row=(stop.number - 1) % 3,
            title=f"preemption {stop.number} at {readable_time.utc(stop.time)}; {resumed} "
            f"from {where}" + ("" if exact else " (estimated: checkpoint history not visible)"),
        )  # fmt: skip
        if stop.resumed_at is not None and 1 <= step <= steps:
            chart.dot(step, losses[step - 1], GREEN, "marker resume", f"resume {stop.number}")
    return chart.svg()
