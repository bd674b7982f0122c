"""Spot preemptions on a real Slurm, made with Slurm's own mechanisms.

Driven by the same settings as the emulated injector: ``slurm_spot_preempt_after_seconds`` (each
run of a Spot job is preempted that long after it started) or ``slurm_spot_preempt_mean_seconds``
with ``slurm_spot_preempt_seed`` (Poisson), at most ``slurm_spot_preempt_max_count`` times.
Every preemption here comes with Slurm's signals (``slurm_spot_preempt_unannounced_share``
applies to the emulated Slurm only).
Spot jobs are the running jobs of the partitions whose nodes all belong to SPOT pools of the
emulated clusters (``spot`` on the real Slurm that ``start.sh`` sets up).

``slurmrestd_preemption`` picks the mechanism:

* ``partition`` (default): a job on the highest-tier other partition that needs every CPU of the
  Spot job's first node for 15 s is submitted through slurmrestd; ``preempt/partition_prio`` with
  ``PreemptMode=REQUEUE`` then signals (SIGCONT+SIGTERM, SIGKILL after KillWait) and requeues the
  Spot job, as Spot capacity being taken back would.
* ``requeue``: ``scontrol requeue JOBID`` (``scontrol`` from ``PATH``; ``SLURM_CONF`` as the
  real Slurm's ``env.sh`` sets it): the same signals and requeue, without a second job.
* ``node_down``: the Spot job's first node set DOWN through slurmrestd (``POST
  /slurm/v0.0.42/node/{name}``), as when its VM is lost: Slurm requeues the job at once and the
  node, whose slurmd is still there, registers again about 3 s later (``ReturnToService=2``).

Each preemption is recorded like the emulated ones (``kind`` = ``partition_prio`` or
``requeue``), in ``{state_dir}/slurm/real-slurm/preemptions.jsonl``, so reports and tests read
one timeline.
"""

from __future__ import annotations

import json
import logging
import pathlib
import subprocess
import time
from typing import Any

from vsp.vertex_emulator import clock
from vsp.vertex_emulator.clusters import api as clusters
from vsp.vertex_emulator.slurm import preemption as slurm_preemption
from vsp.vertex_emulator.slurm import real as real_slurm
from vsp.vertex_emulator.slurm import step_tools
from vsp.vertex_emulator.slurm import topology as slurm_topology

log = logging.getLogger(__name__)

PREEMPTOR_PREFIX = "vsp-preemptor-"
# How long the preempting job holds the node. Its end makes slurmctld schedule at once, so the
# Spot job restarts then if its requeue hold (cred_expire + 1 s) is over, instead of waiting
# for the scheduler's next periodic pass (up to a minute).
PREEMPTOR_HOLD_SECONDS = 15
POLL_SECONDS = 0.5
# The timeline's folder under ``{state_dir}/slurm/`` (one real Slurm serves every cluster).
TIMELINE_DIR = "real-slurm"
_API = "/slurm/v0.0.42"


