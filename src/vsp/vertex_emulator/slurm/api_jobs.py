"""Slurm REST v0.0.42 job, node and partition handlers of the emulated slurmrestd/slurmdbd.

Each handler takes a ``Call`` and returns ``(slurm http status, payload)``; ``slurm_api`` adds
``meta``/``errors``/``warnings`` and wraps the result in the ``:callSlurmRestApi`` envelope.
"""

from __future__ import annotations

import dataclasses
import signal as signal_module
from typing import Any

from vsp.vertex_emulator.slurm import accounting as slurm_accounting
from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import final_state as slurm_final_state
from vsp.vertex_emulator.slurm import freeze as slurm_freeze
from vsp.vertex_emulator.slurm import jobdesc as slurm_jobdesc
from vsp.vertex_emulator.slurm import lifecycle as slurm_lifecycle
from vsp.vertex_emulator.slurm import preemption as slurm_preemption
from vsp.vertex_emulator.slurm import shapes as slurm_shapes
from vsp.vertex_emulator.slurm import sim as slurm_sim

Reply = tuple[int, dict[str, Any]]
_SUBMIT = "slurm_submit_batch_job()"
_HELD = "Job is in held state, pending scheduler release"
_ALREADY_DONE = "Job/step already completing or completed"
_NOT_NOW = "Job can not be altered now, try again later"


@dataclasses.dataclass
class Call:
    """One Slurm REST call.

    Attributes:
        ctx: The cluster's Slurm state.
        params: Named groups of the matched Slurm path.
        query: Query parameters of the Slurm path.
        body: The Slurm request body (POST), or None.
        request: The Vertex API request carrying it (for resource-level faults).
    """

    ctx: slurm_context.ClusterContext
    params: dict[str, str]
    query: dict[str, str]
    body: Any
    request: Any


def _invalid_job(job_id: Any, extra: dict[str, Any] | None = None) -> Reply:
    error = slurm_shapes.error(
        slurm_jobdesc.ESLURM_INVALID_JOB_ID,
        "Invalid job id specified",
        f"Unable to query JobId={job_id}",
        "_handle_job_get",
    )
    return 404, {**(extra or {}), "errors": [error]}


def _live(call: Call) -> dict[str, Any] | None:
    job = call.ctx.jobs.get(int(call.params["job_id"]))
    if job is None or slurm_final_state.expired(call.ctx, job):
        return None
    return job


def submit(call: Call) -> Reply:
    """POST /slurm/v0.0.42/job/submit."""
    ctx = call.ctx
    user = ctx.settings.slurm_user_name
    fields, warnings = slurm_jobdesc.parse_submit(call.body, ctx.topo, ctx.home, user)
    fields["account"] = slurm_accounting.resolve_account(
        ctx, user, fields["account"], fields["partition"]
    )
    fault = call.request.take_fault(slurm_preemption.FAULT_ACTION)
    frozen = call.request.take_fault(slurm_freeze.FAULT_ACTION)
    job = slurm_sim.submit(
        ctx,
        fields,
        None if fault is None else fault.seconds,
        None if frozen is None else frozen.step,
        None if frozen is None else frozen.rank,
    )
    if job.get("hold"):
        # slurmrestd 24.11 accepts a held job with these two warnings (and no errors).
        warnings = [
            *warnings,
            slurm_shapes.warning(
                f"Job submission resulted in non-zero return code: {_HELD}", _SUBMIT
            ),
            slurm_shapes.warning(_HELD, _SUBMIT),
        ]
    return 200, {
        "job_id": job["job_id"],
        "step_id": "batch",
        "job_submit_user_msg": "",
        "errors": [],
        "warnings": warnings,
    }


def _listing(ctx: slurm_context.ClusterContext, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "jobs": [slurm_shapes.job_info(job, ctx.topo.cluster_id) for job in jobs],
        "last_backfill": slurm_shapes.number(int(ctx.now)),
        "last_update": slurm_shapes.number(int(ctx.now)),
    }


def get_job(call: Call) -> Reply:
    """GET /slurm/v0.0.42/job/{id}: the live queue (404 once aged out by MinJobAge)."""
    job = _live(call)
    if job is None:
        return _invalid_job(call.params["job_id"], _listing(call.ctx, []))
    return 200, _listing(call.ctx, [job])


def list_jobs(call: Call) -> Reply:
    """GET /slurm/v0.0.42/jobs: every job still in the live queue."""
    ctx = call.ctx
    jobs = [
        ctx.jobs[k] for k in sorted(ctx.jobs) if not slurm_final_state.expired(ctx, ctx.jobs[k])
    ]
    return 200, _listing(ctx, jobs)


