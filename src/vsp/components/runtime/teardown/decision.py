"""Keep the training cluster warm, shrink it, or delete it: a ski-rental decision.

At the end of a pipeline run the cluster is *kept* (renting: the idle price ``r_k`` per hour
until the next run), *shrunk* (its GPU pools scaled to no nodes: the shrunk price ``r_s`` per
hour, then a scale-up ``C_s`` for the next run) or *deleted* (buying: the next run pays the
re-creation ``C_d``); see ``teardown_inputs``. The break-even reasoning is the classic
ski-rental one (https://en.wikipedia.org/wiki/Ski_rental_problem) with a middle option.

Rule (deterministic ski rental with a prediction):

* Break-even idle time ``B = C_d / r_k`` (infinite when ``r_k == 0``: keeping is free).
* The idle gap ``G`` is the time from now to the next expected run, predicted from, in order of
  preference, the schedule's cron, an expected interval, or the median gap of earlier run start
  times. A cron schedule is a near-perfect predictor, so acting on ``G`` approaches the offline
  optimum ``min(r_k G, r_s G + C_s, C_d)``.
* ``policy == "auto"``: the choice that costs least for ``G`` (ties: keep, then shrink, then
  delete: the one the next run waits least for). With no cadence known, delete (the one-shot
  rule with an unknown gap cannot bound the idle cost).
* With only run history (at least three gaps; fewer delete), the keep time that would have
  cost least over the observed idle gaps (measured from the runs' end times when listed) among
  the reaper's ticks (``teardown_history``), whole or shrunk: keep or shrink for it when its
  saving over deleting clearly exceeds the gaps' noise out of sample
  (``teardown_history.clearly_cheaper``: each gap priced with the keep time chosen on the
  others), else delete; irregular arrivals make a single predicted time a poor guide.
* With a cron and ``prewarm_margin_minutes`` > 0, ``auto`` also weighs deleting now and having
  the reaper re-create the cluster to be ready that margin before the next tick
  (``teardown.prewarm``): chosen (action ``delete``, ``prewarm`` set) when it costs less than
  every other choice.
* ``policy == "keep"`` / ``"shrink"`` / ``"delete"`` override the rule; the reason says so.

A kept or shrunk cluster is labelled with ``vsp-expires-at`` (keep-with-TTL, which is what
makes keeping competitive when the prediction is wrong): with a cadence,
``max(t_K + slack, now + B)``, ``t_K`` the last predicted run within the break-even time ``B``
of the choice, so a missed or late run within ``B`` still finds the cluster warm; with a cron
and run history, the keep time that costs least over the misses and late starts seen
(``teardown_expiry``). A reaper deletes it once that time has passed (``expired``), and the
next run re-labels it (and scales a shrunk one back up). A cluster kept (by policy) while the
next run is unknown expires after the break-even time (24 h when idle is free), so no kept
cluster is ever without an expiry.
"""

from __future__ import annotations

import dataclasses
import math
import time

from vsp.components.runtime.core import gcp_labels, money, readable_time
from vsp.components.runtime.teardown import cadence as teardown_cadence
from vsp.components.runtime.teardown import expiry
from vsp.components.runtime.teardown import history as teardown_history
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import prewarm as teardown_prewarm
from vsp.components.runtime.teardown.inputs import DELETE, KEEP, SHRINK


