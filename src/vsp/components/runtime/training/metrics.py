"""Numbers about a training run: preemptions, billed node-hours, goodput and its overheads.

Billed time comes from the run's event timeline (``RunResult.events``): a node is billed while
the job runs on it, not while it is queued or preempted (the Spot rules of Vertex/Compute
Engine). Where that time went (useful training, start-up, reload, saves, notice window, finish,
work lost) comes from the checkpoint history the trainer wrote (``goodput``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from vsp.components.runtime.trainer.history import Record, notice_outcomes
from vsp.components.runtime.training import goodput
from vsp.components.runtime.training.backends.interface import RunResult
from vsp.components.runtime.training.recovery import Attempt

_STOPS = {"requeued", "pending", "preempted", "succeeded", "user_failure", "cancelled", "hung"}
INTERRUPTIONS = {"requeued", "preempted", "cancelled", "hung"}


@dataclasses.dataclass(frozen=True)
class Prices:
    """Prices per node-hour, in USD.

    Attributes:
        spot_node_hour: Price of one Spot node for one hour.
        ondemand_node_hour: Price of one on-demand node for one hour.
    """

    spot_node_hour: float = 0.0
    ondemand_node_hour: float = 0.0


def run_intervals(
    result: RunResult, now: float, history: Sequence[Record] | None = None
) -> list[goodput.RunInterval]:
    """The running stretches of every attempt, from the event timeline; with the checkpoint
    ``history``, widened where it proves them too short (``goodput.bounded``)."""
    attempts: dict[str, Attempt] = {a.job_id: a for a in result.attempts}
    open_since: dict[str, float] = {}
    intervals = []
    for event in sorted(result.events, key=lambda e: e["time"]):
        job_id, kind, when = event["job_id"], event["event"], event["time"]
        if kind == "running":
            open_since.setdefault(job_id, when)
        elif kind in _STOPS and job_id in open_since:
            attempt = attempts.get(job_id)
            intervals.append(
                goodput.RunInterval(
                    job_id,
                    open_since.pop(job_id),
                    when,
                    bool(attempt and attempt.target.spot),
                    attempt.nodes if attempt else 1,
                    kind,
                )
            )
    for job_id, since in open_since.items():
        attempt = attempts.get(job_id)
        spot = bool(attempt and attempt.target.spot)
        intervals.append(
            goodput.RunInterval(job_id, since, now, spot, attempt.nodes if attempt else 1, "")
        )
    return goodput.bounded(intervals, history) if history else intervals


def compute(
    result: RunResult,
    *,
    prices: Prices = Prices(),
    history: Sequence[Record] | None = (),
    now: float | None = None,
) -> dict[str, float]:
    """The run's metrics as a flat dict (the keys are the KFP Metrics names).

    Args:
        result: The finished (or failed) run.
        prices: Node-hour prices for the cost and saving estimates.
        history: The checkpoint history the trainer wrote (``trainer.history.read``); None
            when the step cannot see the checkpoint directory. Without start lines in it the
            goodput figures are unknown and left out (never reported as 0); only an
            uninterrupted run then still reports ``work_lost_node_seconds`` (0).
        now: End of still-open intervals (default: the last event's time).
    """
    end = now if now is not None else max((e["time"] for e in result.events), default=0.0)
    intervals = run_intervals(result, end, history)
    running = sum(i.end - i.start for i in intervals)
    billed = sum(i.node_seconds for i in intervals)
    spot_hours = sum(i.node_seconds for i in intervals if i.spot) / 3600
    other_hours = sum(i.node_seconds for i in intervals if not i.spot) / 3600
    cost = spot_hours * prices.spot_node_hour + other_hours * prices.ondemand_node_hour
    all_ondemand = (spot_hours + other_hours) * prices.ondemand_node_hour
    metrics = {
        "preemptions": float(result.preemptions),
        "resubmissions": float(result.resubmissions),
        "attempts": float(len(result.attempts)),
        "wall_seconds": round(result.seconds, 3),
        "running_seconds": round(running, 3),
        "node_hours_billed": round(spot_hours + other_hours, 6),
        "billed_node_seconds": round(billed, 3),
        "spot_node_hours": round(spot_hours, 6),
        "cost": round(cost, 4),
        "estimated_spot_saving": round(all_ondemand - cost, 4),
        "hangs": float(sum(1 for a in result.attempts if a.hung_because)),
        "hang_node_hours_saved": round(
            sum(a.nodes * a.hang_saved_seconds for a in result.attempts) / 3600, 6
        ),
    }
    if history and goodput.segments(history):
        figures = goodput.totals(goodput.stretch_figures(intervals, history))
        metrics["goodput"] = round(figures["useful"] / billed, 4) if billed else 0.0
        for name in goodput.FIGURES:
            metrics[f"{name}_node_seconds"] = round(figures[name], 3)
        # Interruptions the next process resumed from a notice save of, and the others (no
        # notice, or a notice save that did not land in time: work since the last save lost).
        landed, missed = notice_outcomes(list(history))
        metrics["notice_saves_landed"] = float(landed)
        metrics["interruptions_without_notice_save"] = float(missed)
    elif not any(i.ended_by in INTERRUPTIONS for i in intervals):
        metrics["work_lost_node_seconds"] = 0.0
    return metrics


def call_metrics(
    calls: int, seconds: float, storage_calls: int = 0, pubsub_calls: int = 0
) -> dict[str, float]:
    """The step's API calls: ``vertex_calls`` (Vertex, Slurm through Vertex included),
    ``storage_calls`` (Cloud Storage reads that reached Cloud Storage), ``pubsub_calls`` (the
    progress messages' pulls and the rest, when used) and ``api_calls`` (all), each also per
    job-hour when time passed.

    Args:
        calls: Vertex API calls the step made for the run.
        seconds: Wall seconds the step supervised the run.
        storage_calls: Cloud Storage reads the step made while it watched the run.
        pubsub_calls: Pub/Sub calls for the job's progress messages.
    """
    counts = {"vertex_calls": calls, "storage_calls": storage_calls}
    if pubsub_calls:
        counts["pubsub_calls"] = pubsub_calls
    counts["api_calls"] = calls + storage_calls + pubsub_calls
    found = {name: float(value) for name, value in counts.items()}
    if seconds > 0:
        for name, value in counts.items():
            found[f"{name}_per_job_hour"] = round(value * 3600.0 / seconds, 1)
    return found
