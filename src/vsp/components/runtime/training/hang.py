"""The stall rule: a running job whose training steps stopped is hung.

The trainer's step hook (``trainer.progress``) keeps one progress file per rank. The supervisor
reads them at every poll and notes, by its own clock, when each rank's file last changed. A rank
is stalled when its file has not changed for longer than the bound

    max(floor_seconds, step_factor x expected gap)

where the expected gap is what the rank itself last showed: its smoothed time per step, or its
time per step between the last two reads, whichever is longer, so the rule learns a slow step
rate instead of assuming one. A blocking save (``phase: saving``) has its own,
wider bound, ``max(SAVE_FLOOR_FACTOR x floor_seconds, step_factor x the longest save the rank
finished)``, so a long save is not a hang but a save stuck on I/O is; so has a rank past its
final checkpoint (``phase: finishing``: writing the model, tearing down, exiting), so a slow exit
is not a hang but a teardown stuck in a collective is. Not counted at all: a
process that has not reported its first step yet (start-up and resume). A hang is detected
within its bound plus one write interval plus one poll.

Several ranks: a stalled rank whose file is not even rewritten any more (its ``beat``, written by
a thread of the trainer process every interval, unchanged for more than half the bound) has
stopped altogether (SIGSTOP, a dead node) and is named first when other ranks are alive (their
beat goes on, as it does for a rank blocked in a collective waiting for the stopped one).
Otherwise, when every rank stalled, the one with the lowest step is named (the others wait for
it in a collective); else the ranks that stopped while others went on. Hand-rolled: a few
timestamps per rank.
"""

from __future__ import annotations

import dataclasses

from vsp.components.runtime.trainer.progress import Progress

SAVE_FLOOR_FACTOR = 3.0


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

    def save_bound(self, longest_save: float) -> float:
        """Seconds a blocking save may take before it counts as hung."""
        return max(SAVE_FLOOR_FACTOR * self.floor_seconds, self.step_factor * longest_save)


@dataclasses.dataclass
class _Rank:
    """What the supervisor saw of one rank's file."""

    record: Progress
    changed_at: float
    gap: float = 0.0
    longest_save: float = 0.0


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
    saving: bool = False
    silent: bool = False
    finishing: bool = False
    tied: int = 1

    def describe(self) -> str:
        stuck = (
            f"hung at step {self.step} for {self.seconds:.0f} s: no training step finished for "
            f"longer than the bound of {self.bound:.0f} s; "
        )
        if self.ranks > 1 and self.all_stalled and not self.silent and self.tied > 1:
            # A rank stuck inside a step holds the others in the step's collective: all show
            # the same step and beat on, so progress alone cannot tell which one it is.
            return stuck + (
                f"{self.tied} of {self.ranks} ranks stopped at that step, none ahead (one stuck "
                "inside the step holds the others in its collective; which one, progress "
                "cannot tell: each rank's last log lines can)"
            )
        where = f"rank {self.rank} on {self.host or 'an unknown host'}"
        if self.saving:
            where += " (in a blocking save)"
        if self.finishing:
            where += " (after its final checkpoint: writing the model or exiting)"
        if self.ranks > 1 and self.silent:
            where += (
                f" (of {self.ranks} ranks; its process stopped altogether, "
                "while the others are alive)"
            )
        elif self.ranks > 1 and self.all_stalled:
            where += f" (of {self.ranks} ranks, all stalled: the lowest step; the others wait)"
        elif self.ranks > 1:
            where += f" (of {self.ranks} ranks; the others went on)"
        return f"{stuck}{where} stopped"


