"""Scheduling for the emulated Slurm: submission, FIFO-by-priority starts and partition-priority
preemption, plus the per-step driver.

Pending jobs are ordered by partition ``PriorityTier``, then ``priority`` (earlier submission =
higher), and started strictly in that order (no backfill): a job that cannot start reserves its
partition's nodes, so later jobs on them wait with reason ``Priority``. A job needs ``nodes``
free nodes of its partition (with enough GPUs for ``tres_per_node``). When it cannot start and
preemption is on, running jobs of lower-tier partitions on those nodes are preempted (their
``PreemptMode``: REQUEUE requeues requeue-able jobs, others end PREEMPTED; OFF is exempt, as are
runs younger than ``PreemptExemptTime``). Reasons: JobHeldUser, launch failed requeued held,
BeginTime, PartitionTimeLimit, PartitionDown, NodeDown, Resources, Priority.
"""

from __future__ import annotations

from typing import Any

from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import environment as slurm_environment
from vsp.vertex_emulator.slurm import final_state as slurm_final_state
from vsp.vertex_emulator.slurm import freeze as slurm_freeze
from vsp.vertex_emulator.slurm import lifecycle as slurm_lifecycle
from vsp.vertex_emulator.slurm import preemption as slurm_preemption

PRIORITY_SPAN = 1_000_000
HELD_USER, HELD_ADMIN = "JobHeldUser", "JobHeldAdmin"


def step(ctx: slurm_context.ClusterContext, *, scheduler_pass: bool = True) -> None:
    """Advances one cluster: node recovery, running jobs, spot preemptions and, with
    ``scheduler_pass``, scheduling. slurmctld starts pending jobs on its own timer and on
    events (a submission, ``schedule`` after an API change), never because a client read the
    queue: the emulator's request ticks pass False, so a start is not timed by a poll."""
    ctx.recover_nodes()
    for job in list(ctx.jobs.values()):
        slurm_lifecycle.advance(ctx, job)
    slurm_preemption.fire_due(ctx)
    slurm_freeze.fire_due(ctx)
    if scheduler_pass:
        schedule(ctx)


