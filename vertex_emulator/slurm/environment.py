"""The environments Slurm gives batch scripts and prolog/epilog scripts, and output paths.

Like real Slurm, nothing of the emulator's own environment reaches a job: a batch script sees
only its job's ``environment`` plus Slurm's variables (``PATH`` defaults to ``/usr/bin:/bin``,
``HOME`` to the cluster's emulated shared home). Prologs and epilogs see a minimal environment
with ``SLURM_JOB_ID``, ``SLURM_JOB_USER`` and ``SLURM_JOB_PARTITION`` (no ``SLURM_JOB_NAME``
nor ``SLURM_RESTART_COUNT``, as in Slurm).
"""

from __future__ import annotations

from typing import Any

from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import jobdesc as slurm_jobdesc
from vsp.vertex_emulator.slurm import shapes as slurm_shapes

Ctx = slurm_context.ClusterContext


def job_environment(ctx: Ctx, job: dict[str, Any]) -> dict[str, str]:
    """The batch script's whole environment: the job's own plus Slurm's variables."""
    env: dict[str, str] = {}
    for item in job.get("environment") or []:
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    env.setdefault("PATH", "/usr/bin:/bin")
    env.setdefault("HOME", ctx.home)
    nodes = job.get("alloc") or []
    nodelist = slurm_shapes.hostlist(nodes)
    env.update(
        {
            "SLURM_JOB_ID": str(job["job_id"]),
            "SLURM_JOBID": str(job["job_id"]),
            "SLURM_JOB_NAME": job.get("name") or "",
            "SLURM_JOB_PARTITION": job["partition"],
            "SLURM_JOB_NODELIST": nodelist,
            "SLURM_NODELIST": nodelist,
            "SLURM_NNODES": str(len(nodes)),
            "SLURM_JOB_NUM_NODES": str(len(nodes)),
            "SLURM_NTASKS": str(job.get("ntasks") or len(nodes)),
            "SLURM_NPROCS": str(job.get("ntasks") or len(nodes)),
            "SLURM_RESTART_COUNT": str(job.get("restart_cnt", 0)),
            "SLURM_SUBMIT_DIR": job["cwd"],
            "SLURM_CLUSTER_NAME": ctx.topo.cluster_id,
            "SLURM_JOB_ACCOUNT": job.get("account") or "",
            "SLURM_JOB_USER": job["user"],
            "SLURMD_NODENAME": nodes[0] if nodes else "",
        }
    )
    if job.get("tasks_per_node"):
        env["SLURM_NTASKS_PER_NODE"] = str(job["tasks_per_node"])
    if job.get("gpus"):
        env["SLURM_GPUS_ON_NODE"] = str(job["gpus"])
    return env


def hook_environment(ctx: Ctx, job: dict[str, Any], kind: str) -> dict[str, str]:
    """A prolog/epilog environment (no SLURM_JOB_NAME nor SLURM_RESTART_COUNT, as in Slurm)."""
    nodes = job.get("alloc") or []
    return {
        "PATH": "/usr/bin:/bin",
        "SLURM_JOB_ID": str(job["job_id"]),
        "SLURM_JOB_USER": job["user"],
        "SLURM_JOB_PARTITION": job["partition"],
        "SLURM_JOB_ACCOUNT": job.get("account") or "",
        "SLURM_JOB_NODELIST": slurm_shapes.hostlist(nodes),
        "SLURM_CLUSTER_NAME": ctx.topo.cluster_id,
        "SLURMD_NODENAME": nodes[0] if nodes else "",
        "SLURM_SCRIPT_CONTEXT": f"{kind}_slurmd",
    }


def expand_outputs(job: dict[str, Any]) -> None:
    """Sets ``stdout_path``/``stderr_path`` from the templates."""
    job["stdout_path"] = slurm_jobdesc.expand_path(job["stdout"], job)
    job["stderr_path"] = slurm_jobdesc.expand_path(job["stderr"], job)
