"""How a job's run ends: the state it is left in (final, or PENDING again after a requeue) and
when a finished job leaves the live queue (``MinJobAge``). ``lifecycle`` drives the run there.
"""

from __future__ import annotations

from typing import Any

from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import shapes as slurm_shapes

HELD_REASON = "launch failed requeued held"
_REASONS = {"TIMEOUT": "TimeLimit", "NODE_FAIL": "NodeDown", "FAILED": "NonZeroExitCode"}


def finalize(ctx: slurm_context.ClusterContext, job: dict[str, Any], outcome: str) -> None:
    """Releases the nodes and sets the state the run ends in."""
    ctx.procs.discard(ctx.key(job))
    nodes = job.get("alloc") or []
    job.update(
        alloc=[],
        last_nodes=nodes or job.get("last_nodes") or [],
        phase=None,
        step=0,
        kill=None,
        outcome=None,
        preempt_at=None,
        pgid=None,
    )
    counted = bool(job.pop("requeue_counted", False))
    if outcome in ("REQUEUE", "REQUEUE_HOLD"):
        held = outcome == "REQUEUE_HOLD"
        delay = 0.0 if held else ctx.scaled(ctx.settings.slurm_requeue_delay_seconds)
        job.update(
            state="PENDING",
            flags=["LAUNCH_FAILED", "REQUEUE_HOLD"] if held else [],
            restart_cnt=int(job.get("restart_cnt", 0)) + (0 if counted else 1),
            # Slurm 24.11 makes the requeue the job's new submission: its submit time is the
            # moment the run ended (after KillWait for ``scontrol requeue``; the node's going
            # DOWN for a node set DOWN or lost), whole seconds.
            submit_time=job.pop("requeued_at", None) or job.get("end_time") or ctx.now,
            eligible_time=ctx.now + delay,
            start_time=None,
            end_time=None,
            finished_at=None,
            exit=None,  # as Slurm 24.11 shows a requeued job: exit code SUCCESS, 0
            launch_held=held,
            reason=HELD_REASON if held else ("BeginTime" if delay else "None"),
        )
        return
    reason = _REASONS.get(outcome, "None")
    code = job.get("exit") or {}
    if outcome == "FAILED" and code.get("signal"):
        reason = f"RaisedSignal:{code['signal']}({slurm_shapes.signal_name(code['signal'])})"
    job.update(
        state=outcome,
        flags=[],
        reason=reason,
        end_time=job.get("end_time") or ctx.now,
        finished_at=ctx.now,
    )


def expired(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> bool:
    """Whether a finished job has left the live queue (``MinJobAge``)."""
    done = job.get("finished_at")
    age = ctx.scaled(ctx.settings.slurm_min_job_age_seconds)
    return done is not None and job.get("phase") is None and ctx.now - done >= age