def tier(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> int:
    """The ``PriorityTier`` of a job's partition (0 if the partition is gone)."""
    partition = ctx.topo.partitions.get(job["partition"])
    return partition.tier if partition else 0


def submit(
    ctx: slurm_context.ClusterContext,
    fields: dict[str, Any],
    fault_after: float | None,
    freeze_at_step: int | None = None,
    freeze_rank: int | None = None,
) -> dict[str, Any]:
    """Records a new PENDING job and runs the scheduler; returns the job.

    Args:
        ctx: The cluster.
        fields: The parsed job description.
        fault_after: Seconds after its first start at which a fault preempts it (None: none).
        freeze_at_step: The training step at which a fault freezes its trainer (``freeze``).
        freeze_rank: The rank it freezes (None: the first to reach the step).
    """
    job_id = int(ctx.state["next_job_id"])
    ctx.state["next_job_id"] = job_id + 1
    partition = ctx.topo.partitions[fields["partition"]]
    begin = fields.pop("begin_time", None)
    job = {
        **fields,
        "job_id": job_id,
        "cluster": ctx.name,
        "state": "PENDING",
        "flags": [],
        "reason": "None",
        "description": "",
        "restart_cnt": 0,
        "priority": partition.tier * PRIORITY_SPAN + max(1, PRIORITY_SPAN - job_id),
        "submit_time": ctx.now,
        "eligible_time": max(ctx.now, float(begin or 0)),
        "start_time": None,
        "end_time": None,
        "finished_at": None,
        "alloc": [],
        "last_nodes": [],
        "exit": None,
        "phase": None,
        "step": 0,
        "kill": None,
        "launch_held": False,
        "fault_preempt_after": fault_after,
        "freeze_at_step": freeze_at_step,
        "freeze_rank": freeze_rank,
    }
    slurm_environment.expand_outputs(job)
    ctx.jobs[job_id] = job
    schedule(ctx)
    return job


def release(job: dict[str, Any]) -> None:
    """Releases a held job (user hold or a failed launch)."""
    flags = [f for f in job.get("flags") or [] if f not in ("REQUEUE_HOLD", "LAUNCH_FAILED")]
    job.update(hold=False, hold_reason=None, launch_held=False, flags=flags, reason="None")


def _blocker(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> str | None:
    if job.get("hold"):
        return job.get("hold_reason") or HELD_USER
    if job.get("launch_held"):
        return slurm_final_state.HELD_REASON
    if ctx.now < float(job.get("eligible_time") or 0):
        return "BeginTime"
    if job["partition"] not in ctx.topo.partitions:
        return "PartitionDown"
    if job.get("over_part_limit"):
        return "PartitionTimeLimit"
    return None


def schedule(ctx: slurm_context.ClusterContext) -> None:
    """Starts the pending jobs that can run, in priority order; sets the others' reasons."""
    pending = [
        job
        for job in ctx.jobs.values()
        if job["state"] == "PENDING" and job.get("phase") is None and not job.get("alloc")
    ]
    pending.sort(key=lambda j: (-tier(ctx, j), -j["priority"], j["submit_time"], j["job_id"]))
    busy, down, blocked = ctx.allocated(), ctx.unavailable(), set()
    for job in pending:
        reason = _blocker(ctx, job)
        if reason is not None:
            job["reason"] = reason
            continue
        partition = ctx.topo.partitions[job["partition"]]
        candidates = [n for n in partition.nodes if ctx.topo.gpus.get(n, 0) >= job.get("gpus", 0)]
        need = int(job.get("nodes_min") or 1)
        free = [n for n in candidates if n not in busy and n not in down and n not in blocked]
        if len(free) >= need:
            nodes = free[:need]
            job["alloc"] = nodes
            slurm_preemption.on_run_start(ctx, job)
            slurm_lifecycle.begin_run(ctx, job, nodes)
            busy.update(nodes)
            continue
        up = [n for n in candidates if n not in down]
        if len(up) < need:
            job["reason"] = "NodeDown"
        elif _preempt_for(ctx, job, partition, candidates, free, need):
            job["reason"] = "Resources"
        elif blocked.intersection(candidates):
            job["reason"] = "Priority"
        else:
            job["reason"] = "Resources"
        blocked.update(candidates)


def _preemptable(
    ctx: slurm_context.ClusterContext, victim: dict[str, Any], above: int, nodes: set[str]
) -> bool:
    if victim.get("phase") not in ("prolog", "script") or victim.get("kill") is not None:
        return False
    if not nodes.intersection(victim.get("alloc") or []) or tier(ctx, victim) >= above:
        return False
    partition = ctx.topo.partitions.get(victim["partition"])
    if partition is None or partition.preempt_mode.startswith("OFF"):
        return False
    ran = ctx.now - float(victim.get("start_time") or ctx.now)
    return ran >= ctx.scaled(ctx.topo.preempt_exempt_seconds)


def _preempt_for(
    ctx: slurm_context.ClusterContext,
    job: dict[str, Any],
    partition: Any,
    candidates: list[str],
    free: list[str],
    need: int,
) -> bool:
    """Preempts lower-tier jobs so ``job`` can start; True if it will be able to."""
    if not ctx.topo.preemption_enabled:
        return False
    wanted = set(candidates)
    soon = set(free)
    for other in ctx.jobs.values():
        kill = other.get("kill")
        if kill is not None and not kill["node_down"] and other.get("phase"):
            soon.update(wanted.intersection(other.get("alloc") or []))
    if len(soon) >= need:
        return True
    victims = [v for v in ctx.jobs.values() if _preemptable(ctx, v, partition.tier, wanted)]
    victims.sort(key=lambda v: (tier(ctx, v), -float(v.get("start_time") or 0)))
    chosen = []
    for victim in victims:
        if len(soon) >= need:
            break
        chosen.append(victim)
        soon.update(wanted.intersection(victim["alloc"]))
    if len(soon) < need:
        return False
    wait = ctx.scaled(ctx.settings.slurm_kill_wait_seconds)
    for victim in chosen:
        mode = ctx.topo.partitions[victim["partition"]].preempt_mode
        requeue = victim.get("requeue") and not mode.startswith("CANCEL")
        outcome = "REQUEUE" if requeue else "PREEMPTED"
        ctx.record_event(victim, "partition_prio", outcome, list(victim["alloc"]))
        ctx.events[-1]["preemptedBy"] = job["job_id"]
        why = slurm_lifecycle.PREEMPTED  # also in REQUEUE mode (measured on 24.11.7)
        slurm_lifecycle.start_kill(ctx, victim, outcome, wait, why=why)
    return True


def shut_down_cluster(ctx: slurm_context.ClusterContext) -> None:
    """The cluster is being deleted: kills every job process; running jobs end NODE_FAIL."""
    for job in ctx.jobs.values():
        if job.get("phase") is not None:
            job["end_time"] = ctx.now
            slurm_final_state.finalize(ctx, job, "NODE_FAIL")
        elif job["state"] == "PENDING":
            slurm_final_state.finalize(ctx, job, "CANCELLED")
