"""Spot preemption injector: per-cluster plans that reclaim SPOT nodes under running jobs.

A plan applies to job runs that hold at least one node of a SPOT pool. When such a run starts,
the plan picks its preemption time: ``fixed`` = ``after_seconds`` after the run started (a list
gives the delay of the 1st, 2nd, ... preemption; the last one repeats); ``poisson`` = an
exponential delay of mean ``mean_seconds`` drawn from ``random.Random(seed)`` (the k-th run
draw is the k-th value of that stream, so a seed gives the same timeline every time). At most
``max_count`` preemptions fire per plan (None = no limit). Delays are emulated seconds (scaled
by ``time_scale``).

A preemption is a VM soft-off: SIGCONT+SIGTERM to the job's process group, SIGKILL after
``slurm_preempt_notice_seconds``, the SPOT nodes DOWN for ``slurm_node_recovery_seconds``; the
job is requeued (``requeue`` true) or ends NODE_FAIL. ``unannounced_share`` (camelCase
``unannouncedShare``, in [0, 1], default 0) is the share of a plan's preemptions that come
without a usable notice, as when a Spot host fails or its notice is lost: SIGKILL at once, no
SIGTERM, ``noticeSeconds`` 0 in the timeline. Whether the k-th preemption of the plan is
unannounced is the k-th draw of its own stream, ``random.Random(f"unannounced:{seed}")``
(``unannounced_draws``), below the share; the delay stream is untouched, so a seed's timeline of
preemption times is the same whatever the share, and a larger share only adds unannounced ones.
A fault rule with action ``slurm_preempt`` on a submit request preempts that job ``seconds``
after its first start (with notice). Clusters without a plan of their own use the
``slurm_spot_preempt_*`` settings (``slurm_spot_preempt_unannounced_share`` included).
"""

from __future__ import annotations

import random
import re
from typing import Any

from vsp.vertex_emulator import fault_rules
from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import lifecycle as slurm_lifecycle

FAULT_ACTION = "slurm_preempt"
MODES = ("fixed", "poisson")
PLAN_FIELDS = frozenset(
    {"mode", "after_seconds", "afterSeconds", "mean_seconds", "meanSeconds", "seed", "max_count"}
    | {"maxCount", "count", "job_name", "jobName", "partition"}
    | {"unannounced_share", "unannouncedShare"}
)

fault_rules.register_action(FAULT_ACTION)


def poisson_delays(seed: int, mean_seconds: float, count: int) -> list[float]:
    """The first ``count`` delays of a Poisson plan (exponential, mean ``mean_seconds``)."""
    rng = random.Random(seed)
    return [rng.expovariate(1.0 / mean_seconds) for _ in range(count)]


def unannounced_draws(seed: int, count: int) -> list[float]:
    """The first ``count`` uniform draws that decide which preemptions come without notice.

    The k-th preemption of a plan is unannounced when the k-th draw is below the plan's
    ``unannounced_share``. The stream is seeded apart from ``poisson_delays``.
    """
    rng = random.Random(f"unannounced:{seed}")
    return [rng.random() for _ in range(count)]


def is_unannounced(plan: dict[str, Any], ordinal: int) -> bool:
    """Whether the plan's preemption number ``ordinal`` (0-based) comes without notice."""
    share = float(plan.get("unannounced_share") or 0.0)
    if share <= 0.0:
        return False
    return unannounced_draws(int(plan.get("seed") or 0), ordinal + 1)[ordinal] < share


def _get(raw: dict[str, Any], *names: str) -> Any:
    for name in names:
        if raw.get(name) is not None:
            return raw[name]
    return None


