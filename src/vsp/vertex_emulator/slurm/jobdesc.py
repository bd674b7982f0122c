"""Parsing a v0.0.42 ``job/submit`` body into a stored job record (no scheduling here).

Accepted: ``{"job": {...job_desc...}, "script"?}`` with ``script`` either beside or inside
``job``. Numbers may be plain or ``{"set", "infinite", "number"}``. ``environment`` must be a
list of ``"K=V"``; an object is accepted with a warning, as slurmrestd does.
"""

from __future__ import annotations

import posixpath
import re
import signal as signal_module
from typing import Any

from vsp.vertex_emulator.slurm import shapes as slurm_shapes
from vsp.vertex_emulator.slurm import topology as slurm_topology

ESLURM_INVALID_PARTITION_NAME = 2000
ESLURM_INVALID_NODE_COUNT = 2006
ESLURM_JOB_SCRIPT_MISSING = 2009
ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE = 2014
ESLURM_INVALID_JOB_ID = 2017
ESLURM_INVALID_NODE_NAME = 2018
ESLURM_TRANSITION_STATE_NO_UPDATE = 2020
ESLURM_ALREADY_DONE = 2021
ESLURM_INVALID_ACCOUNT = 2045
ESLURM_INVALID_TIME_LIMIT = 2051
ESLURM_INVALID_GRES = 2072
ESLURM_JOB_FINISHED = 2084
ESLURM_ENVIRONMENT_MISSING = 2127
ESLURM_REST_FAIL_PARSING = 9001
ESLURM_REST_INVALID_JOBS_DESC = 9002

_SIGNAL_SPEC = re.compile(r"^(?:(?P<batch>[BR]+):)?(?P<sig>[A-Za-z0-9]+)(?:@(?P<delay>\d+))?$")


class SlurmError(Exception):
    """A Slurm-level failure answered as a Slurm payload (not a Google error).

    Attributes:
        status: The slurmrestd HTTP status (in the ``status`` of the envelope).
        errors: Slurm ``errors`` entries.
    """

    def __init__(self, status: int, number: int, text: str, description: str = "", source=""):
        super().__init__(text)
        self.status = status
        self.errors = [slurm_shapes.error(number, text, description, source)]


def parse_error(description: str, source: str) -> SlurmError:
    """400 for a body slurmrestd cannot parse."""
    return SlurmError(400, ESLURM_REST_FAIL_PARSING, "Failed to parse request", description, source)


def number(value: Any, field: str) -> tuple[int | None, bool]:
    """(number or None, infinite) of a plain or ``{"set","infinite","number"}`` value."""
    if value is None:
        return None, False
    if isinstance(value, dict):
        if value.get("infinite"):
            return None, True
        if value.get("set") is False:
            return None, False
        value = value.get("number")
    if isinstance(value, bool):
        raise parse_error(f"Expected a number for {field}, got a boolean", f"#/job/{field}")
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if not isinstance(value, (int, float)):
        raise parse_error(f"Expected a number for {field}, got {value!r}", f"#/job/{field}")
    return int(value), False


def environment(value: Any, warnings: list[dict[str, str]]) -> list[str]:
    """The ``environment`` as ``K=V`` strings (an object draws a warning)."""
    if isinstance(value, dict):
        warnings.append(
            slurm_shapes.warning(
                "Expected OpenAPI type=array (Slurm type=list) but got OpenAPI type=object; "
                "converted to a list of KEY=VALUE strings",
                "#/job/environment/",
            )
        )
        return [f"{k}={v}" for k, v in value.items()]
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise parse_error("environment must be a list of KEY=VALUE strings", "#/job/environment/")
    return list(value)


def node_range(job: dict[str, Any]) -> tuple[int, int]:
    """(minimum, maximum) nodes from ``nodes`` ("2", "1-4") or ``minimum/maximum_nodes``."""
    low = number(job.get("minimum_nodes"), "minimum_nodes")[0]
    high = number(job.get("maximum_nodes"), "maximum_nodes")[0]
    nodes = job.get("nodes")
    if isinstance(nodes, (int, dict)):
        low = high = number(nodes, "nodes")[0]
    elif isinstance(nodes, str) and nodes.strip():
        found = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", nodes)
        if not found:
            raise SlurmError(
                500, ESLURM_INVALID_NODE_COUNT, "Node count specification invalid", nodes
            )
        low = int(found.group(1))
        high = int(found.group(2) or found.group(1))
    low = low or 1
    return low, max(low, high or low)