def cancel_job(call: Call) -> Reply:
    """DELETE /slurm/v0.0.42/job/{id}[?signal=NAME[&flags=BATCH_JOB]]: cancel or signal a job.

    As slurmrestd 24.11 answers: status 200 with ``status``, the list of jobs the request did not
    reach and why (empty when it did): an unknown job is error 2017, a finished one 2021, a
    pending one sent another signal than KILL 2020. ``errors`` is for a malformed request only.
    """
    job = _live(call)
    if job is None:
        text = "Invalid job id specified"
        entry = slurm_shapes.kill_status(
            call.params["job_id"], slurm_jobdesc.ESLURM_INVALID_JOB_ID, text, known=False
        )
        return 200, {"status": [entry]}
    name = call.query.get("signal")
    if name:
        text = name.upper().removeprefix("SIG")
        try:
            signum = int(text) if text.isdigit() else int(signal_module.Signals["SIG" + text])
        except KeyError:
            error = slurm_shapes.error(9001, "Invalid signal", f"Unknown signal {name!r}")
            return 400, {"status": [], "errors": [error]}
        if name.upper() not in ("KILL", "SIGKILL", "9"):
            batch = "BATCH_JOB" in call.query.get("flags", "").upper()
            if job.get("phase") in ("prolog", "script"):
                if signum in (signal_module.SIGTERM, signal_module.SIGKILL):
                    slurm_lifecycle.stepd_says_cancelled(call.ctx, job, slurm_lifecycle.CANCELLED)
                call.ctx.procs.signal(call.ctx.key(job), signum, leader_only=batch)
                return 200, {"status": []}
            if job["state"] == "PENDING":
                code = slurm_jobdesc.ESLURM_TRANSITION_STATE_NO_UPDATE
                return 200, {"status": [slurm_shapes.kill_status(job["job_id"], code, _NOT_NOW)]}
            return 200, {"status": [_already_done(job)]}
    if not slurm_lifecycle.cancel(call.ctx, job):
        return 200, {"status": [_already_done(job)]}
    return 200, {"status": []}


def _already_done(job: dict[str, Any]) -> dict[str, Any]:
    return slurm_shapes.kill_status(job["job_id"], slurm_jobdesc.ESLURM_ALREADY_DONE, _ALREADY_DONE)


def update_job(call: Call) -> Reply:
    """POST /slurm/v0.0.42/job/{id}: ``hold`` (false releases a held job), ``comment``,
    ``name`` and (pending jobs) ``time_limit``, given at the top of the body.

    As slurmrestd 24.11 answers a single job: ``results`` is null; an unknown job is 404 with
    error 2017, a finished one 500 with error 2084. The body is a job description itself: a
    ``{"job": {...}}`` wrapper (the submit form) changes nothing, with a warning per field. A
    hold set here is the administrator's (the Slurm Job API calls as root): reason
    ``JobHeldAdmin``, where a job submitted held shows ``JobHeldUser``.
    """
    job = _live(call)
    if job is None:
        return _update_failed(404, slurm_jobdesc.ESLURM_INVALID_JOB_ID, "Invalid job id specified")
    if job["state"] in slurm_shapes.TERMINAL_STATES:
        return _update_failed(500, slurm_jobdesc.ESLURM_JOB_FINISHED, "Job has already finished")
    desc = call.body if isinstance(call.body, dict) else {}
    warnings = [_ignored(name, value) for name, value in _wrapped(desc)]
    if desc.get("hold") is False:
        slurm_sim.release(job)
    elif desc.get("hold") is True and job["state"] == "PENDING":
        job.update(hold=True, hold_reason=slurm_sim.HELD_ADMIN)
    for field in ("comment", "name"):
        if isinstance(desc.get(field), str):
            job[field] = desc[field]
    if "time_limit" in desc and job["state"] == "PENDING":
        minutes, infinite = slurm_jobdesc.number(desc["time_limit"], "time_limit")
        job["time_limit"] = None if infinite else minutes
    slurm_sim.schedule(call.ctx)
    return 200, {"results": None, "warnings": warnings}


def _wrapped(desc: dict[str, Any]) -> list[tuple[str, Any]]:
    """The fields of a ``{"job": {...}}`` wrapper, which a job update does not read."""
    inner = desc.get("job")
    return sorted(inner.items()) if isinstance(inner, dict) else []


def _ignored(name: str, value: Any) -> dict[str, Any]:
    """slurmrestd's warning for a field it does not know in a job description."""
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array"}
    kind = kinds.get(type(value), "dictionary" if isinstance(value, dict) else "null")
    return slurm_shapes.warning(
        f'Ignoring unknown field "{name}" of type {kind} in DATA_PARSER_JOB_DESC_MSG',
        f"#/job/{name}/",
    )


def _update_failed(status: int, code: int, text: str) -> Reply:
    error = slurm_shapes.error(code, text, "Job update requested failed", "slurm_update_job2()")
    return status, {"results": None, "errors": [error]}


def _node_info(ctx: slurm_context.ClusterContext, node: str) -> dict[str, Any]:
    state, reason = ctx.node_state(node)
    return {
        "name": node,
        "hostname": node,
        "state": ["IDLE", "DRAIN"] if state == "DRAIN" else [state],
        "reason": reason,
        "partitions": [p.id for p in ctx.topo.partitions.values() if node in p.nodes],
        "gres": f"gpu:{ctx.topo.gpus[node]}" if ctx.topo.gpus.get(node) else "",
    }


