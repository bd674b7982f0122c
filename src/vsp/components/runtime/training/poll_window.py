"""When a change seen by polling happened: within ``[previous poll, this poll]`` narrowed by
the backend's own time of it (Slurm: whole seconds; a requeue's end: none), the middle of what
both allow; a reported time outside the window moves to its nearest edge.

Signs of life narrow it further: a beacon the running job wrote at ``t`` moves the window's start
to ``t``; and when a later read still showed that same write although the job's heartbeat would
have rewritten it by ``t + heartbeat`` (a read at ``R`` reflects the file as of ``R - cache`` at
worst), the job was gone by then, so an end seen now is dated within ``[t, t + heartbeat]``
(``ended``), not in the middle of the long wait until the step noticed. A later run that
found the job's beacon tells the last write of the run before it (``last_write``): that run was
gone within a heartbeat of it, however rarely the step looked; and a run's own ``exiting`` is its
last write by its word (``final_write``). Hand-rolled.
"""

from __future__ import annotations

from collections.abc import Callable

from vsp.components.runtime.training.beacon import Beacon


class PollWindow:
    """The time window of the poll in progress.

    Args:
        wall: Epoch-seconds source.
        resolution: Seconds of precision of the backend's reported times (Slurm: 1).
        since: When the old state was last known to hold (e.g. the submission).
    """

    def __init__(self, wall: Callable[[], float], resolution: float, since: float):
        self.wall = wall
        self.resolution = resolution
        self.previous = since
        self.current = since
        self._written: float | None = None  # the running job's last write seen
        self._quiet_read: float | None = None  # a later read that still showed it
        self._gone_by: float | None = None  # the job was gone by then (this poll only)
        self._final: float | None = None  # the running job's exit, told by its beacon

    def open(self) -> None:
        """Call right before a poll's request."""
        self.current = self.wall()

    def alive(
        self,
        written: float,
        *,
        read_at: float | None = None,
        heartbeat: float = 0.0,
        cache: float = 0.0,
    ) -> None:
        """A write of the running job seen at this poll (see the module docstring).

        Args:
            written: When the job wrote it (the cluster's clock): it was alive then.
            read_at: When this poll read it (None: not read now, the last copy seen).
            heartbeat: Longest time between two writes of a live job (0: none promised).
            cache: How stale a read may be (the FUSE cache's time).
        """
        written = min(written, self.wall())
        if self._written is None or written > self._written:
            self._written, self._quiet_read = written, None
        elif read_at is not None and written == self._written:
            self._quiet_read = read_at
        self.previous = max(self.previous, written)
        quiet = self._quiet_read is not None and self._quiet_read - cache >= written + heartbeat
        self._gone_by = written + heartbeat if heartbeat > 0 and quiet else None

    def evidence(
        self,
        beacon: Beacon,
        job_id: str,
        restart: int,
        *,
        read_at: float | None,
        heartbeat: float,
        cache: float,
    ) -> None:
        """What ``beacon`` tells of run ``restart`` of ``job_id``, the one Vertex saw RUNNING:
        written by that run, it was alive at the beacon's ``time`` (``alive``); written by a
        later run that found that run's last write, it was gone within a heartbeat of that
        (``last_write``); anything else tells nothing of it."""
        if beacon.job != job_id:
            return
        if beacon.restart == restart and beacon.state == "exiting":
            self.final_write(beacon.time)
        elif beacon.restart == restart:
            self.alive(beacon.time, read_at=read_at, heartbeat=heartbeat, cache=cache)
        elif beacon.prev_time is not None and beacon.prev_restart == restart < beacon.restart:
            self.last_write(beacon.prev_time, heartbeat)

    def last_write(self, written: float, heartbeat: float) -> None:
        """The running job's last write, known to be its last (a later run of the job found
        it when it started): the run was alive then, and gone ``heartbeat`` seconds after."""
        written = min(written, self.wall())
        self.previous = max(self.previous, written)
        if heartbeat > 0:
            self._gone_by = written + heartbeat

    def final_write(self, written: float) -> None:
        """The running job's ``exiting``, its last write by its own word: it was gone within
        the backend's resolution after it. Unlike the other bounds it holds past this poll,
        until a later poll's window starts after it (the step may see the job's exit message
        and ask Vertex only later, when the next run has started)."""
        written = min(written, self.wall())
        self.previous = max(self.previous, written)
        self._final = written

    def _bound(self) -> float | None:
        """When the running job was gone by, as far as this poll knows (None: not known)."""
        final = None if self._final is None else self._final + self.resolution
        found = [b for b in (self._gone_by, final) if b is not None and b >= self.previous]
        return min(found) if found else None

    @property
    def bounded(self) -> bool:
        """Whether this poll knows when the running job was gone by (``ended`` is bounded)."""
        return self._bound() is not None

    def close(self) -> None:
        """Call after the poll's changes are recorded: the next window starts at this poll."""
        self.previous = max(self.previous, self.current)
        self._gone_by = None

    def when(self, reported: float | None = None) -> float:
        """Best estimate of a change seen by the poll in progress (see the module docstring)."""
        return self._within(self.previous, max(self.previous, self.wall()), reported)

    def ended(self, reported: float | None = None, before: float | None = None) -> float:
        """Best estimate of the end of the run that was alive (``alive``) seen by this poll:
        ``when``, bounded by the time the run's silence shows it was gone, and by ``before``
        (e.g. the start of the run that followed it) when given."""
        high = max(self.previous, self.wall())
        bound = self._bound()
        if bound is not None:
            high = min(high, bound)
        if before is not None:
            high = max(self.previous, min(high, before))
        return self._within(self.previous, high, reported)

    def _within(self, low: float, high: float, reported: float | None) -> float:
        if reported is None:
            return (low + high) / 2
        top = reported + self.resolution
        if top < low:
            return low
        if reported > high:
            return high
        return (max(low, reported) + min(high, top)) / 2