def normalize_plan(raw: dict[str, Any]) -> dict[str, Any]:
    """A validated plan from snake_case or camelCase fields.

    Fields: ``mode`` (fixed|poisson), ``after_seconds`` (number or list; fixed),
    ``mean_seconds`` and ``seed`` (poisson), ``max_count`` (alias ``count``; None = no
    limit), optional ``job_name`` (regex searched in the job name), ``partition`` and
    ``unannounced_share`` (in [0, 1]; the share of preemptions without notice).

    Raises:
        ValueError: Invalid fields.
    """
    unknown = sorted(set(raw) - PLAN_FIELDS)
    if unknown:
        raise ValueError(f"unknown plan fields {unknown}; known: {sorted(PLAN_FIELDS)}")
    mean = _get(raw, "mean_seconds", "meanSeconds")
    mode = str(_get(raw, "mode") or ("poisson" if mean else "fixed"))
    if mode not in MODES:
        raise ValueError(f"plan mode must be one of {MODES}, not {mode!r}")
    after = _get(raw, "after_seconds", "afterSeconds")
    after_list = [] if after is None else (after if isinstance(after, list) else [after])
    count = _get(raw, "max_count", "maxCount", "count")
    share = _get(raw, "unannounced_share", "unannouncedShare")
    if isinstance(share, bool) or not isinstance(share, (int, float, type(None))):
        raise ValueError(f"unannounced_share must be a number in [0, 1], not {share!r}")
    plan = {
        "mode": mode,
        "after_seconds": [float(x) for x in after_list],
        "mean_seconds": None if mean is None else float(mean),
        "seed": int(_get(raw, "seed") or 0),
        "max_count": None if count is None else int(count),
        "job_name": _get(raw, "job_name", "jobName"),
        "partition": _get(raw, "partition"),
        "unannounced_share": 0.0 if share is None else float(share),
    }
    if mode == "fixed" and (not after_list or min(plan["after_seconds"]) < 0):
        raise ValueError("a fixed plan needs after_seconds >= 0 (a number or a list)")
    if mode == "poisson" and not (plan["mean_seconds"] or 0) > 0:
        raise ValueError("a poisson plan needs mean_seconds > 0")
    if plan["max_count"] is not None and plan["max_count"] < 0:
        raise ValueError("max_count must not be negative")
    if not 0.0 <= plan["unannounced_share"] <= 1.0:
        raise ValueError("unannounced_share must be in [0, 1]")
    if plan["job_name"] is not None:
        re.compile(str(plan["job_name"]))
    return plan


def plan_from_settings(
    settings: Any, prefix: str, *, zero_count_is_unlimited: bool = False
) -> dict[str, Any] | None:
    """The default plan that ``{prefix}_after_seconds`` / ``_mean_seconds`` / ``_seed`` /
    ``_max_count`` (and, where the settings have it, ``_unannounced_share``) settings describe,
    or None when neither time is set.

    Args:
        settings: The emulator settings.
        prefix: Setting name prefix, e.g. ``slurm_spot_preempt``.
        zero_count_is_unlimited: Read a ``max_count`` of 0 as "no limit".
    """
    count = getattr(settings, f"{prefix}_max_count")
    if zero_count_is_unlimited:
        count = count or None
    after = getattr(settings, f"{prefix}_after_seconds")
    mean = getattr(settings, f"{prefix}_mean_seconds")
    if after > 0:
        raw = {"mode": "fixed", "after_seconds": after}
    elif mean > 0:
        raw = {"mode": "poisson", "mean_seconds": mean, "seed": getattr(settings, f"{prefix}_seed")}
    else:
        return None
    share = getattr(settings, f"{prefix}_unannounced_share", 0.0)
    return normalize_plan({**raw, "max_count": count, "unannounced_share": share})


def settings_plan(settings: Any) -> dict[str, Any] | None:
    """The default plan the ``slurm_spot_preempt_*`` settings describe, or None."""
    return plan_from_settings(settings, "slurm_spot_preempt")


def effective_plan(ctx: slurm_context.ClusterContext) -> dict[str, Any] | None:
    """The cluster's own plan, else the settings' plan."""
    return ctx.state.get("plan") or settings_plan(ctx.settings)


