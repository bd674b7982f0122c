"""Pre-warming before a known cron tick: delete the cluster now, re-create it just before the run.

On a schedule the next run's tick ``t`` is known. Besides keeping the cluster (the idle price
``r`` per hour until ``t``) and deleting it (the next run re-creates it and waits: ``C`` =
provisioning hours x (provisioning price + delay penalty)), the cluster can be deleted now and
created again so that it is ready before ``t``: that pays the creation without the wait,
``P`` = provisioning hours x provisioning price, plus the idle time from ready to ``t``.

The reaper creates it (``teardown.prewarm_reaper``), and the reaper runs at its own ticks
(``cadence.REAPER_CRON``, every 10 minutes), so the creation starts at the last reaper tick at
or before ``t - margin - provisioning``, and the cluster is ready at that tick plus the
provisioning time: between ``margin`` and ``margin`` + one reaper period before ``t``.

Estimate of pre-warming (``lead = t - ready``, ``q`` the share of the schedule's earlier runs
that were missed or started late, ``slack`` the start latency allowed)::

    P + r * lead + q * (r * (lead + slack) + C)

a pre-warmed cluster whose run does not come idles until its expiry (``t + slack``) and the run,
when it comes, re-creates it. ``decision.decide`` pre-warms when this is below every other
choice's cost; ``benchmarks/teardown/prewarm.py`` measures the rule against the offline optimum
with pre-warm (``min(r g, C, P)`` for a gap ``g``) and the bound derived there.
"""

from __future__ import annotations

import dataclasses

from vsp.components.runtime.core import money, readable_time
from vsp.components.runtime.teardown import cadence
from vsp.components.runtime.teardown import inputs as teardown_inputs


@dataclasses.dataclass(frozen=True)
class PrewarmPlan:
    """When the reaper creates the cluster again, when it is ready, and what that costs.

    Attributes:
        tick: The next run's cron tick, epoch seconds.
        create_at: The reaper tick that creates the cluster, epoch seconds.
        ready_at: When the creation should be done (``create_at`` + provisioning), epoch s.
        expires_at: When a pre-warmed cluster whose run did not come may be reaped, epoch s.
        cost: The estimate of pre-warming (see the module docstring), USD.
    """

    tick: float
    create_at: float
    ready_at: float
    expires_at: float
    cost: float

    def describe(self) -> str:
        """One clause for the decision's reason."""
        return (
            f"re-created by the reaper at {readable_time.utc(self.create_at)}, ready "
            f"{readable_time.duration(self.tick - self.ready_at)} before the next run "
            f"({money.amount(self.cost)} estimated)"
        )


def prewarm_price(inputs: teardown_inputs.TeardownInputs) -> float:
    """``P``: creating the cluster with no run waiting for it (USD)."""
    return inputs.provisioning_minutes / 60.0 * inputs.provisioning_price_per_hour


def plan(
    inputs: teardown_inputs.TeardownInputs,
    *,
    tick: float,
    now: float,
    slack: float,
    missed_share: float = 0.0,
    reaper_cron: str = cadence.REAPER_CRON,
) -> PrewarmPlan | None:
    """The pre-warm for the run at ``tick``, or None when it is off or the tick is too close.

    Args:
        inputs: Prices and ``prewarm_margin_minutes`` (0: never pre-warm).
        tick: The next run's tick, epoch seconds.
        now: The end of the current run, epoch seconds.
        slack: Start latency allowed after the tick, seconds (the pre-warmed cluster's expiry).
        missed_share: Share of the schedule's earlier runs that were missed or late, 0-1.
        reaper_cron: The reaper's schedule.

    Returns:
        None when pre-warming is off, or when the reaper tick that would create the cluster is
        not after ``now`` (the tick is closer than the provisioning time plus the margin).
    """
    margin = inputs.prewarm_margin_minutes * 60.0
    if margin <= 0:
        return None
    provisioning = inputs.provisioning_minutes * 60.0
    latest_start = tick - margin - provisioning
    if latest_start <= now:
        return None
    create_at = cadence.tick_at_or_before(reaper_cron, latest_start)
    if create_at <= now:
        return None
    ready_at = create_at + provisioning
    lead = tick - ready_at
    r = inputs.idle_price_per_hour / 3600.0
    wasted = r * (lead + slack) + inputs.recreation_cost
    cost = prewarm_price(inputs) + r * lead + missed_share * wasted
    return PrewarmPlan(tick, create_at, ready_at, tick + slack, cost)
