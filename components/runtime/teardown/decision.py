"""Keep the training cluster warm for the next run, or delete it: a ski-rental decision.

At the end of a pipeline run the cluster is either *kept* (renting: it costs the idle price
``r`` per hour until the next run) or *deleted* (buying: the next run pays the re-creation cost
``C`` = provisioning hours x provisioning price per hour + delay penalty per hour x provisioning
hours). The break-even rule is the classic ski-rental one
(https://en.wikipedia.org/wiki/Ski_rental_problem).

Rule (deterministic ski rental with a prediction):

* Break-even idle time ``B = C / r`` (infinite when ``r == 0``: keeping is free).
* The idle gap ``G`` is the time from now to the next expected run, predicted from, in order of
  preference, the schedule's cron, an expected interval, or the median gap of earlier run start
  times. A cron schedule is a near-perfect predictor, so acting on ``G`` approaches the offline
  optimum ``min(r * G, C)``.
* ``policy == "auto"``: keep iff ``G <= B`` (keeping is no more expensive), else delete. With no
  cadence known, delete (the one-shot rule with an unknown gap cannot bound the idle cost).
* With only run history (at least three gaps), the keep time is the one that would have cost
  least over the observed idle gaps (``teardown_history``): keep for it, or delete when that
  is zero; irregular arrivals make a single predicted time a poor guide.
* ``policy == "keep"`` / ``"delete"`` override the rule; the reason says so.

A kept cluster is labelled with ``vsp-expires-at`` = next expected run + slack (keep-with-TTL,
which is what makes keeping competitive when the prediction is wrong): a reaper deletes it once
that time has passed (``expired``), and the next run re-labels it. A cluster kept (by policy)
while the next run is unknown expires after the break-even time (24 h when idle is free), so no
kept cluster is ever without an expiry.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.core.errors import SpecProblem, SpecValidationError
from vsp.components.runtime.teardown import cadence as teardown_cadence
from vsp.components.runtime.teardown import history as teardown_history

POLICIES = ("auto", "delete", "keep")
DEFAULT_SLACK_FRACTION = 0.25
DEFAULT_MIN_SLACK_SECONDS = 600.0
# How long a cluster kept with an unknown next run and free idle time stays before it expires.
UNKNOWN_CADENCE_TTL_SECONDS = 24 * 3600.0


def _problem(field: str, value: object, problem: str, fix: str) -> SpecValidationError:
    return SpecValidationError("the teardown inputs", [SpecProblem(field, value, problem, fix)])


class IdleCost(Protocol):
    """A derived idle price's breakdown (``teardown_cost.ClusterCost``; no pricing code here)."""

    def describe(self) -> str: ...