def gpus_per_node(tres: str) -> int:
    """GPUs a ``tres_per_node`` string asks for ("gres/gpu:8", "gres/gpu:b200:8")."""
    total = 0
    for item in filter(None, (tres or "").split(",")):
        found = re.fullmatch(r"(?:gres[/:])?gpu(?::[\w.-]+)*?(?::(\d+))?", item.strip())
        if found is None:
            if "gpu" in item:
                raise SlurmError(
                    500, ESLURM_INVALID_GRES, "Invalid generic resource (gres) specification", item
                )
            continue
        total += int(found.group(1) or 1)
    return total


def warn_signal(job: dict[str, Any]) -> tuple[int | None, float, bool]:
    """(signal number, seconds before the limit, batch shell only) of a kill warning."""
    spec = job.get("kill_warning_signal")
    delay = number(job.get("kill_warning_delay"), "kill_warning_delay")[0]
    batch = "BATCH_JOB" in (job.get("kill_warning_flags") or [])
    if not spec and isinstance(job.get("signal"), str) and job["signal"].strip():
        found = _SIGNAL_SPEC.match(job["signal"].strip())
        if not found:
            raise parse_error(f"Invalid SIGNAL specification {job['signal']!r}", "#/job/signal")
        spec, batch = found.group("sig"), bool(found.group("batch"))
        delay = int(found.group("delay")) if found.group("delay") else delay
    if not spec:
        return None, 0.0, False
    text = str(spec).upper().removeprefix("SIG")
    if text.isdigit():
        signum = int(text)
    else:
        try:
            signum = int(signal_module.Signals["SIG" + text])
        except KeyError as exc:
            raise parse_error(f"Invalid SIGNAL specification {spec!r}", "#/job/signal") from exc
    return signum, float(60 if delay is None else delay), batch


