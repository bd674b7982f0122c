"""A job's run: prologs, the batch script, epilogs, kill sequences and the final state.

Phases (``job["phase"]``): ``prolog`` (state RUNNING+CONFIGURING), ``script`` (RUNNING) and
``epilog`` (final state + COMPLETING), each one real process at a time. A kill
(``job["kill"]``) sends SIGCONT+SIGTERM at once and SIGKILL at ``kill_at``; a node-failure kill
(spot preemption) also takes the nodes down at ``kill_at`` and ends the run there, whatever the
script did meanwhile, with no epilog (the node is gone). Outcomes: a terminal state, ``REQUEUE``
(PENDING with reason BeginTime and no flag, as Slurm 24.11 shows it; restart_cnt+1, eligible
after ``slurm_requeue_delay_seconds``) or
``REQUEUE_HOLD`` (a failed prolog: PENDING+LAUNCH_FAILED+REQUEUE_HOLD, held, node drained).
"""

from __future__ import annotations

import math
import signal
import time
from typing import Any

from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import environment as slurm_environment
from vsp.vertex_emulator.slurm import final_state as slurm_final_state
from vsp.vertex_emulator.slurm import process as slurm_process
from vsp.vertex_emulator.slurm import shapes as slurm_shapes

# What slurmstepd writes to the batch script's standard error when it ends the script
# (``*** JOB N ON NODE CANCELLED AT TIME<why> ***``, src/slurmd/slurmstepd/req.c), by cause.
CANCELLED, TIME_LIMIT, REQUEUED = "", " DUE TO TIME LIMIT", " DUE TO JOB REQUEUE"
PREEMPTED = " DUE TO PREEMPTION"
NODE_FAILURE = " DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS"


def begin_run(ctx: slurm_context.ClusterContext, job: dict[str, Any], nodes: list[str]) -> None:
    """Allocates nodes and starts the first prolog (or the script)."""
    job.update(
        alloc=list(nodes),
        state="RUNNING",
        flags=[],
        reason="None",
        description="",
        start_time=ctx.now,
        end_time=None,
        exit=None,
        kill=None,
        warned=False,
        outcome=None,
        stepd_said=False,
        node_failed=False,
    )
    ctx.filesystem.prepare(ctx.topo.nodes)
    slurm_environment.install_step_tools(ctx.directory)
    _start_phase(ctx, job, "prolog", 0)


def _start_phase(
    ctx: slurm_context.ClusterContext, job: dict[str, Any], kind: str, index: int
) -> None:
    """Starts prolog/epilog ``index`` or the script; skips past empty hook lists."""
    hooks = ctx.topo.prolog if kind == "prolog" else ctx.topo.epilog
    if kind != "script" and index >= len(hooks):
        if kind == "prolog":
            _start_phase(ctx, job, "script", 0)
        else:
            slurm_final_state.finalize(ctx, job, job.get("outcome") or "COMPLETED")
        return
    spool = ctx.spool(job)
    if kind == "script":
        text, path = job["script"], spool / "slurm_script"
        env, cwd = slurm_environment.job_environment(ctx, job), job["cwd"]
        out, err, append = job["stdout_path"], job["stderr_path"], job.get("append_output", False)
        job["flags"] = []
    else:
        text, path = hooks[index], spool / f"{kind}-{index}.sh"
        env, cwd = slurm_environment.hook_environment(ctx, job, kind), str(spool)
        out = err = str(spool / f"{kind}-{index}.log")
        append = True
        job["flags"] = ["CONFIGURING"] if kind == "prolog" else job["flags"]
    job.update(phase=kind, step=index)
    try:
        marker = slurm_process.write_script(path, text)
        proc = ctx.procs.start(
            ctx.key(job),
            kind,
            marker,
            text,
            cwd=cwd,
            env=env,
            stdout=out,
            stderr=err,
            append=append,
            filesystem=ctx.filesystem,
        )
    except OSError as exc:
        _launch_failed(ctx, job, kind, index, exc)
        return
    job.update(pgid=proc.pgid, marker=marker)


def _launch_failed(
    ctx: slurm_context.ClusterContext, job: dict[str, Any], kind: str, index: int, exc: OSError
) -> None:
    job["description"] = f"{kind} could not start: {exc}"
    if kind == "prolog":
        _prolog_failed(ctx, job)
    elif kind == "script":
        stderr = ctx.filesystem.host_path(job["stderr_path"])
        try:
            with open(stderr, "a", encoding="utf-8") as handle:
                handle.write(f"slurmstepd: error: execve(): {job['script'][:80]!r}: {exc}\n")
        except OSError:
            pass
        job.update(exit={"rc": 1, "signal": None}, end_time=ctx.now)
        finish_run(ctx, job, "FAILED")
    else:
        ctx.take_down(job.get("alloc") or [], "DRAIN", "Epilog error")
        _start_phase(ctx, job, "epilog", index + 1)