def describe(ctx: slurm_context.ClusterContext) -> dict[str, Any] | None:
    """The effective plan with its counters and (poisson) the next delays, for display."""
    plan = effective_plan(ctx)
    if plan is None:
        return None
    shown = {
        **plan,
        "source": "cluster" if ctx.state.get("plan") else "settings",
        "fired": ctx.state.get("plan_fired", 0),
        "runs": ctx.state.get("plan_runs", 0),
    }
    if plan["mode"] == "poisson":
        shown["preview"] = poisson_delays(plan["seed"], plan["mean_seconds"], 5)
    return shown


def on_run_start(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> None:
    """Decides when (if ever) a run that just started will be preempted."""
    job["preempt_at"], job["preempt_source"] = None, None
    if job.get("fault_preempt_after") is not None:
        job["preempt_at"] = ctx.now + ctx.scaled(job.pop("fault_preempt_after"))
        job["preempt_source"] = "fault"
        return
    plan = effective_plan(ctx)
    alloc = job.get("alloc") or []
    if plan is None or not any(node in ctx.topo.spot_nodes for node in alloc):
        return
    if plan["job_name"] is not None and not re.search(plan["job_name"], job.get("name") or ""):
        return
    if plan["partition"] and plan["partition"] != job["partition"]:
        return
    fired = ctx.state.get("plan_fired", 0)
    if plan["max_count"] is not None and fired >= plan["max_count"]:
        return
    runs = ctx.state.get("plan_runs", 0)
    ctx.state["plan_runs"] = runs + 1
    if plan["mode"] == "fixed":
        delays = plan["after_seconds"]
        delay = delays[min(fired, len(delays) - 1)]
    else:
        delay = poisson_delays(plan["seed"], plan["mean_seconds"], runs + 1)[runs]
    job["preempt_at"] = ctx.now + ctx.scaled(delay)
    job["preempt_source"] = "plan"


def fire_due(ctx: slurm_context.ClusterContext) -> None:
    """Preempts every running job whose preemption time has come."""
    for job in ctx.jobs.values():
        due = job.get("preempt_at")
        if due is None or ctx.now < due or job.get("phase") not in ("prolog", "script"):
            continue
        if job.get("kill") is not None:
            continue
        if job.get("preempt_source") == "plan":
            plan = effective_plan(ctx)
            fired = ctx.state.get("plan_fired", 0)
            if plan is None or (plan["max_count"] is not None and fired >= plan["max_count"]):
                job["preempt_at"] = None
                continue
            ctx.state["plan_fired"] = fired + 1
            preempt(ctx, job, source="plan", announced=not is_unannounced(plan, fired))
            continue
        preempt(ctx, job, source=job.get("preempt_source") or "plan")


def preempt(
    ctx: slurm_context.ClusterContext, job: dict[str, Any], source: str, *, announced: bool = True
) -> None:
    """Reclaims the SPOT nodes under a running job: SIGTERM now and SIGKILL after the notice,
    or (``announced`` False) SIGKILL at once with no SIGTERM."""
    alloc = job.get("alloc") or []
    nodes = [node for node in alloc if node in ctx.topo.spot_nodes] or list(alloc)
    outcome = "REQUEUE" if job.get("requeue") else "NODE_FAIL"
    ctx.record_event(job, "spot", outcome, nodes)
    ctx.events[-1]["source"] = source
    job["preempt_at"] = None
    notice = ctx.scaled(ctx.settings.slurm_preempt_notice_seconds) if announced else 0.0
    ctx.events[-1]["noticeSeconds"] = notice
    slurm_lifecycle.start_kill(
        ctx,
        job,
        outcome,
        notice,
        why=None,  # the Spot VM is gone, and its slurmstepd with it
        node_down=nodes,
        node_reason="Spot VM preempted",
        terminate=announced,
    )
