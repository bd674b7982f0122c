"""The environments Slurm gives batch scripts and prolog/epilog scripts, and output paths.

Like real Slurm, nothing of the emulator's own environment reaches a job: a batch script sees
only its job's ``environment`` plus Slurm's variables (no ``PATH`` or ``HOME`` of its own).
Prologs and epilogs see a minimal environment
with ``SLURM_JOB_ID``, ``SLURM_JOB_USER`` and ``SLURM_JOB_PARTITION`` (no ``SLURM_JOB_NAME``
nor ``SLURM_RESTART_COUNT``, as in Slurm).
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any

from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import jobdesc as slurm_jobdesc
from vsp.vertex_emulator.slurm import shapes as slurm_shapes
from vsp.vertex_emulator.slurm import step_tools

TOOLS_DIRNAME = "bin"
TOOLS = ("srun", "scontrol")

# Without a time limit Slurm 24.11 reports the job's end as its start plus 365 days.
_NO_LIMIT_MINUTES = 365 * 24 * 60


def job_environment(ctx: slurm_context.ClusterContext, job: dict[str, Any]) -> dict[str, str]:
    """The batch script's whole environment: the job's own plus Slurm's variables.

    The names and forms are those Slurm 24.11 gives a batch step submitted through slurmrestd
    (compared by the conformance suite): no ``PATH``, ``HOME``, ``USER``, ``LOGNAME`` or
    ``SHELL`` unless the request lists them; ``SLURM_RESTART_COUNT`` only once the job was
    requeued; ``SLURM_NTASKS``/``SLURM_NPROCS`` only when the request gives tasks;
    ``SLURM_OPEN_MODE=a`` with ``open_mode: ["APPEND"]``; ``SLURM_JOB_END_TIME`` = start + time
    limit (365 days without one); no ``SLURM_SUBMIT_DIR``. Not modelled: ``SLURM_CONF`` (no
    slurm.conf file here), ``SLURM_TASK_PID`` and ``SLURM_MEM_PER_CPU``.
    """
    env: dict[str, str] = {}
    for item in job.get("environment") or []:
        name, sep, value = item.partition("=")
        if sep and name:
            env[name] = value
    nodes = job.get("alloc") or []
    node = nodes[0] if nodes else ""
    nodelist = slurm_shapes.hostlist(nodes)
    start = int(job.get("start_time") or 0)
    limit_minutes = job.get("time_limit")
    env.update(
        {
            "ENVIRONMENT": "BATCH",
            "HOSTNAME": node,
            "TMPDIR": env.get("TMPDIR", "/tmp"),
            "SLURM_JOB_ID": str(job["job_id"]),
            "SLURM_JOBID": str(job["job_id"]),
            "SLURM_JOB_NAME": job.get("name") or "",
            "SLURM_JOB_PARTITION": job["partition"],
            "SLURM_JOB_NODELIST": nodelist,
            "SLURM_NODELIST": nodelist,
            "SLURM_NNODES": str(len(nodes)),
            "SLURM_JOB_NUM_NODES": str(len(nodes)),
            "SLURM_TASKS_PER_NODE": str(job.get("tasks_per_node") or 1),
            "SLURM_CPUS_ON_NODE": str(job.get("tasks_per_node") or 1),
            "SLURM_JOB_CPUS_PER_NODE": str(job.get("tasks_per_node") or 1),
            "SLURM_CLUSTER_NAME": ctx.topo.cluster_id,
            "SLURM_JOB_USER": job["user"],
            "SLURM_JOB_UID": str(os.getuid()),
            "SLURM_JOB_GID": str(os.getgid()),
            "SLURM_JOB_START_TIME": str(start),
            "SLURM_JOB_END_TIME": str(start + int(limit_minutes or _NO_LIMIT_MINUTES) * 60),
            "SLURM_NODEID": "0",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURM_GTIDS": "0",
            "SLURM_OOM_KILL_STEP": "0",
            "SLURM_TOPOLOGY_ADDR": node,
            "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
            "SLURMD_NODENAME": node,
        }
    )
    if job.get("tasks_given"):
        env["SLURM_NTASKS"] = env["SLURM_NPROCS"] = str(job.get("ntasks") or len(nodes))
    if job.get("account"):
        env["SLURM_JOB_ACCOUNT"] = job["account"]
    if job.get("append_output"):
        env["SLURM_OPEN_MODE"] = "a"
    if job.get("restart_cnt"):
        env["SLURM_RESTART_COUNT"] = str(job["restart_cnt"])
    if job.get("gpus"):
        env["SLURM_GPUS_ON_NODE"] = str(job["gpus"])
    # The emulated srun and scontrol come first in a PATH the job gives (a cluster has its
    # own in the default PATH); without PATH the job has none, as with Slurm.
    if env.get("PATH"):
        env["PATH"] = f"{ctx.directory / TOOLS_DIRNAME}:{env['PATH']}"
    return env


def install_step_tools(directory: pathlib.Path) -> str:
    """Writes ``srun`` and ``scontrol`` (``step_tools``) into ``directory/bin``; returns it.

    Each is a copy of ``step_tools``'s source with this Python in its ``#!`` line (standard
    library only, so it runs whatever the job's environment holds).
    """
    folder = directory / TOOLS_DIRNAME
    folder.mkdir(parents=True, exist_ok=True)
    source = pathlib.Path(step_tools.__file__).read_text(encoding="utf-8")
    text = f"#!{sys.executable} -I\n{source}"
    for name in TOOLS:
        path = folder / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            tmp = folder / f".{name}.tmp"
            tmp.write_text(text, encoding="utf-8")
            tmp.chmod(0o755)
            os.replace(tmp, path)
    return str(folder)


def hook_environment(
    ctx: slurm_context.ClusterContext, job: dict[str, Any], kind: str
) -> dict[str, str]:
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
