"""Control endpoints of the emulated Slurm (never journaled, never faulted).

* ``POST /emulator/v1/slurm/preemptions`` with ``{"cluster": "c1", "mode": "fixed",
  "afterSeconds": 2, "maxCount": 3}`` or ``{"cluster", "mode": "poisson", "meanSeconds",
  "seed", "maxCount"}`` (optional ``jobName`` regex, ``partition``, ``unannouncedShare`` in
  [0, 1]: the share of preemptions that SIGKILL at once, without notice) sets the cluster's spot
  preemption plan -> ``{"plan": ...}``; ``{"cluster", "mode": "now", "jobId": N}`` preempts
  a running job at once -> ``{"preemption": entry}``. A plan for a cluster that does not
  exist yet waits (``"source": "pending"``) and applies when the cluster is created.
* ``GET /emulator/v1/slurm/preemptions[?cluster=c1]`` -> ``{"plan": ... (with cluster),
  "preemptions": [entry, ...]}``: the timeline (``time``, ``epoch``, ``kind`` = spot |
  partition_prio | node_failure, ``jobId``, ``jobName``, ``nodes``, ``restartCount`` before the
  preemption, ``runSeconds``, ``outcome``, ``noticeSeconds``: 0 for an unannounced one).
* ``DELETE /emulator/v1/slurm/preemptions?cluster=c1`` clears the cluster's plan.
* ``GET /emulator/v1/slurm/state?cluster=c1`` -> ``{"nodes": {...}, "jobs": [record, ...]}``.
"""

from __future__ import annotations

from typing import Any

from vsp.vertex_emulator import control, errors, router

PREFIX = f"{control.PREFIX}/slurm"


def install(app: Any) -> None:
    """Registers the Slurm control routes on ``app.control_router``."""
    add = app.control_router.add
    add("POST", rf"{PREFIX}/preemptions", _post_preemptions)
    add("GET", rf"{PREFIX}/preemptions", _get_preemptions)
    add("DELETE", rf"{PREFIX}/preemptions", _delete_preemptions)
    add("GET", rf"{PREFIX}/state", _get_state)


def _cluster(request: router.Request, body: dict[str, Any] | None = None) -> str:
    cluster = (body or {}).get("cluster") or request.query_value("cluster")
    if not cluster or not isinstance(cluster, str):
        raise errors.invalid_argument("Name the cluster: cluster=<id or full name>.")
    return cluster


def _post_preemptions(request: router.Request) -> router.Response:
    body = dict(request.json_object())
    cluster = _cluster(request, body)
    runtime = request.app.slurm
    if body.get("mode") == "now":
        job_id = body.get("jobId", body.get("job_id"))
        if not isinstance(job_id, int):
            raise errors.invalid_argument("mode=now needs an integer jobId.")
        return router.Response({"preemption": runtime.preempt_now(cluster, job_id)})
    body.pop("cluster")
    try:
        plan = runtime.set_preemption_plan(cluster, **body)
    except (ValueError, TypeError) as exc:
        raise errors.invalid_argument(f"Invalid preemption plan: {exc}") from exc
    return router.Response({"plan": plan})


def _get_preemptions(request: router.Request) -> router.Response:
    runtime = request.app.slurm
    cluster = request.query_value("cluster")
    if not cluster:
        return router.Response({"preemptions": runtime.preemptions()})
    plan = runtime.preemption_plan(cluster)  # NOT_FOUND: no such cluster, no plan waiting
    return router.Response({"plan": plan, "preemptions": runtime.preemptions(cluster)})


def _delete_preemptions(request: router.Request) -> router.Response:
    return router.Response({"cleared": request.app.slurm.clear_preemption_plan(_cluster(request))})


def _get_state(request: router.Request) -> router.Response:
    runtime = request.app.slurm
    cluster = _cluster(request)
    return router.Response({"nodes": runtime.nodes(cluster), "jobs": runtime.jobs(cluster)})