@dataclasses.dataclass(frozen=True)
class TeardownInputs:
    """Everything the keep-or-delete decision depends on.

    Attributes:
        idle_price_per_hour: What the kept cluster costs per hour while idle (currency/hour);
            0 is free here, and "price the cluster" for ``teardown_pricing.decide``.
        provisioning_minutes: How long re-creating the cluster takes, minutes.
        provisioning_price_per_hour: What the cluster costs per hour while it is provisioning
            (currency/hour; 0 as for the idle price).
        delay_penalty_per_hour: The cost of making the next run wait, per hour of waiting.
        policy: ``auto`` (ski-rental rule), ``delete`` or ``keep`` (overrides).
        schedule_cron: The schedule's 5-field cron, optionally prefixed ``TZ=Zone `` (or
            ``CRON_TZ=Zone ``) as Vertex schedules allow. Preferred over the other cadences.
        interval_seconds: Expected seconds between runs, used when there is no cron.
        run_start_times: Epoch start times of earlier runs of the same pipeline; their median
            gap is the cadence when there is neither a cron nor an interval.
        now: The current epoch time; ``None`` means ``time.time()``.
        slack_fraction: Slack added to the next expected run for the expiry, as a fraction of
            the run interval.
        min_slack_seconds: Lower bound of that slack.
        idle_cost: The cluster's priced node pools when ``idle_price_per_hour`` was derived
            from them (``teardown_pricing.decide``); None when it was given as a parameter.
    """

    idle_price_per_hour: float
    provisioning_minutes: float
    provisioning_price_per_hour: float
    delay_penalty_per_hour: float = 10.0
    policy: str = "auto"
    schedule_cron: str | None = None
    interval_seconds: float | None = None
    run_start_times: Sequence[float] = ()
    now: float | None = None
    slack_fraction: float = DEFAULT_SLACK_FRACTION
    min_slack_seconds: float = DEFAULT_MIN_SLACK_SECONDS
    idle_cost: IdleCost | None = None

    @property
    def idle_price_text(self) -> str:
        """The idle price per hour and where it came from, as a sentence."""
        if self.idle_cost is not None:
            return f"{self.idle_cost.describe()}."
        return f"Idle price {self.idle_price_per_hour:.2f}/h: parameter idle_price_per_hour."

    @property
    def recreation_cost(self) -> float:
        """Cost of deleting now and re-creating for the next run (currency)."""
        hours = self.provisioning_minutes / 60.0
        return hours * self.provisioning_price_per_hour + hours * self.delay_penalty_per_hour

    @property
    def break_even_seconds(self) -> float:
        """Idle time at which keeping costs as much as re-creating (``inf`` if idle is free)."""
        if self.idle_price_per_hour == 0:
            return math.inf
        return self.recreation_cost / self.idle_price_per_hour * 3600.0

    def validate(self) -> None:
        """Raise ``UserError`` naming the first invalid field and how to fix it."""
        if self.policy not in POLICIES:
            raise _problem(
                "policy",
                self.policy,
                "is not a teardown policy.",
                f"use one of {', '.join(POLICIES)}.",
            )
        for name in (
            "idle_price_per_hour",
            "provisioning_minutes",
            "provisioning_price_per_hour",
            "delay_penalty_per_hour",
            "slack_fraction",
            "min_slack_seconds",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise _problem(
                    name,
                    value,
                    "must be a finite number >= 0.",
                    f"set {name} to a non-negative number.",
                )
        if self.interval_seconds is not None and not (
            isinstance(self.interval_seconds, (int, float))
            and math.isfinite(self.interval_seconds)
            and self.interval_seconds > 0
        ):
            raise _problem(
                "interval_seconds",
                self.interval_seconds,
                "must be > 0.",
                "give the expected seconds between runs, or leave it unset.",
            )
        if self.schedule_cron is not None:
            teardown_cadence.parse_cron(self.schedule_cron)


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
) -> TeardownInputs:
    """``TeardownInputs`` from a component's flat parameters ('' and 0 mean "not given")."""
    return TeardownInputs(
        idle_price_per_hour=idle_price_per_hour,
        provisioning_minutes=provisioning_minutes,
        provisioning_price_per_hour=provisioning_price_per_hour,
        delay_penalty_per_hour=delay_penalty_per_hour,
        policy=policy,
        schedule_cron=schedule_cron or None,
        interval_seconds=interval_hours * 3600.0 if interval_hours else None,
        slack_fraction=slack_fraction,
    )


@dataclasses.dataclass(frozen=True)
class TeardownDecision:
    """The outcome, with the numbers behind it.

    Attributes:
        action: ``keep`` or ``delete``.
        reason: One sentence for the user, with the numbers.
        next_run: Epoch seconds of the next expected run, or ``None`` if unknown.
        idle_seconds: Expected idle seconds until then, or ``None`` if unknown.
        cost_if_kept: Idle cost until the next run (from run history: the average cost of
            keeping for the chosen time, re-creations included), or ``None`` if unknown.
        cost_if_deleted: Re-creation cost.
        break_even_seconds: Idle time at which both cost the same.
        expires_at: Epoch seconds after which a reaper may delete the kept cluster (keep only;
            ``None`` when deleting).
    """

    action: str
    reason: str
    next_run: float | None
    idle_seconds: float | None
    cost_if_kept: float | None
    cost_if_deleted: float
    break_even_seconds: float
    expires_at: float | None

    def as_metrics(self) -> dict[str, float]:
        """Flat float metrics; unknown values (``None``) are left out."""
        metrics = {
            "teardown_keep": 1.0 if self.action == "keep" else 0.0,
            "teardown_cost_if_deleted": float(self.cost_if_deleted),
            "teardown_break_even_seconds": float(self.break_even_seconds),
        }
        optional = {
            "teardown_next_run": self.next_run,
            "teardown_idle_seconds": self.idle_seconds,
            "teardown_cost_if_kept": self.cost_if_kept,
            "teardown_expires_at": self.expires_at,
        }
        metrics.update({k: float(v) for k, v in optional.items() if v is not None})
        return metrics

    def as_labels(self) -> dict[str, str]:
        """Cluster label values: ``vsp-teardown`` and, when kept with a TTL, ``vsp-expires-at``."""
        labels = {gcp_labels.TEARDOWN: self.action}
        if self.action == "keep" and self.expires_at is not None:
            labels[gcp_labels.EXPIRES_AT] = format_label_time(self.expires_at)
        return labels


