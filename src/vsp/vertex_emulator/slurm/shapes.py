"""Slurm REST v0.0.42 JSON shapes: numbers, meta, errors, JobInfo and slurmdb job records.

Every Slurm payload carries ``meta``, ``errors`` and ``warnings``. Unsettable numbers are
``{"set", "infinite", "number"}``; ``job_state`` is a list (base state first, then flags in
Slurm's bit order).
"""

from __future__ import annotations

import re
import signal as signal_module
from typing import Any

SLURM_VERSION = {"major": "25", "micro": "2", "minor": "05"}
SLURM_RELEASE = "25.05.2"
DATA_PARSER = "data_parser/v0.0.42"
FLAG_ORDER = (
    "LAUNCH_FAILED",
    "REQUEUED",
    "REQUEUE_HOLD",
    "SPECIAL_EXIT",
    "RESIZING",
    "CONFIGURING",
    "COMPLETING",
    "STOPPED",
    "SIGNALING",
)
TERMINAL_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL"}
)
_SUFFIX = re.compile(r"^(.*?)(\d+)$")


def number(value: float | int | None, *, infinite: bool = False) -> dict[str, Any]:
    """``{"set", "infinite", "number"}``: None = unset; ``infinite`` = INFINITE."""
    if infinite:
        return {"set": False, "infinite": True, "number": 0}
    if value is None:
        return {"set": False, "infinite": False, "number": 0}
    return {"set": True, "infinite": False, "number": int(value)}


def meta(cluster_id: str, user: str, plugin: str = "openapi/slurmctld") -> dict[str, Any]:
    """The ``meta`` block of every answer."""
    return {
        "plugin": {
            "type": plugin,
            "name": "Slurm OpenAPI " + plugin.split("/")[-1],
            "data_parser": DATA_PARSER,
            "accounting_storage": "accounting_storage/slurmdbd",
        },
        "client": {"source": "[vertex-emulator]", "user": user, "group": user},
        "command": [],
        "slurm": {"version": dict(SLURM_VERSION), "release": SLURM_RELEASE, "cluster": cluster_id},
    }


def error(number_: int, text: str, description: str = "", source: str = "") -> dict[str, Any]:
    """One entry of ``errors``."""
    return {"description": description, "error_number": number_, "error": text, "source": source}


def warning(description: str, source: str = "") -> dict[str, str]:
    """One entry of ``warnings``."""
    return {"description": description, "source": source}


def kill_status(job_id: int | str, code: int, text: str, *, known: bool = True) -> dict[str, Any]:
    """One entry of the ``status`` list of ``DELETE /slurm/v0.0.42/job/{id}``: a job the signal or
    cancel did not reach, and why (``known=False``: no such job, so ``job_id`` is unset)."""
    return {
        "error": {"string": text, "code": code, "message": text},
        "step_id": str(job_id),
        "job_id": number(int(job_id) if known else None),
        "federation": {"sibling": ""},
    }


def hostlist(names: list[str] | tuple[str, ...]) -> str:
    """Slurm's compressed host list: ``c1-a4-[0-1],c1-b-0``."""
    groups: dict[str, list[int]] = {}
    plain: list[str] = []
    for name in names:
        found = _SUFFIX.match(name)
        if found:
            groups.setdefault(found.group(1), []).append(int(found.group(2)))
        else:
            plain.append(name)
    parts = []
    for prefix, numbers in groups.items():
        numbers = sorted(set(numbers))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]}")
            continue
        ranges, start, last = [], numbers[0], numbers[0]
        for value in numbers[1:] + [None]:
            if value is not None and value == last + 1:
                last = value
                continue
            ranges.append(f"{start}" if start == last else f"{start}-{last}")
            if value is not None:
                start = last = value
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts + plain)


def signal_name(number_: int) -> str:
    """``KILL`` for 9, ``TERM`` for 15, ... (empty when unknown)."""
    try:
        return signal_module.Signals(number_).name.removeprefix("SIG")
    except ValueError:
        return ""


def exit_code(job: dict[str, Any]) -> dict[str, Any]:
    """``exit_code`` of a job from its stored ``exit`` (``{"rc", "signal"}`` or None)."""
    code = job.get("exit")
    if not code:  # Slurm 24.11 shows a job that has not ended a run (yet) as exited 0
        status, rc, sig = ["SUCCESS"], 0, None
    elif code.get("signal"):
        status, rc, sig = ["SIGNALED"], 0, int(code["signal"])
    else:
        rc, sig = int(code.get("rc") or 0), None
        status = ["SUCCESS"] if rc == 0 else ["ERROR"]
    return {
        "status": status,
        "return_code": number(rc),
        "signal": {"id": number(sig), "name": signal_name(sig) if sig else ""},
    }


