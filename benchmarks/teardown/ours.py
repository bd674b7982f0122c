"""Ours in the teardown benchmarks: ``teardown.decide`` at every run end, enforced by the reaper.

At the end of run ``i`` of a trace the decision gets what the component would have: the start
times ``run_history.run_times`` lists (the newest ``HISTORY_MAX_JOBS`` runs, the running one
included), the end times of those that finished, and, when a schedule started the run, its
cron. A kept or shrunk cluster is
labelled ``vsp-expires-at``; the reaper, scheduled on ``cadence.REAPER_CRON``, deletes it at its
first tick after that label (``gcp_labels.expired`` is ``now > expires_at``), so a run that starts
before that tick still reuses it. The keep time of a decision is that tick minus the run end.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import math

import numpy as np
from croniter import croniter

from benchmarks.teardown import traces
from vsp.components.runtime.teardown import cadence as teardown_cadence
from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import run_history


def label_expiry(expires_at: float) -> float:
    """The expiry the reaper reads back from the ``vsp-expires-at`` label (whole seconds).

    The label drops the fraction of a second (``gcp_labels.format_label_time``), i.e. floors the
    epoch; a test checks this equals the label's round trip.
    """
    return float(math.floor(expires_at))


@functools.lru_cache(maxsize=16)
def fixed_period(cron: str) -> tuple[float, float] | None:
    """``(offset, period)`` seconds of a UTC cron firing every few minutes around the clock.

    ``*/10 * * * *`` is ``(0, 600)``: its ticks are ``offset + k * period`` since the epoch, so
    the next one is arithmetic instead of a cron expansion per lookup. ``None`` for any other
    cron (hours, days or a time zone restricted).
    """
    expr, zone = teardown_cadence.parse_cron(cron)
    minutes, *rest = croniter(expr).expanded[:5]
    if zone is not datetime.timezone.utc or any(field != ["*"] for field in rest):
        return None
    if minutes == ["*"]:
        return 0.0, 60.0
    step = minutes[1] - minutes[0] if len(minutes) > 1 else 60
    if 60 % step or minutes != list(range(minutes[0], 60, step)):
        return None
    return minutes[0] * 60.0, step * 60.0


def reaped_at(expires_at: float, reaper_cron: str | None = teardown_cadence.REAPER_CRON) -> float:
    """When the reaper deletes a cluster labelled to expire at ``expires_at``.

    ``reaper_cron=None`` is a reaper that deletes at the very second of the expiry.
    """
    expiry = label_expiry(expires_at)
    if reaper_cron is None:
        return expiry
    period = fixed_period(reaper_cron)
    if period is None:
        return teardown_cadence.ticks_between(reaper_cron, expiry, math.inf, 1)[0]
    offset, step = period
    return offset + (math.floor((expiry - offset) / step) + 1) * step


def decisions(
    trace: traces.Trace, inputs: teardown_inputs.TeardownInputs, policy: str = "auto"
) -> tuple[list[str], np.ndarray]:
    """The action and the label expiry (``nan`` when deleting) of the decision at each run end.

    With ``policy="auto"`` a decision gets the run history and the run's cron; with any other
    policy it gets no cadence at all (``keep``: the break-even expiry fallback).

    Raises:
        AssertionError: a kept cluster without an expiry (which no reaper would ever delete).
    """
    page = run_history.HISTORY_MAX_JOBS
    starts, ends = trace.starts, trace.ends
    actions, expiries = [], np.full(len(starts) - 1, math.nan)
    for i in range(len(expiries)):
        cadence: dict = {"policy": policy, "now": float(ends[i])}
        if policy == "auto":
            cadence["run_start_times"] = starts[max(0, i + 1 - page) : i + 1].tolist()
            cadence["run_end_times"] = ends[max(0, i + 1 - page) : i].tolist()
            if trace.crons[i] is not None:
                cadence["schedule_cron"] = trace.crons[i]
        decision = teardown_decision.decide(dataclasses.replace(inputs, **cadence))
        actions.append(decision.action)
        if decision.action == "delete":
            continue
        if decision.expires_at is None:
            raise AssertionError(f"kept without an expiry at run {i} of {trace.name}")
        expiries[i] = decision.expires_at
    return actions, expiries


def ttls(
    trace: traces.Trace,
    expiries: np.ndarray,
    reaper_cron: str | None = teardown_cadence.REAPER_CRON,
) -> np.ndarray:
    """Keep seconds after each run end: 0 when deleted, else the reaper's deletion minus the end."""
    ends = trace.ends[:-1]
    out = np.zeros(len(expiries))
    for i in np.flatnonzero(~np.isnan(expiries)):
        out[i] = reaped_at(float(expiries[i]), reaper_cron) - float(ends[i])
    return out
