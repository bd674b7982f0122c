"""The stall rule: a running job whose training steps stopped is hung.

The trainer's step hook (``trainer.progress``) keeps one progress file per rank. The supervisor
reads them at every poll and notes, by its own clock, when each rank's file last changed. A rank
is stalled when its file has not changed for longer than the bound

    max(floor_seconds, step_factor x expected gap)

where the expected gap is what the rank itself last showed: its smoothed time per step, or the
time between its last two writes (at least the write interval), whichever is longer, so the rule
learns a slow step rate instead of assuming one. Not counted: a rank inside a blocking save
(``phase: saving``), and a process that has not reported its first step yet (start-up and
resume). A hang is detected within the bound plus one write interval plus one poll.

Several ranks: when every rank stalled, the one with the lowest step is named (the others wait
for it in a collective); otherwise the ranks that stopped while others went on. Hand-rolled: a
few timestamps per rank.
"""

from __future__ import annotations

import dataclasses

from vsp.components.runtime.trainer.progress import Progress


@dataclasses.dataclass(frozen=True)
class HangRule:
    """When a job without step progress counts as hung.

    Attributes:
        floor_seconds: Least time without progress before a job is hung, s (0: no detection).
        step_factor: Multiple of the expected time between progress writes that counts as hung.
    """

    floor_seconds: float = 1800.0
    step_factor: float = 20.0

    @property
    def enabled(self) -> bool:
        return self.floor_seconds > 0

    def bound(self, gap: float) -> float:
        """Seconds without progress that count as hung, for an expected ``gap`` between writes."""
        return max(self.floor_seconds, self.step_factor * gap)


@dataclasses.dataclass
class _Rank:
    """What the supervisor saw of one rank's file."""

    record: Progress
    changed_at: float
    gap: float = 0.0


@dataclasses.dataclass(frozen=True)
class Stall:
    """A detected hang: which rank stopped where, for how long, against which bound (s)."""

    step: int
    seconds: float
    bound: float
    rank: int
    host: str
    ranks: int
    all_stalled: bool = True

    def describe(self) -> str:
        where = f"rank {self.rank} on {self.host or 'an unknown host'}"
        if self.ranks > 1 and self.all_stalled:
            where += f" (of {self.ranks} ranks, all stalled: the lowest step; the others wait)"
        elif self.ranks > 1:
            where += f" (of {self.ranks} ranks; the others went on)"
        return (
            f"hung at step {self.step} for {self.seconds:.0f} s: no training step finished for "
            f"longer than the bound of {self.bound:.0f} s; {where} stopped"
        )


class HangWatch:
    """Applies a ``HangRule`` to the progress files of one job at a time.

    Args:
        rule: The rule.
    """

    def __init__(self, rule: HangRule):
        self.rule = rule
        self._job = ""
        self._ranks: dict[int, _Rank] = {}

    def observe(self, job: str, restart: int, records: list[Progress], now: float) -> Stall | None:
        """Takes one read of job ``job``'s progress (run ``restart``) at ``now`` (step clock).

        Returns:
            The stall when the job is hung, else None.
        """
        if job != self._job:
            self._job, self._ranks = job, {}
        current = [r for r in records if r.restart >= restart]
        for record in current:
            seen = self._ranks.get(record.rank)
            same_process = seen is not None and (seen.record.pid, seen.record.restart) == (
                record.pid,
                record.restart,
            )
            if not same_process:
                self._ranks[record.rank] = _Rank(record, now)
            elif record != seen.record:
                gap = record.time - seen.record.time if record.step > seen.record.step else 0.0
                seen.gap = gap if gap > 0 else seen.gap
                seen.record, seen.changed_at = record, now
        live = [self._ranks[r.rank] for r in current]
        if not live or not self.rule.enabled:
            return None
        stalled = []
        for rank in live:
            gap = max(rank.gap, rank.record.step_seconds)
            bound = self.rule.bound(gap)
            if rank.record.phase == "step" and now - rank.changed_at > bound:
                stalled.append((rank, bound))
        if not stalled:
            return None
        rank, bound = min(stalled, key=lambda item: (item[0].record.step, item[0].record.rank))
        return Stall(
            step=rank.record.step,
            seconds=now - rank.changed_at,
            bound=bound,
            rank=rank.record.rank,
            host=rank.record.host,
            ranks=len(live),
            all_stalled=len(stalled) == len(live),
        )
