"""The one polling primitive: wait for a condition with jittered exponential backoff.

Every long wait in the runtime (a cluster LRO, a Slurm job, a CustomJob) goes through
``poll_until``. Time is read and slept through a ``Clock`` so tests run with ``FakeClock`` and no
real sleeping. Each change of state, and a heartbeat during long unchanged waits, is logged on
the ``vsp.progress`` logger: what is awaited, for how long, and what comes next (the next check,
the deadline). ``vsp run-local`` shows those lines as its progress line. Transient errors
raised by the probe are absorbed and retried with backoff until the deadline; any other error
propagates at once.

Hand-rolled rather than ``google.api_core.retry``/``polling`` because those read the real clock,
cannot report progress between attempts, and cannot tell "not done yet" from "failed".
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import random
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from vsp.components.runtime.core import errors

T = TypeVar("T")

log = logging.getLogger(__name__)
# Progress of long waits: the lines `vsp run-local` shows, and a Vertex step's log shows alike.
PROGRESS_LOGGER = "vsp.progress"
progress_log = logging.getLogger(PROGRESS_LOGGER)


class Clock(abc.ABC):
    """Source of time for waits; injectable so tests never sleep for real."""

    @abc.abstractmethod
    def now(self) -> float:
        """Monotonic seconds."""

    @abc.abstractmethod
    def sleep(self, seconds: float) -> None:
        """Blocks for ``seconds`` (or pretends to)."""


class RealClock(Clock):
    """Wall clock: ``time.monotonic`` and ``time.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))


class FakeClock(Clock):
    """A clock that advances only when slept on; records every sleep."""

    def __init__(self, start: float = 0.0):
        self._now = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self._now += max(0.0, seconds)

    def advance(self, seconds: float) -> None:
        """Moves time forward without recording a sleep."""
        self._now += seconds


@dataclasses.dataclass(frozen=True)
class Backoff:
    """Jittered exponential backoff.

    Attributes:
        initial: First delay, seconds.
        maximum: Largest delay, seconds.
        multiplier: Growth factor between attempts.
        jitter: Fraction of the delay drawn at random (0 = none, 0.2 = up to +-20%).
    """

    initial: float = 1.0
    maximum: float = 30.0
    multiplier: float = 1.5
    jitter: float = 0.2

    def delays(self, rng: random.Random | None = None):
        """Yields an endless sequence of delays in seconds."""
        rng = rng or random.Random()
        delay = self.initial
        while True:
            spread = delay * self.jitter
            yield max(0.0, delay + rng.uniform(-spread, spread))
            delay = min(self.maximum, delay * self.multiplier)


@dataclasses.dataclass
class PollResult(Generic[T]):
    """What ``poll_until`` returns.

    Attributes:
        value: The last value returned by the probe (the one that satisfied ``done``).
        attempts: How many times the probe ran.
        elapsed: Seconds spent, by the clock.
    """

    value: T
    attempts: int
    elapsed: float


