"""Finding Slurm jobs: one job by id, and a run's jobs by run key.

The live queue (``/slurm/{version}/...``) answers first; slurmdb (``/slurmdb/{version}/...``)
holds the jobs that left it after MinJobAge. For one job a slurmdb miss is an answer; for a
run's jobs slurmdb is a tolerant second source (a cluster without slurmdbd, or an accounting
error, leaves the live answer standing), and its job list is asked without a query string, as
the proxy's documented paths carry none.
"""

from __future__ import annotations

import logging
from typing import Any

from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import error_codes
from vsp.components.runtime.slurm import job as slurm_job

log = logging.getLogger(__name__)


def get_job(client: Any, job_id: int) -> slurm_job.JobInfo:
    """The job from the live queue, else from accounting (slurmdb).

    Args:
        client: The cluster's ``SlurmClient``.
        job_id: Slurm job id.

    Raises:
        slurm_errors.SlurmJobNotFoundError: Known to neither.
    """
    what = f"lookup of Slurm job {job_id}"
    try:
        live = client.call("GET", client.slurm_path(f"job/{int(job_id)}"), idempotent=True)
    except errors.NotFoundError as exc:  # a proxy that maps Slurm's 404 to a Google 404
        log.info("%s: live queue answered NOT_FOUND (%s); trying slurmdb", what, exc.message)
        live = None
    if live is not None and live.ok:
        found = _pick(live.payload, job_id)
        if found is not None:
            return found
    elif live is not None and not live.not_found:
        raise live.error(what)
    db = client.call("GET", client.slurmdb_path(f"job/{int(job_id)}"), idempotent=True)
    if db.ok:
        found = _pick(db.payload, job_id)
        if found is not None:
            return found
    elif not db.not_found:
        raise db.error(what)
    answers = "; ".join(
        f"{r.path} -> {r.status}: {r.describe_errors()}" for r in (live, db) if r is not None
    )
    raise error_codes.SlurmJobNotFoundError(
        f"Slurm job {job_id} is in neither the live queue nor slurmdb ({answers}). Accounting "
        "may lag behind a just-finished job; a 404 for every path can also mean the cluster "
        f"does not serve slurmrestd {client.version}.",
        what=what,
    )


def _pick(payload: dict[str, Any], job_id: int) -> slurm_job.JobInfo | None:
    jobs = [slurm_job.JobInfo.parse(j) for j in payload.get("jobs") or [] if isinstance(j, dict)]
    matching = [j for j in jobs if j.job_id == int(job_id)]
    if not matching:
        return None
    return max(enumerate(matching), key=lambda p: (p[1].submit_time or 0, p[0]))[1]


def find_jobs(
    client: Any, run_key: str, *, include_accounting: bool = False
) -> list[slurm_job.JobInfo]:
    """Jobs carrying ``run_key`` (job name, or ``vsp-run-key=`` in comment), newest first.

    Args:
        client: The cluster's ``SlurmClient``.
        run_key: The run key given to ``JobDescription``.
        include_accounting: Also ask slurmdb (see the module docstring); live records win.
    """
    found = {j.job_id: j for j in client.list_jobs() if j.carries_run_key(run_key)}
    if include_accounting:
        for job in _accounting_jobs(client):
            if job.carries_run_key(run_key):
                found.setdefault(job.job_id, job)
    return sorted(found.values(), key=lambda j: (j.submit_time or 0, j.job_id), reverse=True)


def _accounting_jobs(client: Any) -> list[slurm_job.JobInfo]:
    """slurmdb's jobs, or [] (with a warning) when accounting cannot answer."""
    path = client.slurmdb_path("jobs")
    try:
        response = client.call("GET", path, idempotent=True)
    except (errors.UserError, errors.TransientError) as exc:
        log.warning("slurmdb job list unavailable (%s); using the live queue only", exc)
        return []
    if not response.ok:
        log.warning(
            "slurmdb job list unavailable (%s -> %d: %s); using the live queue only: a "
            "finished job older than MinJobAge cannot be found",
            path,
            response.status,
            response.describe_errors(),
        )
        return []
    records = response.payload.get("jobs") or []
    return [slurm_job.JobInfo.parse(r) for r in records if isinstance(r, dict)]
