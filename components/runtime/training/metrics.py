"""Numbers about a training run: preemptions, billed node-hours, work lost, goodput, savings.

Everything is computed from the run's event timeline (``RunResult.events``) and, for the work
lost, the times the checkpoints were written (manifest ``created`` times). Billing follows the
Spot rules of Vertex/Compute Engine: a node is billed while the job runs on it, not while it is
queued or preempted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from vsp.components.runtime.training.recovery import Attempt
from vsp.components.runtime.training.supervisor import RunResult

_STOPS = {"requeued", "pending", "preempted", "succeeded", "user_failure", "cancelled"}
INTERRUPTIONS = {"requeued", "preempted", "cancelled"}


@dataclasses.dataclass(frozen=True)
class Prices:
    """Prices per node-hour, in the user's currency.

    Attributes:
        spot_node_hour: Price of one Spot node for one hour.
        ondemand_node_hour: Price of one on-demand node for one hour.
    """

    spot_node_hour: float = 0.0
    ondemand_node_hour: float = 0.0


@dataclasses.dataclass(frozen=True)
class RunInterval:
    """One stretch of time an attempt ran on its nodes.

    Attributes:
        job_id: The attempt's job.
        start: Epoch seconds it started running.
        end: Epoch seconds it stopped.
        spot: Whether it ran on Spot capacity.
        nodes: Nodes it held.
        ended_by: The event that ended it (``succeeded``, ``requeued``, ``preempted``...).
    """

    job_id: str
    start: float
    end: float
    spot: bool
    nodes: int
    ended_by: str

    @property
    def node_seconds(self) -> float:
        return max(0.0, self.end - self.start) * self.nodes


def run_intervals(result: RunResult, now: float) -> list[RunInterval]:
    """The running stretches of every attempt, from the event timeline."""
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
                RunInterval(
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
        intervals.append(RunInterval(job_id, since, now, spot, attempt.nodes if attempt else 1, ""))
    return intervals


def interval_losses(
    intervals: Iterable[RunInterval], checkpoint_times: Iterable[float]
) -> list[tuple[RunInterval, float | None, float]]:
    """Each interval with the last checkpoint written inside it (or None) and the work it lost.

    For an interval ended by an interruption, the work since the last checkpoint written inside
    that interval (or since the interval's start when none was) is lost; other intervals lose
    nothing.
    """
    times = sorted(checkpoint_times)
    rows = []
    for interval in intervals:
        saved = [t for t in times if interval.start <= t <= interval.end]
        last = saved[-1] if saved else None
        lost = 0.0
        if interval.ended_by in INTERRUPTIONS:
            lost = interval.end - (interval.start if last is None else last)
        rows.append((interval, last, lost))
    return rows


def work_lost_seconds(intervals: Iterable[RunInterval], checkpoint_times: Iterable[float]) -> float:
    """Seconds of computation redone after interruptions (see ``interval_losses``)."""
    return sum(lost for _, _, lost in interval_losses(intervals, checkpoint_times))


def compute(
    result: RunResult,
    *,
    prices: Prices = Prices(),
    checkpoint_times: Iterable[float] | None = (),
    now: float | None = None,
) -> dict[str, float]:
    """The run's metrics as a flat dict (the keys are the KFP Metrics names).

    Args:
        result: The finished (or failed) run.
        prices: Node-hour prices for the cost and saving estimates.
        checkpoint_times: Epoch seconds at which checkpoints were written; None when the step
            cannot see the checkpoint directory. Then, if any run was interrupted, work lost
            and goodput are unknown and left out (never reported as 0).
        now: End of still-open intervals (default: the last event's time).
    """
    end = now if now is not None else max((e["time"] for e in result.events), default=0.0)
    intervals = run_intervals(result, end)
    running = sum(i.end - i.start for i in intervals)
    interrupted = any(i.ended_by in INTERRUPTIONS for i in intervals)
    known = checkpoint_times is not None or not interrupted
    lost = min(running, work_lost_seconds(intervals, checkpoint_times or ())) if known else 0.0
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
        "spot_node_hours": round(spot_hours, 6),
        "work_lost_seconds": round(lost, 3),
        "goodput": round((running - lost) / running, 4) if running else 0.0,
        "cost": round(cost, 4),
        "estimated_spot_saving": round(all_ondemand - cost, 4),
    }
    if not known:
        del metrics["work_lost_seconds"], metrics["goodput"]
    return metrics