def poll_until(
    probe: Callable[[], T],
    done: Callable[[T], bool],
    *,
    what: str,
    timeout: float | None,
    backoff: Backoff = Backoff(),
    clock: Clock | None = None,
    on_change: Callable[[T, float], None] | None = None,
    describe: Callable[[T], str] = str,
    rng: random.Random | None = None,
    heartbeat: float | None = 60.0,
    delay_for: Callable[[T], float] | None = None,
    wait: Callable[[float], None] | None = None,
) -> PollResult[T]:
    """Calls ``probe`` until ``done(value)`` is true, sleeping with backoff in between.

    Args:
        probe: Fetches the current state. May raise ``TransientError`` (retried), except
            ``DeadlinePassedError``, which ends the wait (its client sends nothing more).
        done: Tells whether a state is final.
        what: Name of the thing waited on, for logs and the timeout message.
        timeout: Seconds before giving up with ``TimeoutExceededError``; None waits forever.
        backoff: Delay schedule between probes.
        clock: Time source; ``RealClock`` when None.
        on_change: Called with (state, elapsed seconds) whenever ``describe(state)`` changes;
            by default the change is logged at INFO on the ``vsp.progress`` logger with how
            long the wait has lasted, when the next check is and when the wait gives up.
        describe: Turns a state into the short text used to detect and log changes.
        rng: Random source for jitter (seed it in tests).
        heartbeat: While the state does not change, log "still ..." at most this often
            (seconds) so long waits show progress; None disables it.
        delay_for: Seconds to sleep after a probe that returned a value, chosen by the caller
            (a poll plan); None follows ``backoff``. After a transient error the backoff
            applies either way.
        wait: Waits between probes instead of ``clock.sleep``: up to the delay, less when
            something the caller listens to arrives (a long poll; it may overrun the delay by
            one such call, as a timeout is checked at the next probe).

    Returns:
        The final state with the attempt count and elapsed time.

    Raises:
        errors.TimeoutExceededError: The deadline passed before ``done`` held.
    """
    clock = clock or RealClock()
    start = clock.now()
    delays = backoff.delays(rng)
    attempts = 0
    last_seen: str | None = None
    last_transient: Exception | None = None
    last_log = start
    while True:
        attempts += 1
        changed, value, failed = False, None, False
        try:
            value = probe()
        except errors.DeadlinePassedError:
            raise  # the client sends nothing more: waiting on cannot see a change
        except errors.TransientError as exc:
            failed, last_transient = True, exc
            log.warning("%s: transient error while polling (attempt %d): %s", what, attempts, exc)
        else:
            seen = describe(value)
            changed, last_seen = seen != last_seen, seen
            if changed and on_change is not None:
                on_change(value, clock.now() - start)
            if done(value):
                elapsed = clock.now() - start
                if changed and on_change is None:
                    progress_log.info("%s: %s (%s)", what, _short(seen), duration(elapsed))
                return PollResult(value=value, attempts=attempts, elapsed=elapsed)
        elapsed = clock.now() - start
        delay = next(delays) if delay_for is None or failed else delay_for(value)
        if timeout is not None and elapsed + delay > timeout:
            if timeout - elapsed > 0.001:
                delay = timeout - elapsed
            else:
                suffix = f"; last transient error: {last_transient}" if last_transient else ""
                raise errors.TimeoutExceededError(
                    f"gave up waiting for {what} after {elapsed:.0f} s (timeout {timeout:.0f} s); "
                    f"last state: {last_seen or 'unknown'}{suffix}. Raise the timeout if the "
                    "resource is still progressing."
                )
        if changed and on_change is None:
            last_log = clock.now()
            progress_log.info(
                "%s: %s (%s; %s)",
                what,
                _short(last_seen),
                duration(elapsed),
                _next(delay, timeout, elapsed),
            )
        elif (
            last_seen is not None and heartbeat is not None and clock.now() - last_log >= heartbeat
        ):
            last_log = clock.now()
            progress_log.info(
                "%s: still %s after %s (%s)",
                what,
                _short(last_seen),
                duration(elapsed),
                _next(delay, timeout, elapsed),
            )
        (wait or clock.sleep)(delay)


def _short(state: str, limit: int = 90) -> str:
    """A state's description cut for a progress line (the timing after it must stay visible)."""
    return state if len(state) <= limit else state[: limit - 3] + "..."


def _next(delay: float, timeout: float | None, elapsed: float) -> str:
    """What comes next in a wait: the next look, and when the wait gives up."""
    text = f"next check in {duration(delay)}"
    if timeout is not None:
        text += f", gives up in {duration(max(0.0, timeout - elapsed))}"
    return text


def duration(seconds: float) -> str:
    """A duration for people: ``45 s``, ``3 min 20 s``, ``2 h 05 min``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 1 or seconds < 0.05 else f"{seconds:.1f} s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