@dataclasses.dataclass(frozen=True)
class TeardownDecision:
    """The outcome, with the numbers behind it.

    Attributes:
        action: ``keep``, ``shrink`` or ``delete``.
        reason: One sentence for the user, with the numbers.
        next_run: Epoch seconds of the next expected run, or ``None`` if unknown.
        idle_seconds: Expected idle seconds until then, or ``None`` if unknown.
        cost_if_kept: Idle cost until the next run (from run history: the average cost of
            keeping for the chosen time, re-creations included), or ``None`` if unknown.
        cost_if_deleted: Re-creation cost.
        break_even_seconds: Idle time at which keeping and deleting cost the same.
        expires_at: Epoch seconds after which a reaper may delete the kept or shrunk cluster
            (``None`` when deleting).
        cost_if_shrunk: Shrunk price until the next run plus the scale-up (from run history:
            the average for the chosen time), or ``None`` when shrinking is not weighed or the
            next run is unknown.
        why: The reason in a few words (``keeping is cheaper``); ``reason`` has the numbers.
        idle_price_per_hour: What the kept cluster costs per idle hour, USD/hour.
        prewarm: When deleting now and re-creating before the next tick was chosen
            (``teardown.prewarm``): when the reaper creates the cluster and what it costs;
            None otherwise.
    """

    action: str
    reason: str
    next_run: float | None
    idle_seconds: float | None
    cost_if_kept: float | None
    cost_if_deleted: float
    break_even_seconds: float
    expires_at: float | None
    cost_if_shrunk: float | None = None
    why: str = ""
    idle_price_per_hour: float | None = None
    prewarm: teardown_prewarm.PrewarmPlan | None = None

    def summary(self) -> list[str]:
        """The decision in two short lines: what and why, then the costs weighed."""
        when = (
            "next run unknown"
            if self.idle_seconds is None
            else f"next run in {readable_time.duration(self.idle_seconds)}"
        )
        if self.prewarm is not None:
            when += f"; re-created at {readable_time.utc(self.prewarm.create_at)}"
        costs = []
        if self.cost_if_kept is not None:
            costs.append(f"keep {money.amount(self.cost_if_kept)}")
        if self.cost_if_shrunk is not None:
            costs.append(f"shrink {money.amount(self.cost_if_shrunk)}")
        costs.append(f"re-create {money.amount(self.cost_if_deleted)}")
        if self.prewarm is not None:
            costs.append(f"pre-warm {money.amount(self.prewarm.cost)}")
        rate = ""
        if self.idle_price_per_hour is not None:
            rate = f"; idle {money.per_hour(self.idle_price_per_hour)}"
        return [f"{self.action}: {self.why} ({when})", f"costs: {', '.join(costs)}{rate}"]

    def as_metrics(self) -> dict[str, float]:
        """Flat float metrics; unknown values (``None``) are left out."""
        metrics = {
            "teardown_keep": 1.0 if self.action == KEEP else 0.0,
            "teardown_shrink": 1.0 if self.action == SHRINK else 0.0,
            "teardown_prewarm": 1.0 if self.prewarm is not None else 0.0,
            "teardown_cost_if_deleted": float(self.cost_if_deleted),
            "teardown_break_even_seconds": float(self.break_even_seconds),
        }
        optional = {
            "teardown_next_run": self.next_run,
            "teardown_idle_seconds": self.idle_seconds,
            "teardown_cost_if_kept": self.cost_if_kept,
            "teardown_cost_if_shrunk": self.cost_if_shrunk,
            "teardown_expires_at": self.expires_at,
            "teardown_prewarm_at": self.prewarm.create_at if self.prewarm else None,
            "teardown_cost_if_prewarmed": self.prewarm.cost if self.prewarm else None,
        }
        metrics.update({k: float(v) for k, v in optional.items() if v is not None})
        return metrics

    def as_labels(self) -> dict[str, str]:
        """Cluster label values: ``vsp-teardown`` and, when kept with a TTL, ``vsp-expires-at``."""
        labels = {gcp_labels.TEARDOWN: self.action}
        if self.action in (KEEP, SHRINK) and self.expires_at is not None:
            labels[gcp_labels.EXPIRES_AT] = gcp_labels.format_label_time(self.expires_at)
        return labels


# How long before the reaper's tick a kept cluster expires (at most; half the keep when shorter),
# so that the tick finds it expired: the reaper deletes what expired before it runs.
_EXPIRY_BEFORE_TICK_SECONDS = 30.0


