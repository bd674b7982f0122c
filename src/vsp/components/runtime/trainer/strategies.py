"""Interval strategies of the checkpoint policy: Young/Daly, and notice-first.

Each strategy is a small class (in the spirit of SkyPilot's recovery strategies) that turns the
measured costs into the compute time between two periodic saves and explains its choice in one
sentence with the numbers.

* ``YoungDaly``: the periodic save is the only protection. Daly (2006) or Young (1974), see
  ``policy``.
* ``NoticeFirst``: a Spot VM gets a notice (30 s on GCP) before the hard stop, and a save that
  completes within it loses no work. When the whole save (blocking part plus background persist)
  fits in the notice with a safety margin, periodic saves only insure against the notice save
  failing, with probability ``p`` (``p_notice_fail``). With ``C`` the blocking cost of a save,
  ``M`` the mean time between preemptions and ``tau`` the interval, the expected overhead per
  unit of time is ``C / tau`` (saving) plus ``p * tau / (2 M)`` (half an interval lost, on the
  fraction ``p`` of preemptions whose notice save fails). Its minimum is at
  ``tau = sqrt(2 C M / p)``: Young's interval with ``M / p`` for ``M``. When the save does not fit
  in the notice, the strategy falls back to Young/Daly. ``p`` is learned from the checkpoint
  history (``history.notice_outcomes``): of the preemptions seen so far, ``k`` whose notice save
  the next process resumed from and ``f`` without one. With a Beta prior centred on
  ``p_notice_fail`` and worth ``prior_strength`` preemptions (``a = p0 n0``, ``b = (1 - p0) n0``),
  ``p`` is the posterior mean ``(a + f) / (n0 + k + f)``: a few observations barely move it
  (n0 = 50: one failure in 5 preemptions gives 0.036 from 0.02, 5 landed notice saves 0.018).

  The trainer sees the notice only at its next step boundary, up to one step later: with steps
  of ``S`` seconds and a slack ``s = notice - save_total`` (the notice window less a whole save),
  a notice that lands uniformly within a step leaves too little time for the save with
  probability ``q = (S - s) / S`` when ``S > s`` (0 otherwise; e.g. 10 s steps, a 26 s save in a
  30 s notice: ``q = 0.6``). The policy measures ``S``, so the prior is centred on the failure
  probability it can compute, ``p_notice_fail + (1 - p_notice_fail) q``, not on ``p_notice_fail``
  alone: otherwise the history has to correct a prior that is known to be wrong, and until it
  has, the insurance interval is far longer than it should be (the saves a step-late notice
  misses are lost).

Hand-written: the formulas are a few lines, and no maintained library computes them.
"""

from __future__ import annotations

import dataclasses
import math

from vsp.components.runtime.core import errors

DEFAULT_P_NOTICE_FAIL = 0.02
DEFAULT_NOTICE_MARGIN = 1.1
DEFAULT_PRIOR_STRENGTH = 50.0


def young_interval(save_cost_s: float, mtbf_s: float) -> float:
    """Young's first-order optimal checkpoint interval ``sqrt(2 C M)``, in seconds."""
    check_costs(save_cost_s, mtbf_s)
    return math.sqrt(2.0 * save_cost_s * mtbf_s)


