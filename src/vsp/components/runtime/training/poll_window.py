"""When a change seen by polling happened: within ``[previous poll, this poll]`` narrowed by
the backend's own time of it (Slurm: whole seconds; a requeue's end: none), the middle of what
both allow; a reported time outside the window moves to its nearest edge. Hand-rolled.
"""

from __future__ import annotations

from collections.abc import Callable


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

    def open(self) -> None:
        """Call right before a poll's request."""
        self.current = self.wall()

    def close(self) -> None:
        """Call after the poll's changes are recorded: the next window starts at this poll."""
        self.previous = self.current

    def when(self, reported: float | None = None) -> float:
        """Best estimate of a change seen by the poll in progress (see the module docstring)."""
        low, high = self.previous, max(self.previous, self.wall())
        if reported is None:
            return (low + high) / 2
        top = reported + self.resolution
        if top < low:
            return low
        if reported > high:
            return high
        return (max(low, reported) + min(high, top)) / 2