def parse_submit(
    body: Any, topo: slurm_topology.Topology, home: str, user: str
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """The job record fields of a submit body, and the warnings to answer.

    Args:
        body: The ``body`` of the callSlurmRestApi request.
        topo: The cluster's topology.
        home: The emulated shared home (the default working directory).
        user: The job's user name.

    Raises:
        SlurmError: The body is malformed or names something that does not exist.
    """
    warnings: list[dict[str, str]] = []
    if not isinstance(body, dict) or not isinstance(body.get("job"), dict):
        if isinstance(body, dict) and body.get("jobs"):
            raise SlurmError(
                500, 2036, "Requested operation not supported on this system", "hetjobs"
            )
        raise SlurmError(
            400, ESLURM_REST_INVALID_JOBS_DESC, "Invalid job description", "No job specified"
        )
    job = body["job"]
    script = body.get("script") if body.get("script") is not None else job.get("script")
    if not isinstance(script, str) or not script.strip():
        raise SlurmError(500, ESLURM_JOB_SCRIPT_MISSING, "Batch script is missing or empty")
    if not script.startswith("#!"):
        raise SlurmError(
            500,
            ESLURM_JOB_SCRIPT_MISSING,
            "Batch script is invalid",
            "The first line must start with #! followed by the path to an interpreter",
        )
    if job.get("environment") is None:
        raise SlurmError(
            500,
            ESLURM_ENVIRONMENT_MISSING,
            "Environment is missing in job",
            "environment must be set",
            "#/job/environment/",
        )
    env = environment(job["environment"], warnings)
    partition_id = str(job.get("partition") or topo.default_partition or "").split(",")[0]
    partition = topo.partitions.get(partition_id)
    if partition is None:
        raise SlurmError(
            500,
            ESLURM_INVALID_PARTITION_NAME,
            "Invalid partition name specified",
            f"Partition {partition_id!r} does not exist",
            "slurm_submit_batch_job()",
        )
    low, high = node_range(job)
    tres = str(job.get("tres_per_node") or "")
    gpus = gpus_per_node(tres)
    usable = [n for n in partition.nodes if topo.gpus.get(n, 0) >= gpus]
    if len(usable) < low:
        raise SlurmError(
            500,
            ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE,
            "Requested node configuration is not available",
            f"{low} node(s) with {gpus} GPU(s) requested; partition {partition_id} has "
            f"{len(usable)}",
            "slurm_submit_batch_job()",
        )
    minutes, infinite = number(job.get("time_limit"), "time_limit")
    if minutes is None and not infinite:
        minutes = partition.default_time
    if minutes is not None and minutes <= 0:
        raise SlurmError(500, ESLURM_INVALID_TIME_LIMIT, "Requested time limit is invalid")
    over = minutes is None and partition.max_time is not None
    over = over or (None not in (minutes, partition.max_time) and minutes > partition.max_time)
    if over and topo.enforce_part_limits:
        raise SlurmError(
            500,
            ESLURM_INVALID_TIME_LIMIT,
            "Requested time limit is invalid (missing or exceeds some limit)",
        )
    cwd = str(job.get("current_working_directory") or home)
    paths = [cwd, str(job.get("standard_output") or ""), str(job.get("standard_error") or "")]
    warnings += host_home_warnings(paths, home)
    signum, delay, batch_only = warn_signal(job)
    tasks = number(job.get("tasks"), "tasks")[0]
    per_node = number(job.get("tasks_per_node"), "tasks_per_node")[0]
    requeue = job.get("requeue")
    fields = {
        "name": str(job.get("name") or ""),
        "comment": str(job.get("comment") or ""),
        "partition": partition_id,
        "account": str(job.get("account") or ""),
        "user": user,
        "script": script,
        "cwd": posixpath.normpath(posixpath.join(home, cwd)),
        "environment": env,
        "nodes_min": low,
        "nodes_max": high,
        "gpus": gpus,
        "tres_per_node": tres,
        "ntasks": tasks or (per_node * low if per_node else low),
        "tasks_given": bool(tasks),
        "tasks_per_node": per_node,
        "time_limit": minutes,
        "over_part_limit": bool(over),
        "requeue": topo.job_requeue_default if requeue is None else bool(requeue),
        "stdout": str(job.get("standard_output") or "slurm-%j.out"),
        "stderr": str(job.get("standard_error") or job.get("standard_output") or "slurm-%j.out"),
        "warn_signal": signum,
        "warn_delay": delay,
        "warn_batch_only": batch_only,
        "append_output": appends_output(job.get("open_mode")),
        "hold": bool(job.get("hold")),
        "begin_time": number(job.get("begin_time"), "begin_time")[0],
    }
    return fields, warnings


def host_home_warnings(paths: list[str], home: str) -> list[dict[str, str]]:
    """A warning for each absolute path under ``/home`` that is not the emulated cluster's
    home: on Vertex ``/home`` is the cluster's Filestore, but here it is this machine's own, so
    the job's files would land outside the emulator's folder (a user's ``/home/run`` did)."""
    out = []
    for path in dict.fromkeys(p for p in paths if p):
        under = posixpath.normpath(path)
        if under.startswith("/home/") and not under.startswith(home.rstrip("/") + "/"):
            local = posixpath.join(home, under.removeprefix("/home/"))
            out.append(
                slurm_shapes.warning(
                    f"{path} is this machine's /home, not the emulated cluster's home ({home}): "
                    f"the job's files there land outside the emulator's folder. Locally, use "
                    f"{local} (vsp.vertex_emulator.cluster_home(state_dir, cluster_id)); on "
                    "Vertex /home is the cluster's Filestore",
                    "#/job/current_working_directory/",
                )
            )
    return out


def appends_output(open_mode: Any) -> bool:
    """Whether ``open_mode`` asks to append to the output files.

    v0.0.42 sends a flag list (``["APPEND"]``), v0.0.38 a word (``"append"``). Without it the
    files are truncated at every start, also when a requeued job runs again (real Slurm 24.11).
    """
    words = [open_mode] if isinstance(open_mode, str) else list(open_mode or [])
    return any(str(word).upper() == "APPEND" for word in words)


def expand_path(template: str, job: dict[str, Any]) -> str:
    """An output path with ``%j %x %u %N %%`` expanded, relative to the job's directory."""
    replacements = {
        "j": str(job["job_id"]),
        "x": job.get("name") or "",
        "u": job["user"],
        "N": (job.get("alloc") or [""])[0],
        "A": str(job["job_id"]),
        "a": "4294967294",
        "%": "%",
    }

    def substitute(found: re.Match[str]) -> str:
        value = replacements[found.group(2)]
        width = int(found.group(1) or 0)
        return value.zfill(width) if found.group(2) in "jA" else value

    expanded = re.sub(r"%(\d*)([jxuNAa%])", substitute, template)
    return posixpath.normpath(posixpath.join(job["cwd"], expanded))
