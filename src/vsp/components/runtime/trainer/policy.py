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
measured save (blocking part plus background persist), times a safety margin, does.

The interval itself comes from a strategy (``strategies``): ``NoticeFirst`` (the default) makes
periodic saves insurance against a failed notice save when a save fits in the notice, and uses
Young/Daly otherwise; ``YoungDaly`` always uses Young/Daly. ``explain()`` says which, with the
numbers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import strategies

"""Exit code after saving on a preemption notice: 128 + SIGTERM, what a shell reports for a
process stopped by SIGTERM, so supervisors treat both alike ("stopped early, rerun to resume").
It differs from 0 (done), 2 (user error), 70 (internal error) and 75 (transient error)."""

GCP_SPOT_NOTICE_S = 30.0
DEFAULT_MTBF_S = 3600.0
FORMULAS = ("young", "daly")


class CheckpointPolicy:
    """Decides at each step boundary whether to save, measuring the save cost as it goes.

    Exactly one mode: ``every_steps`` (fixed steps), ``every_seconds`` (fixed time), or neither
    (auto: the interval of ``strategy`` from the measured save costs and the estimated mean time
    between preemptions). Save costs are exponential moving averages of measured saves: the
    blocking part (``save_cost_s``) and the whole save up to its manifest (``save_total_s``;
    equal for blocking saves). The MTBF estimate is the posterior mean under a
    one-pseudo-preemption prior of ``mtbf_s``: ``(mtbf_s + run_seconds) / (1 + preemptions)``
    after ``observe`` (``mtbf_s`` before).

    Args:
        every_steps: Save when this many steps passed since the last save.
        every_seconds: Save when this much time passed since the last save, in seconds.
        mtbf_s: Given (prior) mean time between preemptions, in seconds, for auto mode.
        formula: "daly" or "young": the periodic formula of the default strategy.
        strategy: The auto-mode interval strategy (default ``NoticeFirst`` with ``formula``).
        notice_s: Preemption notice window, in seconds (30 s on GCP Spot).
        notice_margin: A save fits in the notice when ``save_total_s * notice_margin <=
            notice_s`` (dimensionless, >= 1).
        initial_save_cost_s: Save cost assumed before the first measured save, in seconds.
        smoothing: Weight of the newest measurement in the moving average, in (0, 1].
        min_interval_s: Lower clamp of the auto interval, in seconds.
        max_interval_s: Upper clamp of the auto interval, in seconds (None: no clamp).
        clock: Monotonic seconds; injectable for tests.
    """

    def __init__(
        self,
        *,
        every_steps: int | None = None,
        every_seconds: float | None = None,
        mtbf_s: float = DEFAULT_MTBF_S,
        formula: str = "daly",
        strategy: strategies.IntervalStrategy | None = None,
        notice_s: float = GCP_SPOT_NOTICE_S,
        notice_margin: float = strategies.DEFAULT_NOTICE_MARGIN,
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
        if not (math.isfinite(notice_s) and notice_s >= 0):
            raise errors.UserError(f"notice_s must be a finite number >= 0 s, got {notice_s!r}")
        if not (math.isfinite(notice_margin) and notice_margin >= 1):
            raise errors.UserError(f"notice_margin must be >= 1, got {notice_margin!r}")
        strategies.check_costs(initial_save_cost_s, mtbf_s)
        self.every_steps = every_steps
        self.every_seconds = every_seconds
        self.prior_mtbf_s = float(mtbf_s)
        self.formula = formula
        self.strategy = strategy or strategies.NoticeFirst(fallback=strategies.YoungDaly(formula))
        self.notice_s = float(notice_s)
        self.notice_margin = float(notice_margin)
        self.smoothing = smoothing
        self.min_interval_s = min_interval_s
        self.max_interval_s = max_interval_s
        self._clock = clock
        self.save_cost_s = float(initial_save_cost_s)
        self.save_total_s = float(initial_save_cost_s)
        self.measured_saves = 0
        self.measured_persists = 0
        self.preemptions = 0
        self.run_seconds = 0.0
        self.notices_landed = 0
        self.notices_failed = 0
        self.step_s = 0.0
        self.measured_steps = 0
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

    def costs(self) -> strategies.Costs:
        """The measured costs the strategy decides from."""
        return strategies.Costs(
            save_block_s=self.save_cost_s,
            save_total_s=max(self.save_total_s, self.save_cost_s),
            mtbf_s=self.mtbf_s,
            notice_s=self.notice_s,
            notice_margin=self.notice_margin,
            preemptions=self.preemptions,
            notices_landed=self.notices_landed,
            notices_failed=self.notices_failed,
            step_s=self.step_s,
        )

    @property
    def interval_s(self) -> float | None:
        """Seconds between saves (fixed or the strategy's); None in "steps" mode."""
        if self.mode == "steps":
            return None
        if self.every_seconds is not None:
            return float(self.every_seconds)
        # Never before the last save has persisted: a save due while one is still being
        # written waits for it, which blocks training as long as a blocking save would.
        raw = self.strategy.interval(self.costs())
        interval = max(self.min_interval_s, raw, self.save_total_s)
        return interval if self.max_interval_s is None else min(interval, self.max_interval_s)

    def explain(self) -> str:
        """One sentence saying when periodic saves happen and why, with the numbers."""
        if self.mode == "steps":
            return f"fixed: a periodic save every {self.every_steps} steps"
        if self.mode == "seconds":
            return f"fixed: a periodic save every {self.every_seconds:.4g} s of training"
        text = self.strategy.explain(self.costs())
        raw, interval = self.strategy.interval(self.costs()), self.interval_s or 0.0
        if interval != raw:
            text += f", clamped to {interval:.4g} s"
        return text

    def save_fits_notice(self, notice_s: float | None = None) -> bool:
        """Whether a whole measured save, times ``notice_margin``, fits in the notice window."""
        notice = self.notice_s if notice_s is None else notice_s
        return max(self.save_total_s, self.save_cost_s) * self.notice_margin <= notice

    def start(self, step: int) -> None:
        """(Re)starts the interval at ``step``, e.g. right after resuming from a checkpoint."""
        self.last_save_step = step
        self.last_save_time = self._clock()

    def observe(self, preemptions: int, run_seconds: float) -> None:
        """Feeds the preemption history (count, total run time) into the MTBF estimate."""
        self.preemptions = max(0, int(preemptions))
        self.run_seconds = max(0.0, float(run_seconds))

    def observe_notices(self, landed: int, failed: int) -> None:
        """Feeds the notice outcomes of the checkpoint history (``history.notice_outcomes``):
        preemptions whose notice save was resumed from, and those without one."""
        self.notices_landed = max(0, int(landed))
        self.notices_failed = max(0, int(failed))

    def should_save(self, step: int) -> bool:
        """Whether to save now, at the boundary after ``step`` finished."""
        if step <= self.last_save_step:
            return False
        if self.every_steps is not None:
            return step - self.last_save_step >= self.every_steps
        return self._clock() - self.last_save_time >= (self.interval_s or 0.0)

    def _average(self, old: float, new: float, count: int) -> float:
        return new if count == 0 else old + self.smoothing * (new - old)

    def record_save(self, step: int, duration_s: float, *, persisted: bool = True) -> None:
        """Records a save that blocked training ``duration_s``; restarts the interval.

        Args:
            step: The step saved.
            duration_s: Seconds the save blocked training.
            persisted: True for a blocking save (its duration is also the whole save); False
                when it persists in the background (report the whole time to ``record_persist``).
        """
        duration_s = max(0.0, float(duration_s))
        self.save_cost_s = self._average(self.save_cost_s, duration_s, self.measured_saves)
        self.measured_saves += 1
        if persisted:
            self.record_persist(duration_s)
        self.start(step)

    def record_step(self, duration_s: float) -> None:
        """Records the time of one training step, in s (the notice is seen at the next step
        boundary, so a step longer than the notice's slack makes notice saves fail)."""
        duration_s = max(0.0, float(duration_s))
        self.step_s = self._average(self.step_s, duration_s, self.measured_steps)
        self.measured_steps += 1

    def record_persist(self, total_s: float) -> None:
        """Records the time from the start of a save until its manifest was written, in s."""
        total_s = max(0.0, float(total_s))
        self.save_total_s = self._average(self.save_total_s, total_s, self.measured_persists)
        self.measured_persists += 1

    def state_dict(self) -> dict[str, Any]:
        """JSON-able state worth carrying across restarts (in checkpoint metadata)."""
        return {
            "save_cost_s": self.save_cost_s,
            "save_total_s": self.save_total_s,
            "measured_saves": self.measured_saves,
            "measured_persists": self.measured_persists,
            "preemptions": self.preemptions,
            "run_seconds": self.run_seconds,
            "step_s": self.step_s,
            "measured_steps": self.measured_steps,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restores what ``state_dict`` returned (unknown keys are ignored)."""
        self.save_cost_s = float(state.get("save_cost_s", self.save_cost_s))
        self.save_total_s = float(state.get("save_total_s", self.save_cost_s))
        self.measured_saves = int(state.get("measured_saves", self.measured_saves))
        self.measured_persists = int(state.get("measured_persists", self.measured_saves))
        self.step_s = float(state.get("step_s", self.step_s))
        self.measured_steps = int(state.get("measured_steps", self.measured_steps))
        self.observe(state.get("preemptions", 0), state.get("run_seconds", 0.0))