def format_label_time(epoch: float) -> str:
    """Format epoch seconds as a label value, ``%Y%m%dt%H%M%Sz`` in UTC."""
    return gcp_labels.timestamp(datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc))


def parse_label_time(value: str) -> float:
    """Parse a ``%Y%m%dt%H%M%Sz`` UTC label value into epoch seconds."""
    return gcp_labels.parse_timestamp(value).timestamp()


def expired(labels: Mapping[str, str] | None, now: float | None = None) -> bool:
    """Whether a reaper may delete a cluster: its ``vsp-expires-at`` is in the past.

    Clusters without the label (or with an unreadable one) are never expired, so the reaper
    never deletes what this module did not mark.
    """
    value = (labels or {}).get(gcp_labels.EXPIRES_AT)
    if not value:
        return False
    try:
        expires_at = parse_label_time(value)
    except ValueError:
        return False
    return (time.time() if now is None else now) > expires_at


def decide(inputs: TeardownInputs) -> TeardownDecision:
    """Decide whether to delete the cluster now or keep it warm for the next run.

    Args:
        inputs: Prices, policy and cadence; see ``TeardownInputs``.

    Returns:
        The decision, with its reason and numbers.

    Raises:
        UserError: an input is invalid (the message names the field and the fix).
    """
    inputs.validate()
    now = time.time() if inputs.now is None else float(inputs.now)
    deleted = inputs.recreation_cost
    be = inputs.break_even_seconds
    be_text = "never" if math.isinf(be) else f"{be / 3600:.2f} h"
    cadence = teardown_cadence.predict(
        inputs.schedule_cron, inputs.interval_seconds, inputs.run_start_times, now
    )
    history_ttl = None
    if inputs.schedule_cron is None and inputs.interval_seconds is None:
        gaps = teardown_history.idle_gaps(inputs.run_start_times, now)
        if len(gaps) >= teardown_history.MIN_GAPS:
            history_ttl = teardown_history.best_ttl(gaps, inputs.idle_price_per_hour, deleted)
    if cadence is None:
        next_run = idle = kept = expires_at = None
        facts = "the next run is unknown (no cron, interval or run history)"
    else:
        next_run, interval, source = cadence
        idle = max(0.0, next_run - now)
        kept = inputs.idle_price_per_hour * idle / 3600.0
        slack = max(inputs.slack_fraction * interval, inputs.min_slack_seconds)
        expires_at = next_run + slack
        facts = (
            f"the next run ({source}) is in {idle / 3600:.2f} h: keeping costs {kept:.2f}, "
            f"re-creating costs {deleted:.2f}, break-even idle time {be_text}"
        )
    if history_ttl is not None:
        ttl, kept = history_ttl
        expires_at = now + ttl
        facts += (
            f"; over the last {len(gaps)} idle gaps, keeping {ttl / 3600:.2f} h costs least "
            f"on average ({kept:.2f})"
        )
    if inputs.policy == "auto" and history_ttl is not None:
        action = "keep" if history_ttl[0] > 0 else "delete"
        why = "keeping costs less on average" if action == "keep" else "deleting is cheaper"
    elif inputs.policy == "auto":
        if idle is None:
            action, why = "delete", "unknown cadence, so deleting"
        elif idle <= be:
            action, why = "keep", "keeping is cheaper"
        else:
            action, why = "delete", "deleting is cheaper"
    else:
        action, why = inputs.policy, f"policy is '{inputs.policy}', overriding the cost rule"
    if action == "keep" and expires_at is None:
        # Unknown next run: rent for the break-even time, then let the reaper buy (delete),
        # the deterministic 2-competitive ski-rental rule; never keep without an expiry.
        ttl = be if math.isfinite(be) else UNKNOWN_CADENCE_TTL_SECONDS
        expires_at = now + max(ttl, inputs.min_slack_seconds)
        why += f" with an expiry after {max(ttl, inputs.min_slack_seconds) / 3600:.2f} h idle"
    reason = f"{action.capitalize()} the cluster: {why}; {facts}. {inputs.idle_price_text}"
    return TeardownDecision(
        action=action,
        reason=reason,
        next_run=next_run,
        idle_seconds=idle,
        cost_if_kept=kept,
        cost_if_deleted=deleted,
        break_even_seconds=be,
        expires_at=expires_at if action == "keep" else None,
    )
