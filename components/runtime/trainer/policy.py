"""When to checkpoint: the Young/Daly interval, a measuring policy, and the preemption notice.

Formulas (Young, CACM 17(9), 1974,
https://cacm.acm.org/magazines/1974/9/11664-a-first-order-approximation-to-the-optimum-checkpoint-interval;
Daly, FGCS 22(3), 2006), with C the blocking save cost and M the mean time
between preemptions, both in seconds:

* Young (1974): ``tau = sqrt(2 C M)``.
* Daly (2006): ``tau = sqrt(2 C M) * (1 + sqrt(C / (2 M)) / 3 + C / (18 M)) - C`` if ``C < 2 M``,
  else ``tau = M``.

``tau`` is the compute time between the end of one save and the start of the next.

Preemption notice: GCP Spot VMs get an ACPI soft-off (the guest sees SIGTERM) about 30 s before
the hard stop; Slurm can be told to send a signal ahead of preemption (e.g.
``--signal=USR1@30``). ``PreemptionNotice`` turns those signals into a flag; the training loop
checks ``notice.requested`` at every step boundary, saves a checkpoint there (so the step in
flight is finished, not lost) and exits with ``EXIT_PREEMPTED`` without finishing the run. A step
plus a save must fit in the notice window; ``CheckpointPolicy.save_fits_notice`` tells whether the
measured save cost takes at most half of it.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import contract

EXIT_PREEMPTED = contract.EXIT_PREEMPTED
"""Exit code after saving on a preemption notice: 128 + SIGTERM, what a shell reports for a
process stopped by SIGTERM, so supervisors treat both alike ("stopped early, rerun to resume").
It differs from 0 (done), 2 (user error), 70 (internal error) and 75 (transient error)."""

GCP_SPOT_NOTICE_S = 30.0
DEFAULT_MTBF_S = 3600.0
DEFAULT_NOTICE_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
FORMULAS = ("young", "daly")


def _check_costs(save_cost_s: float, mtbf_s: float) -> None:
    if not (math.isfinite(save_cost_s) and save_cost_s >= 0):
        raise errors.UserError(f"save cost must be a finite number >= 0 s, got {save_cost_s!r}")
    if not (math.isfinite(mtbf_s) and mtbf_s > 0):
        raise errors.UserError(f"mean time between preemptions must be > 0 s, got {mtbf_s!r}")


def young_interval(save_cost_s: float, mtbf_s: float) -> float:
    """Young's first-order optimal checkpoint interval ``sqrt(2 C M)``, in seconds."""
    _check_costs(save_cost_s, mtbf_s)
    return math.sqrt(2.0 * save_cost_s * mtbf_s)