def _prolog_failed(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> None:
    ctx.take_down(job.get("alloc") or [], "DRAIN", "Prolog error")
    slurm_final_state.finalize(ctx, job, "REQUEUE_HOLD")


def stepd_says_cancelled(
    ctx: slurm_context.ClusterContext, job: dict[str, Any], why: str | None
) -> None:
    """Writes slurmstepd's ``*** JOB ... CANCELLED AT ...{why} ***`` line to the script's
    standard error, once per run, while the script runs (``why`` None: nothing, as when the
    node itself is gone)."""
    if why is None or job.get("phase") != "script" or job.get("stepd_said"):
        return
    job["stepd_said"] = True
    node = (job.get("alloc") or ["?"])[0]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ctx.now))
    line = f"slurmstepd: error: *** JOB {job['job_id']} ON {node} CANCELLED AT {stamp}{why} ***\n"
    try:
        with open(ctx.filesystem.host_path(job["stderr_path"]), "a", encoding="utf-8") as handle:
            handle.write(line)
    except OSError:
        pass


def start_kill(
    ctx: slurm_context.ClusterContext,
    job: dict[str, Any],
    outcome: str,
    wait: float,
    *,
    why: str | None,
    node_down: list[str] | None = None,
    node_reason: str = "",
    terminate: bool = True,
) -> None:
    """SIGCONT+SIGTERM now, SIGKILL after ``wait`` wall-clock seconds, then ``outcome``;
    ``terminate`` False: SIGKILL now, no SIGTERM (a node lost without notice). ``why``: the
    cause slurmstepd names in its line (``stepd_says_cancelled``). Nodes lost without notice
    (``node_down`` with ``terminate`` False) are DOWN at once and the run ends now, as when
    slurmctld sets a node DOWN (``node_down``): Slurm shows the job requeued in the same
    instant, not one emulator step later."""
    stepd_says_cancelled(ctx, job, why)
    if terminate:
        ctx.procs.terminate(ctx.key(job))
    else:
        ctx.procs.signal(ctx.key(job), signal.SIGKILL)
    job["kill"] = {
        "outcome": outcome,
        "kill_at": ctx.now + wait,
        "killed": not terminate,
        "node_down": list(node_down or []),
        "node_reason": node_reason,
    }
    if node_down and not terminate:
        _node_gone(ctx, job, job["kill"])
    elif not node_down:
        _show_completing(job, outcome)


def _show_completing(job: dict[str, Any], outcome: str) -> None:
    if outcome == "REQUEUE":  # as Slurm 24.11 shows it: no REQUEUED flag, the count already up
        counted = bool(job.get("requeue_counted"))  # once per requeue, epilogs or not
        job.update(
            state="PENDING",
            flags=["COMPLETING"],
            restart_cnt=int(job.get("restart_cnt", 0)) + (0 if counted else 1),
            requeue_counted=True,
        )
    else:
        job.update(state=outcome, flags=["COMPLETING"])