def daly_interval(save_cost_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimal checkpoint interval, in seconds (``M`` when ``C >= 2M``)."""
    check_costs(save_cost_s, mtbf_s)
    c, m = float(save_cost_s), float(mtbf_s)
    if c >= 2.0 * m:
        return m
    return math.sqrt(2.0 * c * m) * (1.0 + math.sqrt(c / (2.0 * m)) / 3.0 + c / (18.0 * m)) - c


def check_costs(save_cost_s: float, mtbf_s: float) -> None:
    """UserError unless the save cost is finite and >= 0 s and the MTBF finite and > 0 s."""
    if not (math.isfinite(save_cost_s) and save_cost_s >= 0):
        raise errors.UserError(f"save cost must be a finite number >= 0 s, got {save_cost_s!r}")
    if not (math.isfinite(mtbf_s) and mtbf_s > 0):
        raise errors.UserError(f"mean time between preemptions must be > 0 s, got {mtbf_s!r}")


@dataclasses.dataclass(frozen=True)
class Costs:
    """What the strategies decide from, all in seconds.

    Attributes:
        save_block_s: Training time a save blocks (the whole save when saves are blocking; the
            in-memory snapshot when they persist in the background).
        save_total_s: Time from the start of a save until its manifest is written.
        mtbf_s: Estimated mean time between preemptions.
        notice_s: Preemption notice window (30 s on GCP Spot).
        notice_margin: Safety factor: a save fits when ``save_total_s * notice_margin <= notice_s``.
        preemptions: Preemptions observed so far (for the explanation).
        notices_landed: Preemptions whose notice save the next trainer process resumed from.
        notices_failed: Preemptions after which the next process found no notice save.
        step_s: Measured time of one training step (the notice is seen at the next step
            boundary); 0 when not measured yet.
    """

    save_block_s: float
    save_total_s: float
    mtbf_s: float
    notice_s: float
    notice_margin: float = DEFAULT_NOTICE_MARGIN
    preemptions: int = 0
    notices_landed: int = 0
    notices_failed: int = 0
    step_s: float = 0.0

    @property
    def fits_notice(self) -> bool:
        """Whether a whole save, with the margin, completes within the notice window."""
        return self.save_total_s * self.notice_margin <= self.notice_s

    @property
    def p_late(self) -> float:
        """Probability that the notice is seen too late for a whole save to complete: the
        step boundary after the notice comes uniformly within ``step_s``, and the save needs
        ``save_total_s`` of the ``notice_s`` window (see the module docstring)."""
        slack = self.notice_s - self.save_total_s
        if slack <= 0:
            return 1.0
        step = max(0.0, self.step_s)
        return 0.0 if step <= slack else (step - slack) / step

    def describe(self) -> str:
        """The measured costs in words."""
        if self.save_total_s > self.save_block_s:
            save = f"a save takes {self.save_total_s:.3g} s ({self.save_block_s:.3g} s blocking)"
        else:
            save = f"a save blocks training {self.save_block_s:.3g} s"
        seen = "prior" if self.preemptions == 0 else f"{self.preemptions} preemptions observed"
        return f"{save}, mean time between preemptions {self.mtbf_s:.4g} s ({seen})"


class IntervalStrategy:
    """Base class: chooses the compute time between periodic saves from ``Costs``."""

    name = "base"

    def interval(self, costs: Costs) -> float:
        """Seconds of compute between the end of one periodic save and the start of the next."""
        raise NotImplementedError

    def explain(self, costs: Costs) -> str:
        """One sentence with the numbers behind ``interval(costs)``."""
        raise NotImplementedError


class YoungDaly(IntervalStrategy):
    """Periodic saves as the only protection: Daly's (or Young's) optimal interval.

    Args:
        formula: "daly" or "young".
    """

    name = "young-daly"

    def __init__(self, formula: str = "daly"):
        if formula not in ("young", "daly"):
            raise errors.UserError(f"formula must be 'young' or 'daly', got {formula!r}")
        self.formula = formula

    def interval(self, costs: Costs) -> float:
        """Daly's (or Young's) interval from the blocking save cost and the MTBF."""
        function = daly_interval if self.formula == "daly" else young_interval
        return function(costs.save_block_s, costs.mtbf_s)

    def explain(self, costs: Costs) -> str:
        """E.g. "young-daly: a save blocks training 30 s, ...: a periodic save every 444 s ..."."""
        return (
            f"{self.name}: {costs.describe()}; {self.formula.capitalize()}'s interval gives a"
            f" periodic save every {self.interval(costs):.4g} s of training"
        )


class NoticeFirst(IntervalStrategy):
    """Save on the notice; periodic saves insure against the notice save failing.

    Args:
        p_notice_fail: Prior probability that a save started on the notice does not complete
            (the notice is missed, the VM dies without one, the save hits an error), in (0, 1];
            the centre of the Beta prior that the observed notice outcomes update.
        fallback: The strategy used when a save does not fit in the notice.
        prior_strength: How many preemptions the prior is worth (> 0).
    """

    name = "notice-first"

    def __init__(
        self,
        p_notice_fail: float = DEFAULT_P_NOTICE_FAIL,
        fallback: IntervalStrategy | None = None,
        prior_strength: float = DEFAULT_PRIOR_STRENGTH,
    ):
        if not (isinstance(p_notice_fail, (int, float)) and 0 < p_notice_fail <= 1):
            raise errors.UserError(
                f"p_notice_fail must be a probability in (0, 1], got {p_notice_fail!r}"
            )
        if not (isinstance(prior_strength, (int, float)) and prior_strength > 0):
            raise errors.UserError(f"prior_strength must be > 0, got {prior_strength!r}")
        self.p_notice_fail = float(p_notice_fail)
        self.prior_strength = float(prior_strength)
        self.fallback = fallback or YoungDaly()

    def prior_p(self, costs: Costs) -> float:
        """The prior centre: ``p_notice_fail``, or else the notice seen a step too late."""
        return self.p_notice_fail + (1.0 - self.p_notice_fail) * costs.p_late

    def p(self, costs: Costs) -> float:
        """The posterior mean of the notice-save failure probability (module docstring)."""
        landed, failed = max(0, costs.notices_landed), max(0, costs.notices_failed)
        prior_failed = self.prior_p(costs) * self.prior_strength
        return (prior_failed + failed) / (self.prior_strength + landed + failed)

    def evidence(self, costs: Costs) -> str:
        """Where ``p`` comes from, in words."""
        centre = self.prior_p(costs)
        prior = f"Beta prior centred on {centre:.3g}"
        if costs.p_late > 0:
            prior += (
                f" ({self.p_notice_fail:.3g}, or a {costs.step_s:.3g} s step seeing the notice"
                f" too late for the save: {costs.p_late:.3g})"
            )
        prior += f" worth {self.prior_strength:.3g}"
        seen = costs.notices_landed + costs.notices_failed
        if seen <= 0:
            return f"{prior} preemptions; none in the checkpoint history yet"
        return (
            f"{prior} preemptions, updated by the checkpoint history: notice saves resumed"
            f" from {costs.notices_landed}, preemptions without one {costs.notices_failed}"
        )

    def interval(self, costs: Costs) -> float:
        """``sqrt(2 C M / p)`` when the save fits in the notice, else the fallback's interval."""
        if not costs.fits_notice:
            return self.fallback.interval(costs)
        return young_interval(costs.save_block_s, costs.mtbf_s / self.p(costs))

    def explain(self, costs: Costs) -> str:
        """One sentence: whether the save fits the notice, and the interval that follows."""
        limit = (
            f"{costs.notice_s:.3g} s notice (with the {costs.notice_margin:.3g}x safety margin"
            " it needs)"
        )
        if not costs.fits_notice:
            fallback = self.fallback.explain(costs)
            return f"{self.name}: the save does not fit in the {limit}, so {fallback}"
        p = self.p(costs)
        return (
            f"{self.name}: {costs.describe()}; the save fits in the {limit}, so periodic saves"
            f" only insure against a failed notice save (p = {p:.3g}: {self.evidence(costs)}):"
            f" every {self.interval(costs):.4g} s of training = sqrt(2 x"
            f" {costs.save_block_s:.3g} s x {costs.mtbf_s:.4g} s / {p:.3g})"
        )


STRATEGIES = {"notice-first": NoticeFirst, "young-daly": YoungDaly}


def from_name(name: str, *, formula: str = "daly", p_notice_fail: float | None = None):
    """The strategy called ``name`` ("notice-first" or "young-daly")."""
    if name not in STRATEGIES:
        raise errors.UserError(
            f"unknown checkpoint strategy {name!r}. Fix: use one of {sorted(STRATEGIES)}."
        )
    fallback = YoungDaly(formula)
    if name == "young-daly":
        return fallback
    p = DEFAULT_P_NOTICE_FAIL if p_notice_fail is None else p_notice_fail
    return NoticeFirst(p, fallback)
