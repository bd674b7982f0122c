"""What the teardown decision weighs: prices, times, policy and cadence, and the three choices.

At the end of a run the cluster is

* *kept*: it costs the idle price ``r_k`` per hour until the next run;
* *shrunk*: its GPU pools are scaled down to no nodes while the controller, login node and home
  storage stay; it costs the shrunk price ``r_s`` per hour (login nodes and storage) until the
  next run, which then waits the scale-up time and pays ``C_s`` = scale-up hours x
  (provisioning price + delay penalty);
* *deleted*: it costs nothing until the next run, which re-creates it and pays ``C_d`` =
  provisioning hours x (provisioning price + delay penalty).

So an idle gap ``g`` costs ``r_k g``, ``r_s g + C_s`` or ``C_d``; ``choice_costs`` gives all
three. Shrinking is weighed only when its price per hour is known (``shrunk_price_per_hour``
not None): derived from the cluster's login pool and storage, or given.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Protocol

from vsp.components.runtime.core import errors, money, param_rules
from vsp.components.runtime.core.errors import SpecProblem, SpecValidationError
from vsp.components.runtime.teardown import cadence

KEEP, SHRINK, DELETE = "keep", "shrink", "delete"
POLICIES = ("auto", DELETE, KEEP, SHRINK)
# Cheapest first when two choices cost the same: the one that makes the next run wait least.
CHOICE_ORDER = (KEEP, SHRINK, DELETE)
DEFAULT_SLACK_FRACTION = 0.25
DEFAULT_MIN_SLACK_SECONDS = 600.0
DEFAULT_SCALE_UP_MINUTES = 10.0
# A week: the longest a failed run's cluster may wait for a retry (then it is reaped).
MAX_FAILURE_KEEP_MINUTES = 7 * 24 * 60.0
# The longest expected gap between runs: ten years (param_rules.MAX_INTERVAL_HOURS).
MAX_INTERVAL_SECONDS = param_rules.MAX_INTERVAL_HOURS * 3600.0
# How long a cluster kept with an unknown next run and free idle time stays before it expires.
UNKNOWN_CADENCE_TTL_SECONDS = 24 * 3600.0


def problem(field: str, value: object, text: str, fix: str) -> SpecValidationError:
    """A ``UserError`` naming one invalid teardown input and its fix."""
    return SpecValidationError("the teardown inputs", [SpecProblem(field, value, text, fix)])


class IdleCost(Protocol):
    """A derived idle price's breakdown (``teardown_cost.ClusterCost``; no pricing code here)."""

    def describe(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class TeardownInputs:
    """Everything the keep / shrink / delete decision depends on.

    Attributes:
        idle_price_per_hour: What the kept cluster costs per hour while idle (USD/hour);
            0 is free here, and "price the cluster" for ``teardown_pricing.decide``.
        provisioning_minutes: How long re-creating the cluster takes, minutes.
        provisioning_price_per_hour: What the cluster costs per hour while it is provisioning
            (USD/hour; 0 as for the idle price).
        delay_penalty_per_hour: The cost of making the next run wait, per hour of waiting.
        policy: ``auto`` (ski-rental rule), ``delete``, ``keep`` or ``shrink`` (overrides).
        schedule_cron: The schedule's 5-field cron, optionally prefixed ``TZ=Zone `` (or
            ``CRON_TZ=Zone ``) as Vertex schedules allow. Preferred over the other cadences.
        interval_seconds: Expected seconds between runs, used when there is no cron.
        run_start_times: Epoch start times of earlier runs of the same pipeline; their median
            gap is the cadence when there is neither a cron nor an interval, and with a cron
            they show how often runs were missed or started late (``teardown_expiry``).
        run_end_times: Epoch end times of the earlier runs that have finished (as many as
            listed, possibly fewer than the start times); with them an idle gap is measured
            from a run's end to the next start instead of estimated (``teardown_history``).
        now: The current epoch time; ``None`` means ``time.time()``.
        slack_fraction: Slack added to a predicted run for the expiry, as a fraction of the
            run interval (``teardown_expiry``).
        min_slack_seconds: Lower bound of that slack.
        idle_cost: The cluster's priced node pools when ``idle_price_per_hour`` was derived
            from them (``teardown_pricing.decide``); None when it was given as a parameter.
        shrunk_price_per_hour: What the cluster costs per hour with its GPU pools scaled to no
            nodes (login nodes and storage), USD/hour; None = shrinking is not weighed.
        scale_up_minutes: How long scaling the GPU pools of a shrunk cluster back up takes,
            minutes.
        unpriced: Why the cluster could not be priced, when its policy needs no price
            ('' = priced, or prices given); the costs shown are then 0.
        prewarm_margin_minutes: With a cron, how many minutes before the next tick a cluster
            deleted now and re-created by the reaper should be ready (``teardown.prewarm``);
            0 = never pre-warm.
    """

    idle_price_per_hour: float
    provisioning_minutes: float
    provisioning_price_per_hour: float
    delay_penalty_per_hour: float = 10.0
    policy: str = "auto"
    schedule_cron: str | None = None
    interval_seconds: float | None = None
    run_start_times: Sequence[float] = ()
    run_end_times: Sequence[float] = ()
    now: float | None = None
    slack_fraction: float = DEFAULT_SLACK_FRACTION
    min_slack_seconds: float = DEFAULT_MIN_SLACK_SECONDS
    idle_cost: IdleCost | None = None
    shrunk_price_per_hour: float | None = None
    scale_up_minutes: float = DEFAULT_SCALE_UP_MINUTES
    unpriced: str = ""
    prewarm_margin_minutes: float = 0.0

    @property
    def idle_price_text(self) -> str:
        """The idle price per hour and where it came from, as a sentence."""
        if self.unpriced:
            return f"Prices unknown, and not needed by policy '{self.policy}': {self.unpriced}"
        if self.idle_cost is not None:
            return f"{self.idle_cost.describe()}."
        return (
            f"Idle price {money.per_hour(self.idle_price_per_hour)}: parameter idle_price_per_hour."
        )

    @property
    def can_shrink(self) -> bool:
        """Whether shrinking is weighed: its price is known and below the idle price."""
        shrunk = self.shrunk_price_per_hour
        return shrunk is not None and shrunk < self.idle_price_per_hour

    @property
    def recreation_cost(self) -> float:
        """``C_d``: cost of deleting now and re-creating for the next run (USD)."""
        hours = self.provisioning_minutes / 60.0
        return hours * (self.provisioning_price_per_hour + self.delay_penalty_per_hour)

    @property
    def scale_up_cost(self) -> float:
        """``C_s``: cost of scaling a shrunk cluster back up for the next run (USD)."""
        hours = self.scale_up_minutes / 60.0
        return hours * (self.provisioning_price_per_hour + self.delay_penalty_per_hour)

    @property
    def break_even_seconds(self) -> float:
        """Idle time at which keeping costs as much as re-creating (``inf`` if idle is free)."""
        if self.idle_price_per_hour == 0:
            return math.inf
        return self.recreation_cost / self.idle_price_per_hour * 3600.0

    @property
    def shrink_break_even_seconds(self) -> float:
        """Idle time at which a shrunk cluster costs as much as re-creating (``inf``: never)."""
        shrunk = self.shrunk_price_per_hour or 0.0
        if shrunk == 0:
            return math.inf
        return max(0.0, self.recreation_cost - self.scale_up_cost) / shrunk * 3600.0

    def choice_costs(self, idle_seconds: float) -> dict[str, float]:
        """What each weighed choice costs for an idle gap of ``idle_seconds`` (USD)."""
        hours = idle_seconds / 3600.0
        costs = {KEEP: self.idle_price_per_hour * hours}
        if self.can_shrink:
            costs[SHRINK] = (self.shrunk_price_per_hour or 0.0) * hours + self.scale_up_cost
        costs[DELETE] = self.recreation_cost
        return costs

    def validate(self) -> None:
        """Raise ``UserError`` naming the first invalid field and how to fix it."""
        if self.policy not in POLICIES:
            raise problem(
                "policy", self.policy, "is not a teardown policy.",
                f"use one of {', '.join(POLICIES)}.",
            )  # fmt: skip
        names = [
            "idle_price_per_hour",
            "provisioning_minutes",
            "provisioning_price_per_hour",
            "delay_penalty_per_hour",
            "slack_fraction",
            "min_slack_seconds",
            "scale_up_minutes",
            "prewarm_margin_minutes",
        ]
        if self.shrunk_price_per_hour is not None:
            names.append("shrunk_price_per_hour")
        for name in names:
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise problem(
                    name, value, "must be a finite number >= 0.",
                    f"set {name} to a non-negative number.",
                )  # fmt: skip
        if self.interval_seconds is not None and not (
            isinstance(self.interval_seconds, (int, float))
            and math.isfinite(self.interval_seconds)
            and 0 < self.interval_seconds <= MAX_INTERVAL_SECONDS
        ):
            raise problem(
                "interval_seconds", self.interval_seconds,
                f"must be > 0 and at most {MAX_INTERVAL_SECONDS:g} (ten years; a later time "
                "does not fit a date).",
                "give the expected seconds between runs, or leave it unset.",
            )  # fmt: skip
        if self.schedule_cron is not None:
            cadence.parse_cron(self.schedule_cron)


def component_inputs(
    *,
    policy: str,
    schedule_cron: str,
    interval_hours: float,
    idle_price_per_hour: float,
    provisioning_minutes: float,
    provisioning_price_per_hour: float,
    delay_penalty_per_hour: float,
    slack_fraction: float = DEFAULT_SLACK_FRACTION,
    shrunk_price_per_hour: float = 0.0,
    scale_up_minutes: float = DEFAULT_SCALE_UP_MINUTES,
    prewarm_margin_minutes: float = 0.0,
) -> TeardownInputs:
    """``TeardownInputs`` from a component's flat parameters ('' and 0 mean "not given").

    ``shrunk_price_per_hour`` 0 leaves it unknown (None) for ``teardown_pricing.decide`` to
    derive from the cluster.
    """
    return TeardownInputs(
        idle_price_per_hour=idle_price_per_hour,
        provisioning_minutes=provisioning_minutes,
        provisioning_price_per_hour=provisioning_price_per_hour,
        delay_penalty_per_hour=delay_penalty_per_hour,
        policy=policy,
        schedule_cron=schedule_cron or None,
        interval_seconds=interval_hours * 3600.0 if interval_hours else None,
        slack_fraction=slack_fraction,
        shrunk_price_per_hour=shrunk_price_per_hour or None,
        scale_up_minutes=scale_up_minutes,
        prewarm_margin_minutes=prewarm_margin_minutes,
    )


def check_failure_keep_minutes(value: object) -> float:
    """``failure_keep_minutes`` as a number of minutes in ``[0, MAX_FAILURE_KEEP_MINUTES]``.

    Raises:
        errors.UserError: It is not a number, not finite, negative or above a week.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        valid = False
    else:
        valid = 0 <= value <= MAX_FAILURE_KEEP_MINUTES
    if not valid:
        raise errors.UserError(
            f"failure_keep_minutes = {value!r:.40}: must be a number of minutes from 0 to "
            f"{MAX_FAILURE_KEEP_MINUTES:g} (a week). Fix: use 0 to delete the cluster after a "
            "failure, or the minutes to keep it for a retry."
        )
    return float(value)