def cancel(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> bool:
    """Cancels a job (KillWait applies to running ones); False if it had already ended."""
    phase, kill = job.get("phase"), job.get("kill")
    if phase is None:
        if job["state"] in slurm_shapes.TERMINAL_STATES:
            return False
        job["end_time"] = ctx.now
        slurm_final_state.finalize(ctx, job, "CANCELLED")
        return True
    if phase == "epilog":
        if job.get("outcome") != "REQUEUE":
            return False
        job["outcome"] = "CANCELLED"
        _show_completing(job, "CANCELLED")
        return True
    if kill is not None:
        kill["outcome"] = "CANCELLED"
        if not kill["node_down"]:
            _show_completing(job, "CANCELLED")
        return True
    start_kill(
        ctx, job, "CANCELLED", ctx.scaled(ctx.settings.slurm_kill_wait_seconds), why=CANCELLED
    )
    return True


def advance(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> None:
    """One step of a running job: timers, signals, process exits, next phase."""
    phase = job.get("phase")
    if phase is None:
        return
    key = ctx.key(job)
    if ctx.procs.get(key) is None:
        lost(ctx, job)
        return
    if job.get("kill") is None and phase == "script":
        _check_limits(ctx, job)
    kill = job.get("kill")
    if kill is not None and not kill["killed"] and ctx.now >= kill["kill_at"]:
        ctx.procs.signal(key, signal.SIGKILL)
        kill["killed"] = True
        if kill["node_down"]:
            _node_gone(ctx, job, kill)
            return
    if kill is not None and kill["node_down"]:
        return
    result = ctx.procs.finished(key)
    if result is not None:
        _on_exit(ctx, job, phase, *result)


def node_down(ctx: slurm_context.ClusterContext, node: str, reason: str) -> None:
    """A node set DOWN: its jobs are killed (KillWait) and requeued at once, or end NODE_FAIL
    when not requeue-able; the node returns after ``slurm_node_return_seconds``."""
    for job in ctx.jobs.values():
        if node not in (job.get("alloc") or []) or job.get("phase") not in ("prolog", "script"):
            continue
        if job.get("kill") is not None:
            continue
        outcome = "REQUEUE" if job.get("requeue") else "NODE_FAIL"
        ctx.record_event(job, "node_down", outcome, [node])
        wait = ctx.scaled(ctx.settings.slurm_kill_wait_seconds)
        start_kill(ctx, job, outcome, wait, why=NODE_FAILURE)
        # slurmctld does not wait for a DOWN node's epilog: Slurm 24.11.7 shows the job PENDING
        # at once, never COMPLETING, resubmitted now (its submit time), whatever the processes
        # still do during KillWait.
        job.update(flags=[], node_failed=True)
        if outcome == "REQUEUE":
            job.update(submit_time=ctx.now, requeued_at=ctx.now)
    until = ctx.now + ctx.scaled(ctx.settings.slurm_node_return_seconds)
    ctx.take_down([node], "DOWN", reason or "Not responding", until=until)


def requeue(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> None:
    """``scontrol requeue``: SIGTERM, SIGKILL after KillWait, then pending again
    (``BeginTime``), the script told ``CANCELLED ... DUE TO JOB REQUEUE``."""
    ctx.record_event(job, "requeue", "REQUEUE", list(job.get("alloc") or []))
    wait = ctx.scaled(ctx.settings.slurm_kill_wait_seconds)
    start_kill(ctx, job, "REQUEUE", wait, why=REQUEUED)


def _limit_enforced_at(ctx: slurm_context.ClusterContext, limit_at: float) -> float:
    """The first time-limit check at or after ``limit_at`` (slurmctld's periodic timer)."""
    period = ctx.scaled(ctx.settings.slurm_time_limit_check_seconds)
    if period <= 0:
        return limit_at
    return math.ceil(limit_at / period) * period


def _check_limits(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> None:
    minutes = job.get("time_limit")
    if minutes is None or not job.get("start_time"):
        return
    limit_at = job["start_time"] + ctx.scaled(minutes * 60)
    if job.get("warn_signal") and not job.get("warned"):
        if ctx.now >= limit_at - ctx.scaled(job.get("warn_delay") or 0):
            batch = bool(job.get("warn_batch_only"))
            ctx.procs.signal(ctx.key(job), job["warn_signal"], leader_only=batch)
            job["warned"] = True
    if ctx.now >= _limit_enforced_at(ctx, limit_at):
        wait = ctx.scaled(ctx.settings.slurm_kill_wait_seconds)
        start_kill(ctx, job, "TIMEOUT", wait, why=TIME_LIMIT)


def _node_gone(
    ctx: slurm_context.ClusterContext, job: dict[str, Any], kill: dict[str, Any]
) -> None:
    ctx.take_down(kill["node_down"], "DOWN", kill["node_reason"] or "Not responding")
    result = ctx.procs.finished(ctx.key(job))
    ctx.procs.discard(ctx.key(job))
    if job.get("phase") == "script":
        rc, sig = result if result is not None else (None, int(signal.SIGKILL))
        job.update(exit={"rc": rc, "signal": sig}, end_time=ctx.now)
    slurm_final_state.finalize(ctx, job, kill["outcome"])


def _on_exit(
    ctx: slurm_context.ClusterContext,
    job: dict[str, Any],
    phase: str,
    rc: int | None,
    sig: int | None,
) -> None:
    kill = job.get("kill")
    if phase == "prolog":
        if kill is not None:
            slurm_final_state.finalize(ctx, job, kill["outcome"])
        elif rc == 0 and sig is None:
            _start_phase(ctx, job, "prolog", job.get("step", 0) + 1)
        else:
            job["description"] = f"prolog {job.get('step', 0)} exited with {rc or sig}"
            _prolog_failed(ctx, job)
    elif phase == "script":
        job.update(exit={"rc": rc, "signal": sig}, end_time=ctx.now)
        outcome = kill["outcome"] if kill else ("COMPLETED" if rc == 0 and not sig else "FAILED")
        finish_run(ctx, job, outcome)
    else:
        if rc != 0 or sig:
            ctx.take_down(job.get("alloc") or [], "DRAIN", "Epilog error")
        _start_phase(ctx, job, "epilog", job.get("step", 0) + 1)


def finish_run(ctx: slurm_context.ClusterContext, job: dict[str, Any], outcome: str) -> None:
    """After the script: the epilogs (state shows COMPLETING), then ``finalize``."""
    job.update(kill=None, outcome=outcome)
    if not ctx.topo.epilog or job.get("node_failed"):
        slurm_final_state.finalize(ctx, job, outcome)
        return
    _show_completing(job, outcome)
    _start_phase(ctx, job, "epilog", 0)


def lost(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> None:
    """A job whose process this emulator does not have (it restarted): a node failure."""
    slurm_process.kill_stale_group(job.get("pgid"), job.get("marker"))
    if job.get("phase") == "epilog":
        slurm_final_state.finalize(ctx, job, job.get("outcome") or "COMPLETED")
        return
    kill = job.get("kill")
    if kill is not None and not kill["node_down"]:
        outcome = kill["outcome"]
    else:
        outcome = "REQUEUE" if job.get("requeue") else "NODE_FAIL"
    ctx.record_event(job, "node_failure", outcome, job.get("alloc") or [])
    job["end_time"] = ctx.now
    slurm_final_state.finalize(ctx, job, outcome)