def job_state(job: dict[str, Any]) -> list[str]:
    """``job_state``: the base state, then its flags in Slurm's order."""
    flags = set(job.get("flags") or [])
    return [job["state"], *(f for f in FLAG_ORDER if f in flags)]


def _limit(job: dict[str, Any]) -> dict[str, Any]:
    minutes = job.get("time_limit")
    return number(None, infinite=True) if minutes is None else number(minutes)


def _time(value: float | None) -> dict[str, Any]:
    return number(int(value) if value else 0)


def job_info(job: dict[str, Any], cluster_id: str) -> dict[str, Any]:
    """The ``/slurm/v0.0.42/job/{id}`` JobInfo of a stored job."""
    nodes = job.get("alloc") or job.get("last_nodes") or []
    return {
        "account": job.get("account") or "",
        "batch_flag": True,
        "batch_host": nodes[0] if nodes and job["state"] != "PENDING" else "",
        "cluster": cluster_id,
        "comment": job.get("comment") or "",
        "current_working_directory": job["cwd"],
        "eligible_time": _time(job.get("eligible_time")),
        "end_time": _time(job.get("end_time")),
        "exit_code": exit_code(job),
        "flags": [],
        "hold": bool(job.get("hold")),
        "job_id": job["job_id"],
        "job_state": job_state(job),
        "name": job.get("name") or "",
        "node_count": number(len(nodes) if nodes else job["nodes_min"]),
        "nodes": hostlist(nodes) if job["state"] != "PENDING" else "",
        "partition": job["partition"],
        "priority": number(0 if job.get("hold") or job.get("launch_held") else job["priority"]),
        "requeue": bool(job.get("requeue")),
        "restart_cnt": int(job.get("restart_cnt", 0)),
        "standard_error": job["stderr_path"],
        "standard_input": "/dev/null",
        "standard_output": job["stdout_path"],
        "start_time": _time(job.get("start_time")),
        "state_description": job.get("description") or "",
        "state_reason": job.get("reason") or "None",
        "submit_time": _time(job.get("submit_time")),
        "tasks": number(job.get("ntasks")),
        "time_limit": _limit(job),
        "tres_per_node": job.get("tres_per_node") or "",
        "user_name": job["user"],
    }


def slurmdb_job(job: dict[str, Any], cluster_id: str) -> dict[str, Any]:
    """The ``/slurmdb/v0.0.42/job/{id}`` record of a stored job."""
    nodes = job.get("alloc") or job.get("last_nodes") or []
    start, end = job.get("start_time"), job.get("end_time")
    elapsed = int((end or 0) - start) if start and end else 0
    return {
        "account": job.get("account") or "",
        "association": {
            "account": job.get("account") or "",
            "cluster": cluster_id,
            "partition": "",
            "user": job["user"],
        },
        "cluster": cluster_id,
        "comment": {"administrator": "", "job": job.get("comment") or "", "system": ""},
        "derived_exit_code": exit_code(job),
        "exit_code": exit_code(job),
        "flags": [],
        "group": job["user"],
        "hold": bool(job.get("hold")),
        "job_id": job["job_id"],
        "name": job.get("name") or "",
        "nodes": hostlist(nodes) if nodes else "None assigned",
        "partition": job["partition"],
        "priority": number(job.get("priority", 0)),
        "qos": "normal",
        "restart_cnt": int(job.get("restart_cnt", 0)),
        "state": {"current": job_state(job), "reason": job.get("reason") or "None"},
        "stderr": job["stderr"],
        "stderr_expanded": job["stderr_path"],
        "stdout": job["stdout"],
        "stdout_expanded": job["stdout_path"],
        "time": {
            "elapsed": elapsed,
            "eligible": int(job.get("eligible_time") or 0),
            "end": int(end or 0),
            "limit": _limit(job),
            "planned": number(int(start - job["submit_time"]) if start else None),
            "start": int(start or 0),
            "submission": int(job["submit_time"]),
            "suspended": 0,
        },
        "user": job["user"],
        "working_directory": job["cwd"],
    }