def daly_interval(save_cost_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimal checkpoint interval, in seconds (``M`` when ``C >= 2M``)."""
    _check_costs(save_cost_s, mtbf_s)
    c, m = float(save_cost_s), float(mtbf_s)
    if c >= 2.0 * m:
        return m
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(c / (2.0 * m)) / 3.0 + c / (18.0 * m)) - c


class PreemptionNotice:
    """Turns preemption signals into a flag the training loop polls at step boundaries.

    Use as a context manager (or ``install``/``uninstall``) from the main thread; the previous
    handlers are restored on exit. The handler only sets the flag (no I/O in signal context).

    Attributes:
        signals: The signals handled.
        received: Number of the first signal received, or None (also None after ``request``).
        reason: Human-readable reason of the first notice, or "".
    """

    def __init__(self, signals: Iterable[int] = DEFAULT_NOTICE_SIGNALS):
        self.signals = tuple(signal.Signals(s) for s in signals)
        if not self.signals:
            raise errors.UserError("PreemptionNotice needs at least one signal")
        self.received: int | None = None
        self.reason = ""
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """True once a notice arrived: save at the next step boundary and stop."""
        return self._event.is_set()

    @property
    def installed(self) -> bool:
        """True while the signal handlers are installed."""
        return bool(self._previous)

    def request(self, reason: str = "requested") -> None:
        """Raises the flag without a signal (e.g. from a metadata-server poller thread)."""
        if not self._event.is_set():
            self.reason = reason
        self._event.set()

    def clear(self) -> None:
        """Lowers the flag (for tests and for loops that deliberately continue)."""
        self._event.clear()
        self.received = None
        self.reason = ""

    def _handle(self, signum: int, frame: Any) -> None:
        if not self._event.is_set():
            self.received = signum
            self.reason = signal.Signals(signum).name
        self._event.set()

    def install(self) -> PreemptionNotice:
        """Installs the handlers (idempotent); must run in the main thread."""
        if self._previous:
            return self
        if threading.current_thread() is not threading.main_thread():
            raise errors.UserError("install the preemption notice from the main thread")
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        """Restores the handlers that were in place before ``install``."""
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    def __enter__(self) -> PreemptionNotice:
        return self.install()

    def __exit__(self, *exc_info: Any) -> None:
        self.uninstall()


class CheckpointPolicy:
    """Decides at each step boundary whether to save, measuring the save cost as it goes.

    Exactly one mode: ``every_steps`` (fixed steps), ``every_seconds`` (fixed time), or neither
    (auto: the Young or Daly interval from the measured save cost and the estimated mean time
    between preemptions). The save cost is an exponential moving average of measured saves. The
    MTBF estimate is the posterior mean under a one-pseudo-preemption prior of ``mtbf_s``:
    ``(mtbf_s + run_seconds) / (1 + preemptions)`` after ``observe`` (``mtbf_s`` before).

    Args:
        every_steps: Save when this many steps passed since the last save.
        every_seconds: Save when this much time passed since the last save.
        mtbf_s: Given (prior) mean time between preemptions, for auto mode.
        formula: "daly" or "young", for auto mode.
        initial_save_cost_s: Save cost assumed before the first measured save.
        smoothing: Weight of the newest measurement in the moving average, in (0, 1].
        min_interval_s: Lower clamp of the auto interval.
        max_interval_s: Upper clamp of the auto interval (None: no clamp).
        clock: Monotonic seconds; injectable for tests.
    """

    def __init__(
        self,
        *,
        every_steps: int | None = None,
        every_seconds: float | None = None,
        mtbf_s: float = DEFAULT_MTBF_S,
        formula: str = "daly",
        initial_save_cost_s: float = 1.0,
        smoothing: float = 0.3,
        min_interval_s: float = 0.0,
        max_interval_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        if every_steps is not None and every_seconds is not None:
            raise errors.UserError("set every_steps or every_seconds, not both")
        if every_steps is not None and (isinstance(every_steps, bool) or every_steps < 1):
            raise errors.UserError(f"every_steps must be an int >= 1, got {every_steps!r}")
        if every_seconds is not None and not every_seconds > 0:
            raise errors.UserError(f"every_seconds must be > 0, got {every_seconds!r}")
        if formula not in FORMULAS:
            raise errors.UserError(f"formula must be one of {FORMULAS}, got {formula!r}")
        if not 0 < smoothing <= 1:
            raise errors.UserError(f"smoothing must be in (0, 1], got {smoothing!r}")
        _check_costs(initial_save_cost_s, mtbf_s)
        self.every_steps = every_steps
        self.every_seconds = every_seconds
        self.prior_mtbf_s = float(mtbf_s)
        self.formula = formula
        self.smoothing = smoothing
        self.min_interval_s = min_interval_s
        self.max_interval_s = max_interval_s
        self._clock = clock
        self.save_cost_s = float(initial_save_cost_s)
        self.measured_saves = 0
        self.preemptions = 0
        self.run_seconds = 0.0
        self.start(0)

    @classmethod
    def parse(cls, interval: str, **kwargs: Any) -> CheckpointPolicy:
        """Builds a policy from a CLI value: "auto" or a number of seconds."""
        if interval.strip().lower() == "auto":
            return cls(**kwargs)
        try:
            seconds = float(interval)
        except ValueError:
            raise errors.UserError(
                f"checkpoint interval {interval!r} is neither 'auto' nor seconds"
            ) from None
        return cls(every_seconds=seconds, **kwargs)

    @property
    def mode(self) -> str:
        """The mode: "steps", "seconds" or "auto"."""
        if self.every_steps is not None:
            return "steps"
        return "seconds" if self.every_seconds is not None else "auto"

    @property
    def mtbf_s(self) -> float:
        """Current estimate of the mean time between preemptions, in seconds."""
        return (self.prior_mtbf_s + self.run_seconds) / (1 + self.preemptions)

    @property
    def interval_s(self) -> float | None:
        """Seconds between saves (fixed or Young/Daly); None in "steps" mode."""
        if self.mode == "steps":
            return None
        if self.every_seconds is not None:
            return float(self.every_seconds)
        formula = daly_interval if self.formula == "daly" else young_interval
        interval = max(self.min_interval_s, formula(self.save_cost_s, self.mtbf_s))
        return interval if self.max_interval_s is None else min(interval, self.max_interval_s)

    def save_fits_notice(self, notice_s: float = GCP_SPOT_NOTICE_S) -> bool:
        """Whether the measured save cost takes at most half of the notice window."""
        return self.save_cost_s <= 0.5 * notice_s

    def start(self, step: int) -> None:
        """(Re)starts the interval at ``step``, e.g. right after resuming from a checkpoint."""
        self.last_save_step = step
        self.last_save_time = self._clock()

    def observe(self, preemptions: int, run_seconds: float) -> None:
        """Feeds the preemption history (count, total run time) into the MTBF estimate."""
        self.preemptions = max(0, int(preemptions))
        self.run_seconds = max(0.0, float(run_seconds))

    def should_save(self, step: int) -> bool:
        """Whether to save now, at the boundary after ``step`` finished."""
        if step <= self.last_save_step:
            return False
        if self.every_steps is not None:
            return step - self.last_save_step >= self.every_steps
        return self._clock() - self.last_save_time >= (self.interval_s or 0.0)

    def record_save(self, step: int, duration_s: float) -> None:
        """Records a finished save: updates the cost average and restarts the interval."""
        duration_s = max(0.0, float(duration_s))
        if self.measured_saves == 0:
            self.save_cost_s = duration_s
        else:
            self.save_cost_s += self.smoothing * (duration_s - self.save_cost_s)
        self.measured_saves += 1
        self.start(step)

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state worth carrying across restarts (in checkpoint metadata)."""
        return {
            "save_cost_s": self.save_cost_s,
            "measured_saves": self.measured_saves,
            "preemptions": self.preemptions,
            "run_seconds": self.run_seconds,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned (unknown keys are ignored)."""
        self.save_cost_s = float(state.get("save_cost_s", self.save_cost_s))
        self.measured_saves = int(state.get("measured_saves", self.measured_saves))
        self.observe(state.get("preemptions", 0), state.get("run_seconds", 0.0))
