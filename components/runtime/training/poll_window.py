"""When a state change seen by polling happened: between the poll that last saw the old state
and the one that saw the new, narrowed by the backend's own time of the change.

Slurm reports start and end times in whole seconds and nothing at all for when a requeued run
ended; a poll only says the change happened since the previous poll. ``PollWindow.when`` takes
what both allow: the window ``[previous poll began, this poll ended]`` intersected with
``[reported, reported + resolution]``, and returns its middle (the error is at most half of
the narrower one). A reported time outside the window (clocks that disagree, a job found again
after a step retry) is moved to the window's nearest edge. Hand-rolled: a few lines of interval
arithmetic.
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