class HangWatch:
    """Applies a ``HangRule`` to the progress files of one job at a time.

    Args:
        rule: The rule.
    """

    def __init__(self, rule: HangRule):
        self.rule = rule
        self._job = ""
        self._ranks: dict[int, _Rank] = {}
        self._read_at: float | None = None

    def due(self, job: str, now: float) -> bool:
        """Whether the progress of ``job`` should be read at ``now``: only when a stall could be
        declared (the first rank's last change plus its step bound has passed), or, before any
        record of the job was seen, every quarter floor. Each read lists the progress folder
        and reads each rank's record (Cloud Storage calls), so a job making progress is read
        about once per bound, and a hang is still found at its bound.

        A rank last seen saving or finishing counts with its step bound too, not its wider one:
        its save may have ended just after that read and the rank stopped in the next step,
        which is a stall at the step bound from then (so a long save is read once per bound)."""
        if job != self._job or not self._ranks:
            return self._read_at is None or now - self._read_at >= self.rule.floor_seconds / 4
        newest = max(rank.record.restart for rank in self._ranks.values())
        earliest = min(
            rank.changed_at
            + min(
                self.rule.bound(max(rank.gap, rank.record.step_seconds)),
                self.rule.save_bound(rank.longest_save),
            )
            for rank in self._ranks.values()
            if rank.record.restart == newest
        )
        return now > earliest

    def observe(
        self,
        job: str,
        restart: int,
        records: list[Progress],
        now: float,
        wall: float | None = None,
    ) -> Stall | None:
        """Takes one read of job ``job``'s progress (run ``restart``) at ``now`` (step clock).

        Args:
            job: The Slurm job id.
            restart: The job's restart count (records of earlier runs are left out).
            records: Every rank's record as read.
            now: Step-clock seconds of the read.
            wall: Epoch seconds of the read (None: unknown). With it, a change is placed at
                the record's own write time (``time``, cluster clock) when that falls between
                the previous read and this one (else at this read): reads come about once per
                bound (``due``), and timing a change at its read would find a hang up to a
                bound late.

        Returns:
            The stall when the job is hung, else None.
        """
        if job != self._job:
            self._job, self._ranks, self._read_at = job, {}, None
        previous, self._read_at = self._read_at, now

        def changed_at(record: Progress) -> float:
            if wall is None or previous is None:
                return now
            age = wall - record.time
            if not 0.0 < age <= now - previous:
                return now  # skewed or incomparable clocks: the read's own time
            return now - age

        self._ranks = {k: v for k, v in self._ranks.items() if v.record.restart >= restart}
        current = [r for r in records if r.restart >= restart]
        for record in current:
            seen = self._ranks.get(record.rank)
            same_process = seen is not None and (seen.record.pid, seen.record.restart) == (
                record.pid,
                record.restart,
            )
            if not same_process:
                self._ranks[record.rank] = _Rank(record, changed_at(record))
            elif dataclasses.replace(record, beat=0.0) == dataclasses.replace(
                seen.record, beat=0.0
            ):
                if record.beat != seen.record.beat:  # alive, but no step since
                    seen.record = record
            else:
                # The time per step since the last read (reads come about once per bound, so
                # the time between the two records alone would grow the bound at every read).
                steps = record.step - seen.record.step
                gap = (record.time - seen.record.time) / steps if steps > 0 else 0.0
                seen.gap = gap if gap > 0 else seen.gap
                if seen.record.phase == "saving" and record.phase != "saving":
                    seen.longest_save = max(seen.longest_save, record.time - seen.record.time)
                seen.record, seen.changed_at = record, changed_at(record)
        live = [self._ranks[r.rank] for r in current]
        if not live or not self.rule.enabled:
            return None
        stalled = []
        for rank in live:
            if rank.record.phase in ("saving", "finishing"):
                bound = self.rule.save_bound(rank.longest_save)
            else:
                bound = self.rule.bound(max(rank.gap, rank.record.step_seconds))
            if now - rank.changed_at > bound:
                stalled.append((rank, bound))
        if not stalled:
            return None
        # Stopped altogether: a rank with a heartbeat whose last beat is more than half the
        # bound older than the freshest beat of the job's ranks, while other ranks are still
        # alive (a rank waiting in a collective for it beats on). The beats' own times (the
        # nodes' clocks, synchronised within a cluster) are compared, not when they were read:
        # reads come about once per bound (``due``), and a rank that beat a few more times
        # after one read and then stopped would look as fresh as the living at the next.
        beats = [rank.record.beat for rank in live if rank.record.heartbeat]
        freshest = max(beats, default=0.0)
        silent = [
            item
            for item in stalled
            if item[0].record.heartbeat and freshest - item[0].record.beat > item[1] / 2
        ]
        named = silent if silent and len(silent) < len(live) else stalled
        rank, bound = min(named, key=lambda item: (item[0].record.step, item[0].record.rank))
        return Stall(
            step=rank.record.step,
            seconds=now - rank.changed_at,
            bound=bound,
            rank=rank.record.rank,
            host=rank.record.host,
            ranks=len(live),
            all_stalled=len(stalled) == len(live),
            saving=rank.record.phase == "saving",
            silent=named is silent,
            finishing=rank.record.phase == "finishing",
            tied=sum(1 for item in named if item[0].record.step == rank.record.step),
        )