def _history_choice(
    inputs: teardown_inputs.TeardownInputs, gaps: list[float], now: float
) -> tuple[str, float, dict[str, float], str | None]:
    """The cheapest of keeping or shrinking for the best time over ``gaps``, or deleting.

    The keep times weighed are the reaper's: a kept cluster lives until the first reaper tick
    after its expiry, so a keep time between two ticks costs as much as the later tick, and
    pricing it as shorter would keep clusters that deleting would have beaten. A keep (or
    shrink) is a candidate only when its saving over deleting stands out from the gaps' noise
    (``teardown_history.clearly_cheaper``, cross-validated): the keep time is chosen on the
    very gaps it is priced on, so its average there is optimistic.

    Returns:
        (action, seconds from now to the expiry, average cost per gap of each weighed choice,
        the choice that would have cost least on average but is within the noise, or ``None``).
    """
    deleted = inputs.recreation_cost
    ticks = teardown_cadence.reaper_keep_times(now, gaps)
    options = {
        KEEP: teardown_history.best_ttl(gaps, inputs.idle_price_per_hour, deleted, keep_times=ticks)
    }
    if inputs.can_shrink:
        options[SHRINK] = teardown_history.best_ttl(
            gaps, inputs.shrunk_price_per_hour or 0.0, deleted, inputs.scale_up_cost, ticks
        )
    prices = {KEEP: (inputs.idle_price_per_hour, 0.0)}
    prices[SHRINK] = (inputs.shrunk_price_per_hour or 0.0, inputs.scale_up_cost)
    candidates = {
        a: (ttl, cost)
        for a, (ttl, cost) in options.items()
        if teardown_history.clearly_cheaper(
            gaps, ttl, prices[a][0], deleted, prices[a][1], keep_times=ticks
        )
    }
    candidates[DELETE] = (0.0, deleted)
    best = _cheapest({a: round(cost, 12) for a, (_ttl, cost) in candidates.items()})
    averages = {a: cost for a, (_ttl, cost) in options.items()}
    averages[DELETE] = deleted
    in_sample = {a: (ttl, cost) for a, (ttl, cost) in options.items() if ttl > 0}
    in_sample[DELETE] = (0.0, deleted)
    cheapest = _cheapest({a: round(cost, 12) for a, (_ttl, cost) in in_sample.items()})
    noise = cheapest if best == DELETE and cheapest != DELETE else None
    keep = candidates[best][0]
    expiry = keep - min(_EXPIRY_BEFORE_TICK_SECONDS, keep / 2.0) if keep > 0 else 0.0
    return best, expiry, averages, noise


_GERUND = {KEEP: "keeping", SHRINK: "shrinking", DELETE: "deleting"}


def _cheapest(costs: dict[str, float]) -> str:
    """The choice that costs least; ties go to the one the next run waits least for."""
    return min((a for a in teardown_inputs.CHOICE_ORDER if a in costs), key=lambda a: costs[a])


def _costs_text(costs: dict[str, float], inputs: teardown_inputs.TeardownInputs) -> str:
    parts = [f"keeping costs {money.amount(costs[KEEP])}"]
    if SHRINK in costs:
        parts.append(
            f"shrinking costs {money.amount(costs[SHRINK])} "
            f"({money.per_hour(inputs.shrunk_price_per_hour or 0.0)} plus a "
            f"{inputs.scale_up_minutes:g} min scale-up)"
        )
    parts.append(f"re-creating costs {money.amount(costs[DELETE])}")
    return ", ".join(parts)