def nodes(call: Call) -> Reply:
    """GET /slurm/v0.0.42/nodes."""
    ctx = call.ctx
    listed = [_node_info(ctx, node) for node in ctx.topo.nodes]
    return 200, {"nodes": listed, "last_update": slurm_shapes.number(int(ctx.now))}


def _bad_node(name: str) -> Reply:
    error = slurm_shapes.error(
        slurm_jobdesc.ESLURM_INVALID_NODE_NAME,
        "Invalid node name specified",
        f"Failure to update node {name}",
        "_update_node",
    )
    return 500, {"errors": [error]}


def node(call: Call) -> Reply:
    """GET /slurm/v0.0.42/node/{name}: one node (an unknown one: empty ``nodes``)."""
    ctx, name = call.ctx, call.params["node"]
    listed = [_node_info(ctx, name)] if name in ctx.topo.nodes else []
    return 200, {"nodes": listed, "last_update": slurm_shapes.number(int(ctx.now))}


def update_node(call: Call) -> Reply:
    """POST /slurm/v0.0.42/node/{name}: ``state`` DOWN, DRAIN or RESUME, with a ``reason``.

    As Slurm 24.11.7 does: DOWN requeues the node's requeue-able jobs at once (the others end
    NODE_FAIL), each script told ``CANCELLED ... DUE TO NODE FAILURE``; DRAIN lets them run
    and starts no new job there; RESUME returns the node. An unknown node is 500 with error
    2018.
    """
    ctx, name = call.ctx, call.params["node"]
    if name not in ctx.topo.nodes:
        return _bad_node(name)
    body = call.body if isinstance(call.body, dict) else {}
    states = body.get("state") or []
    states = [states] if isinstance(states, str) else [str(s).upper() for s in states]
    reason = str(body.get("reason") or "")
    if "DOWN" in states:
        slurm_lifecycle.node_down(ctx, name, reason)
    elif "DRAIN" in states:
        ctx.take_down([name], "DRAIN", reason, until=None)
    elif states and set(states) <= {"RESUME", "IDLE", "UNDRAIN"}:
        ctx.state["nodes"].pop(name, None)
    slurm_sim.schedule(ctx)
    return 200, {}


def partitions(call: Call) -> Reply:
    """GET /slurm/v0.0.42/partitions."""
    topo = call.ctx.topo
    listed = []
    for part in topo.partitions.values():
        limit = slurm_shapes.number(part.max_time, infinite=part.max_time is None)
        default = slurm_shapes.number(part.default_time, infinite=part.default_time is None)
        listed.append(
            {
                "name": part.id,
                "nodes": {
                    "configured": slurm_shapes.hostlist(part.nodes),
                    "total": len(part.nodes),
                },
                "partition": {"state": ["UP"]},
                "priority": {"job_factor": 1, "tier": part.tier},
                "maximums": {"time": limit},
                "defaults": {"time": default},
            }
        )
    return 200, {"partitions": listed, "last_update": slurm_shapes.number(int(call.ctx.now))}


def ping(call: Call) -> Reply:
    """GET /slurm/v0.0.42/ping."""
    host = f"{call.ctx.topo.cluster_id}-controller"
    entry = {"hostname": host, "pinged": "UP", "latency": 100, "mode": "primary"}
    return 200, {"pings": [{**entry, "primary": True, "responding": True}]}


def db_job(call: Call) -> Reply:
    """GET /slurmdb/v0.0.42/job/{id}: finished and live jobs (``jobs`` is empty if unknown)."""
    ctx = call.ctx
    job = ctx.jobs.get(int(call.params["job_id"]))
    if job is None:
        note = slurm_shapes.warning(f"Job {call.params['job_id']} not found", "slurmdb_jobs_get()")
        return 200, {"jobs": [], "warnings": [note]}
    return 200, {"jobs": [slurm_shapes.slurmdb_job(job, ctx.topo.cluster_id)]}


DB_FILTERS = {
    "job_name": lambda job: job.get("name") or "",
    "users": lambda job: job["user"],
    "account": lambda job: job.get("account") or "",
    "partition": lambda job: job["partition"],
    "state": lambda job: job["state"],
}


def db_jobs(call: Call) -> Reply:
    """GET /slurmdb/v0.0.42/jobs[?job_name=a,b&users=&account=&partition=&state=]."""
    ctx = call.ctx
    wanted = {
        name: {v.strip() for v in value.split(",") if v.strip()}
        for name, value in call.query.items()
        if name in DB_FILTERS and value.strip()
    }
    jobs = [
        slurm_shapes.slurmdb_job(ctx.jobs[k], ctx.topo.cluster_id)
        for k in sorted(ctx.jobs)
        if all(DB_FILTERS[name](ctx.jobs[k]) in values for name, values in wanted.items())
    ]
    return 200, {"jobs": jobs}