def _number(value: Any) -> float | None:
    """A v0.0.42 number (plain or ``{"set", "infinite", "number"}``); None when unset."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def spot_partitions(app: Any) -> set[str]:
    """Partitions whose nodes all belong to SPOT pools, over the emulated clusters."""
    found: set[str] = set()
    for _, record in app.store.items(clusters.COLLECTION):
        topo = slurm_topology.from_cluster(record["cluster"])
        for partition in topo.partitions.values():
            if partition.nodes and set(partition.nodes) <= topo.spot_nodes:
                found.add(partition.id)
    return found


class RealPreemptor:
    """The preemption injector of a real Slurm.

    Args:
        slurmrestd: The real slurmrestd.
        mechanism: ``partition`` or ``requeue`` (see the module docstring).
    """

    def __init__(self, slurmrestd: real_slurm.RealSlurmrestd, mechanism: str = "partition"):
        if mechanism not in real_slurm.PREEMPTION_MECHANISMS:
            raise ValueError(
                f"slurmrestd_preemption: one of {real_slurm.PREEMPTION_MECHANISMS}, "
                f"not {mechanism!r}"
            )
        self.slurmrestd = slurmrestd
        self.mechanism = mechanism
        self.events: list[dict[str, Any]] = []
        self._fired: set[tuple[int, int]] = set()
        self._last_poll = 0.0

    def _delay(self, settings: Any) -> float | None:
        """Seconds into a run of the next planned preemption; None when none is planned."""
        done = len(self.events)
        if done >= settings.slurm_spot_preempt_max_count:
            return None
        if settings.slurm_spot_preempt_after_seconds > 0:
            return settings.slurm_spot_preempt_after_seconds
        if settings.slurm_spot_preempt_mean_seconds > 0:
            mean = settings.slurm_spot_preempt_mean_seconds
            return slurm_preemption.poisson_delays(
                settings.slurm_spot_preempt_seed, mean, done + 1
            )[done]
        return None

    def tick(self, app: Any, now: float) -> None:
        """Preempts the Spot job runs that reached the planned delay (polls every 0.5 s)."""
        delay = self._delay(app.settings)
        if delay is None or time.monotonic() - self._last_poll < POLL_SECONDS:
            return
        self._last_poll = time.monotonic()
        spot = spot_partitions(app)
        try:
            jobs = self.slurmrestd.get_json(f"{_API}/jobs").get("jobs") or []
        except real_slurm.SlurmrestdUnavailable as exc:
            log.warning("preemption injector: %s", exc)
            return
        for job in jobs:
            state = set(job.get("job_state") or [])
            started = _number(job.get("start_time"))
            if (
                state != {"RUNNING"}
                or job.get("partition") not in spot
                or str(job.get("name", "")).startswith(PREEMPTOR_PREFIX)
                or started is None
                or time.time() - started < delay
                or (int(job["job_id"]), int(job.get("restart_cnt") or 0)) in self._fired
            ):
                continue
            self.preempt(app, job, now)
            return  # one per poll: the next delay may differ

    def preempt(self, app: Any, job: dict[str, Any], now: float) -> dict[str, Any]:
        """Preempts one running job now; records and returns the timeline entry."""
        job_id, restarts = int(job["job_id"]), int(job.get("restart_cnt") or 0)
        self._fired.add((job_id, restarts))
        kind = {"requeue": "requeue", "node_down": "node_down"}.get(
            self.mechanism, "partition_prio"
        )
        if self.mechanism == "requeue":
            detail = self._requeue(job_id)
        elif self.mechanism == "node_down":
            detail = self._node_down(job)
        else:
            detail = self._claim_node(job)
        started = _number(job.get("start_time")) or time.time()
        entry = {
            "time": clock.rfc3339(now),
            "epoch": time.time(),
            "kind": kind,
            "jobId": job_id,
            "jobName": job.get("name", ""),
            "nodes": step_tools.expand_hostlist(str(job.get("nodes", ""))),
            "restartCount": restarts,
            "runSeconds": round(time.time() - started, 3),
            "outcome": "requeued",
            "detail": detail,
        }
        self.events.append(entry)
        path = pathlib.Path(app.state_dir) / "slurm" / TIMELINE_DIR / "preemptions.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
        log.info("preempted real Slurm job %d (%s): %s", job_id, kind, detail)
        return entry

    def _requeue(self, job_id: int) -> str:
        done = subprocess.run(
            ["scontrol", "requeue", str(job_id)], capture_output=True, text=True, timeout=30
        )
        if done.returncode:
            return f"scontrol requeue failed ({done.returncode}): {done.stderr.strip()}"
        return "scontrol requeue"

    def _node_down(self, job: dict[str, Any]) -> str:
        """Sets the first node of ``job`` DOWN."""
        node = str(job.get("nodes", "")).split(",")[0]
        body = {"state": ["DOWN"], "reason": "vsp: Spot VM preempted"}
        status, text = self.slurmrestd.call("POST", f"{_API}/node/{node}", body)
        return f"{node} set DOWN: {status} {text[:200]}"

    def _claim_node(self, job: dict[str, Any]) -> str:
        """Submits a higher-tier job that needs the whole first node of ``job``."""
        # The first node of the job ("vsp-node[0-1]" for a 2-node job): taking it back
        # requeues the whole job, as losing one Spot VM of a multi-node job does.
        node = (step_tools.expand_hostlist(str(job.get("nodes", ""))) or [""])[0]
        nodes = self.slurmrestd.get_json(f"{_API}/node/{node}").get("nodes") or [{}]
        cpus = int(nodes[0].get("cpus") or 1)
        partitions = self.slurmrestd.get_json(f"{_API}/partitions").get("partitions") or []
        others = [p for p in partitions if p.get("name") != job.get("partition")]
        if not others:
            return "no other partition to preempt from"
        high = max(others, key=lambda p: int((p.get("priority") or {}).get("tier") or 0))
        body = {
            "job": {
                "name": f"{PREEMPTOR_PREFIX}{job['job_id']}",
                "partition": high["name"],
                "required_nodes": [node],
                "tasks": 1,
                "cpus_per_task": cpus,
                "current_working_directory": "/tmp",
                "environment": ["PATH=/usr/bin:/bin"],
                "script": f"#!/bin/bash\nsleep {PREEMPTOR_HOLD_SECONDS}\n",
            }
        }
        status, text = self.slurmrestd.call("POST", f"{_API}/job/submit", body)
        return f"{high['name']} job on {node} ({cpus} CPUs): {status} {text[:200]}"