def decide(inputs: teardown_inputs.TeardownInputs) -> TeardownDecision:
    """Decide whether to keep the cluster warm, shrink it or delete it now.

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
    be_text = readable_time.duration(be)
    cadence = teardown_cadence.predict(
        inputs.schedule_cron, inputs.interval_seconds, inputs.run_start_times, now
    )
    history = None
    gaps: list[float] = []
    if inputs.schedule_cron is None and inputs.interval_seconds is None:
        gaps = teardown_history.idle_gaps(inputs.run_start_times, now, inputs.run_end_times)
        if len(gaps) >= teardown_history.MIN_GAPS:
            history = _history_choice(inputs, gaps, now)
    too_few = history is None and 0 < len(gaps) < teardown_history.MIN_GAPS
    costs: dict[str, float] = {}
    planned = None
    expiry_text = ""
    if cadence is None:
        next_run = idle = expires_at = None
        facts = "the next run is unknown (no cron, interval or run history)"
    else:
        next_run, interval, source = cadence
        idle = max(0.0, next_run - now)
        slack = max(inputs.slack_fraction * interval, inputs.min_slack_seconds)
        planned = expiry.plan(inputs, next_run, interval, slack, now)
        costs = planned.averages
        expires_at = planned.expires_at[KEEP]
        facts = f"the next run ({source}) is in {readable_time.duration(idle)}"
        if len(planned.sample) > 1:
            facts += (
                f"; over the last {len(planned.sample)} runs of the schedule, "
                f"{planned.missed} came one or more ticks late and {planned.late} started more "
                f"than {slack / 60:.0f} min late, so the costs are averages over those gaps"
            )
        facts += f": {_costs_text(costs, inputs)}, break-even idle time {be_text}"
    if history is not None:
        best, ttl, costs, noise = history
        # A policy that keeps where the history deletes keeps the cadence's expiry (or, below,
        # the break-even one), not one that has already passed.
        expires_at = now + ttl if best != DELETE else expires_at
        kept_for = readable_time.duration(ttl)
        chosen = "deleting at once" if best == DELETE else f"{_GERUND[best]} {kept_for}"
        if noise is None:
            facts += (
                f"; over the last {len(gaps)} idle gaps, {chosen} costs least on average "
                f"({_costs_text(costs, inputs)})"
            )
        else:
            facts += (
                f"; over the last {len(gaps)} idle gaps, {_GERUND[noise]} would have cost least "
                f"on average ({_costs_text(costs, inputs)}), but by less than the gaps' noise "
                "(one-sided 95 % t-test on the per-gap savings)"
            )
    if inputs.policy == "auto" and history is not None:
        action = history[0]
        why = f"{_GERUND[action]} costs less on average"
        why = "deleting is cheaper" if action == DELETE else why
        if history[3] is not None:
            why = f"{_GERUND[history[3]]} is not clearly cheaper, so deleting"
    elif inputs.policy == "auto":
        if idle is None:
            action, why = DELETE, "unknown cadence, so deleting"
        elif too_few:
            action = DELETE
            why = f"only {len(gaps)} earlier idle gap(s), too few to tell the cadence, so deleting"
        else:
            action = _cheapest(costs)
            why = f"{_GERUND[action]} is cheaper"
    else:
        action, why = inputs.policy, f"policy is '{inputs.policy}', overriding the cost rule"
    prewarmed = None
    if inputs.policy == "auto" and inputs.schedule_cron and planned is not None and history is None:
        prewarmed = _prewarm(inputs, planned, next_run, slack, now, costs[action])
    if prewarmed is not None:
        action, why = DELETE, "pre-warming before the next run is cheaper"
        expiry_text = f"Pre-warm: {prewarmed.describe()}. "
    if action in (KEEP, SHRINK) and planned is not None and history is None:
        expires_at = planned.expires_at.get(action, expires_at)
        expiry_text = f"{planned.text.get(action, planned.text[KEEP])()}. "
    if action in (KEEP, SHRINK) and expires_at is None:
        # Unknown next run: rent for the break-even time, then let the reaper buy (delete),
        # the deterministic 2-competitive ski-rental rule; never keep without an expiry.
        ttl = be if action == KEEP else inputs.shrink_break_even_seconds
        ttl = ttl if math.isfinite(ttl) else teardown_inputs.UNKNOWN_CADENCE_TTL_SECONDS
        ttl = max(ttl, inputs.min_slack_seconds)
        expires_at = now + ttl
        why += f" with an expiry after {readable_time.duration(ttl)} idle"
    verb = {KEEP: "Keep", SHRINK: "Shrink", DELETE: "Delete"}[action]
    reason = f"{verb} the cluster: {why}; {facts}. {expiry_text}{inputs.idle_price_text}"
    return TeardownDecision(
        action=action,
        reason=reason,
        next_run=next_run,
        idle_seconds=idle,
        cost_if_kept=costs.get(KEEP),
        cost_if_deleted=deleted,
        break_even_seconds=be,
        expires_at=expires_at if action in (KEEP, SHRINK) else None,
        cost_if_shrunk=costs.get(SHRINK),
        why=why,
        idle_price_per_hour=inputs.idle_price_per_hour,
        prewarm=prewarmed,
    )


def _prewarm(
    inputs: teardown_inputs.TeardownInputs,
    planned: expiry.Plan,
    tick: float,
    slack: float,
    now: float,
    cheapest: float,
) -> teardown_prewarm.PrewarmPlan | None:
    """The pre-warm when it costs less than ``cheapest`` (the best other choice), else None."""
    share = (planned.missed + planned.late) / len(planned.sample) if planned.sample else 0.0
    found = teardown_prewarm.plan(inputs, tick=tick, now=now, slack=slack, missed_share=share)
    return found if found is not None and found.cost < cheapest else None
