"""Where the billed node time of a run went, in node-seconds (seconds x nodes).

Inputs: the running stretches (``RunInterval``) and the trainer's checkpoint history
(``trainer.history``). A *segment* is one trainer process, from its start/resume line to the
next one or its stretch's end. Each second of a stretch is in one figure: ``startup`` (stretch
start to the process's first line), ``reload``, ``useful`` (training up to the save the next
segment resumed from, or the last save, without periodic saves' blocked time),
``periodic_save``, ``notice_window`` (a resumed-from notice save's start to the stretch end),
``finish`` (the last save of a run that succeeded to its end) and ``work_lost`` (the rest).
So the figures sum to the billed time; goodput is ``useful / billed``. The stretches come from
the step's polls narrowed by the backend's own times; ``bounded`` then widens any that the
history proves too short: a node ran at least from its process's first line to that process's
last line. Hand-rolled: specific to this project's history.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from vsp.components.runtime.trainer.history import START_EVENTS, Record

FIGURES = ("useful", "startup", "reload", "periodic_save", "notice_window", "finish", "work_lost")


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


@dataclasses.dataclass
class Segment:
    """One trainer process: its start line and the saves it made."""

    start: Record
    saves: list[Record] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class StretchFigures:
    """One billed stretch and its seconds per figure (node-seconds: seconds x nodes)."""

    interval: RunInterval
    seconds: dict[str, float]
    last_save: Record | None = None


def segments(records: Sequence[Record]) -> list[Segment]:
    """The trainer processes in ``records`` (saves before the first start line are dropped)."""
    found: list[Segment] = []
    for record in sorted(records, key=lambda r: r.time):
        if record.event in START_EVENTS:
            found.append(Segment(record))
        elif found:
            found[-1].saves.append(record)
    return found


def bounded(intervals: Sequence[RunInterval], records: Sequence[Record]) -> list[RunInterval]:
    """The stretches, by start, each widened to hold the history of the processes that ran in
    it: it starts no later than their first line and ends no earlier than the end of their last
    one, without reaching into its neighbours. Stretches without a process are kept as they are.
    """
    ordered = sorted(intervals, key=lambda i: i.start)
    found = segments(records)
    homes = [_home(ordered, s) for s in found]
    widened = []
    for index, interval in enumerate(ordered):
        mine = [found[k] for k, home in enumerate(homes) if home == index]
        if not mine:
            widened.append(interval)
            continue
        first = min(s.start.time for s in mine)
        last = max(max([s.start.end, *(r.end for r in s.saves)]) for s in mine)
        floor = widened[-1].end if widened else first
        ceiling = ordered[index + 1].start if index + 1 < len(ordered) else last
        start = min(interval.start, max(first, floor))
        end = max(interval.end, min(last, ceiling))
        widened.append(dataclasses.replace(interval, start=start, end=end))
    return widened


def _home(intervals: Sequence[RunInterval], segment: Segment) -> int:
    """Index of the stretch a process ran in: the one its span overlaps most (stretch bounds
    are estimates); for a point, the one holding it, else the next to start, else the last."""
    low = segment.start.time
    high = max([segment.start.end, *(s.end for s in segment.saves)])
    overlaps = [max(0.0, min(i.end, high) - max(i.start, low)) for i in intervals]
    if overlaps and max(overlaps) > 0:
        return overlaps.index(max(overlaps))
    for index, interval in enumerate(intervals):
        if low <= interval.end:
            return index
    return max(0, len(intervals) - 1)


def _surviving_save(segment: Segment, resumed_step: int | None) -> Record | None:
    """The save of ``segment`` that the next segment resumed from (its last save when last)."""
    if resumed_step is None:
        return segment.saves[-1] if segment.saves else None
    kept = [s for s in segment.saves if segment.start.step <= s.step <= resumed_step]
    return kept[-1] if kept and kept[-1].step == resumed_step else None


def _segment_figures(
    segment: Segment, resumed_step: int | None, low: float, high: float, finished: bool
) -> tuple[dict[str, float], Record | None]:
    """Figures of one segment clamped to ``[low, high]`` (its share of its stretch);
    ``finished``: the run ended with this segment's last save (whatever its reason)."""

    def clamp(value: float) -> float:
        return min(max(value, low), high)

    began = clamp(segment.start.time)
    trained_from = clamp(segment.start.end)
    figures = dict.fromkeys(FIGURES, 0.0)
    figures["startup"] = began - low
    figures["reload"] = trained_from - began
    kept = _surviving_save(segment, resumed_step)
    if kept is None:
        figures["work_lost"] = high - trained_from
        return figures, None
    kept_at = clamp(kept.time)
    blocked = sum(
        clamp(s.end) - clamp(s.time) for s in segment.saves if s.time < kept.time and s is not kept
    )
    figures["useful"] = max(0.0, kept_at - trained_from - blocked)
    figures["periodic_save"] = kept_at - trained_from - figures["useful"]
    if finished or kept.reason == "final":
        figures["finish"] = high - kept_at
    elif kept.reason == "notice":
        figures["notice_window"] = high - kept_at
    else:
        kept_end = clamp(kept.end)
        figures["periodic_save"] += kept_end - kept_at
        figures["work_lost"] = high - kept_end
    return figures, kept


def stretch_figures(
    intervals: Sequence[RunInterval], records: Sequence[Record]
) -> list[StretchFigures]:
    """Each stretch with its node-seconds per figure (no process in it: all ``startup``)."""
    ordered = sorted(intervals, key=lambda i: i.start)
    found = segments(records)
    homes = [_home(ordered, s) for s in found]
    rows = []
    for index, interval in enumerate(ordered):
        totals = dict.fromkeys(FIGURES, 0.0)
        mine = [k for k, home in enumerate(homes) if home == index]
        last_save = None
        if not mine:
            totals["startup"] = interval.end - interval.start
        low = interval.start
        for position, k in enumerate(mine):
            following = found[k + 1] if k + 1 < len(found) else None
            resumed = following.start.step if following is not None else None
            nxt = mine[position + 1] if position + 1 < len(mine) else None
            high = interval.end if nxt is None else min(interval.end, found[nxt].start.time)
            high = max(high, low)
            finished = following is None and interval.ended_by == "succeeded"
            figures, kept = _segment_figures(found[k], resumed, low, high, finished)
            for name in FIGURES:
                totals[name] += figures[name]
            last_save = kept or last_save
            low = high
        scaled = {name: value * interval.nodes for name, value in totals.items()}
        rows.append(StretchFigures(interval, scaled, last_save))
    return rows


def totals(rows: Sequence[StretchFigures]) -> dict[str, float]:
    """Node-seconds per figure over all stretches."""
    return {name: sum(row.seconds[name] for row in rows) for name in FIGURES}
