"""One cluster's emulated Slurm, loaded for a read-modify-write step (a tick or a request).

The runtime loads a ``ClusterContext`` under the store lock, the scheduler and job lifecycle
mutate its ``state`` and ``jobs`` in place, and the runtime saves what changed. Files live under
``{state_dir}/slurm/{cluster_id}/``: ``home/`` (the emulated shared home; its files are in
``disk/`` when the cluster has its own filesystem, see ``cluster_filesystem``), ``spool/job{N}/``
(scripts and prolog/epilog logs) and ``preemptions.jsonl`` (the preemption timeline).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pathlib
from typing import Any

from vsp.vertex_emulator import clock
from vsp.vertex_emulator.slurm import filesystem as cluster_filesystem
from vsp.vertex_emulator.slurm import process as slurm_process
from vsp.vertex_emulator.slurm import topology as slurm_topology

STATE_COLLECTION = "slurm_clusters"
JOB_COLLECTION = "slurm_jobs"
PREEMPTIONS_FILENAME = "preemptions.jsonl"
ACTIVE_PHASES = ("prolog", "script", "epilog")


def job_key(cluster_name: str, job_id: int) -> str:
    """Store key of a job record."""
    return f"{cluster_name}#{job_id}"


def cluster_dir(state_dir: pathlib.Path, cluster_id: str) -> pathlib.Path:
    """``{state_dir}/slurm/{cluster_id}``."""
    return pathlib.Path(state_dir) / "slurm" / cluster_id


def new_state(cluster: dict[str, Any]) -> dict[str, Any]:
    """A fresh Slurm state document for a cluster."""
    return {
        "cluster": cluster["name"],
        "generation": cluster.get("createTime", ""),
        "next_job_id": 1,
        "nodes": {},
        "accounting": None,
        "plan": None,
        "plan_fired": 0,
        "plan_runs": 0,
    }


@dataclasses.dataclass
class ClusterContext:
    """A cluster's Slurm state for one step.

    Attributes:
        app: The ``EmulatorApp``.
        cluster: The cluster's public JSON.
        topo: Its topology.
        state: The Slurm state document (nodes, accounting, preemption plan, job ids).
        jobs: Job records by id.
        now: The step's time.
        procs: The emulator's process table.
        events: Preemption timeline entries to append when saved.
        persisted: Whether ``state`` is already in the store (False for a new cluster state).
        isolated: The cluster's home is visible to its jobs only (``cluster_filesystem``).
    """

    app: Any
    cluster: dict[str, Any]
    topo: slurm_topology.Topology
    state: dict[str, Any]
    jobs: dict[int, dict[str, Any]]
    now: float
    procs: slurm_process.ProcessTable
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    persisted: bool = True
    isolated: bool = False
    _original: dict[str, Any] = dataclasses.field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._original = {
            "state": copy.deepcopy(self.state),
            "jobs": {k: copy.deepcopy(v) for k, v in self.jobs.items()},
        }

    @property
    def settings(self) -> Any:
        """The app's settings."""
        return self.app.settings

    @property
    def name(self) -> str:
        """The cluster resource name."""
        return self.topo.name

    @property
    def directory(self) -> pathlib.Path:
        """``{state_dir}/slurm/{cluster_id}``."""
        return cluster_dir(self.app.state_dir, self.topo.cluster_id)

    @property
    def filesystem(self) -> cluster_filesystem.ClusterFilesystem:
        """The cluster's own filesystem (its home, and where the files really are)."""
        return cluster_filesystem.ClusterFilesystem.for_cluster(self.directory, self.isolated)

    @property
    def home(self) -> str:
        """The emulated shared home directory (HOME and the default working directory)."""
        return self.filesystem.home

    def scaled(self, seconds: float) -> float:
        """Wall-clock seconds of an emulated duration."""
        return self.settings.scaled(seconds)

    def key(self, job: dict[str, Any]) -> tuple[str, int]:
        """Process-table key of a job."""
        return (self.name, int(job["job_id"]))

    def spool(self, job: dict[str, Any]) -> pathlib.Path:
        """The job's spool directory (scripts, prolog/epilog logs)."""
        return self.directory / "spool" / f"job{job['job_id']}"

    def allocated(self) -> set[str]:
        """Nodes held by some job."""
        return {n for job in self.jobs.values() for n in job.get("alloc") or []}

    def unavailable(self) -> set[str]:
        """Nodes that are DOWN or DRAIN."""
        return set(self.state["nodes"])

    def node_state(self, node: str) -> tuple[str, str]:
        """(state, reason) of a node: IDLE, ALLOCATED, DOWN or DRAIN."""
        entry = self.state["nodes"].get(node)
        if entry is not None:
            return entry["state"], entry.get("reason", "")
        return ("ALLOCATED" if node in self.allocated() else "IDLE"), ""

    def take_down(
        self, nodes: list[str], state: str, reason: str, *, until: float | None = -1.0
    ) -> None:
        """Marks nodes DOWN/DRAIN until ``until`` (epoch seconds; None: until resumed; the
        default: ``slurm_node_recovery_seconds`` from now)."""
        up_at = until
        if up_at is not None and up_at < 0:
            up_at = self.now + self.scaled(self.settings.slurm_node_recovery_seconds)
        for node in nodes:
            self.state["nodes"][node] = {
                "state": state,
                "reason": reason,
                "since": self.now,
                "up_at": up_at,
            }

    def recover_nodes(self) -> None:
        """Returns nodes whose recovery time has passed."""
        for node, entry in list(self.state["nodes"].items()):
            if entry.get("up_at") is not None and entry["up_at"] <= self.now:
                del self.state["nodes"][node]

    def record_event(self, job: dict[str, Any], kind: str, outcome: str, nodes: list[str]) -> None:
        """Adds a preemption/node-failure entry to the timeline."""
        start = job.get("start_time")
        self.events.append(
            {
                "time": clock.rfc3339(self.now),
                "epoch": self.now,
                "cluster": self.name,
                "clusterId": self.topo.cluster_id,
                "kind": kind,
                "jobId": job["job_id"],
                "jobName": job.get("name") or "",
                "nodes": list(nodes),
                "restartCount": int(job.get("restart_cnt", 0)),
                "runSeconds": round(self.now - start, 3) if start else 0.0,
                "outcome": outcome,
            }
        )

    def save(self) -> None:
        """Writes the changed documents to the store and appends timeline entries."""
        store = self.app.store
        if not self.persisted or self.state != self._original["state"]:
            store.put(STATE_COLLECTION, self.name, self.state)
            self.persisted = True
        for job_id, job in self.jobs.items():
            if job != self._original["jobs"].get(job_id):
                store.put(JOB_COLLECTION, job_key(self.name, job_id), job)
        self.__post_init__()
        if self.events:
            path = self.directory / PREEMPTIONS_FILENAME
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as handle:
                for event in self.events:
                    handle.write(json.dumps(event) + "\n")
            self.events = []


def read_events(state_dir: pathlib.Path, cluster_id: str | None = None) -> list[dict[str, Any]]:
    """Timeline entries of one cluster (or of all), oldest first."""
    root = pathlib.Path(state_dir) / "slurm"
    paths = [root / cluster_id / PREEMPTIONS_FILENAME] if cluster_id else root.glob("*/*.jsonl")
    events: list[dict[str, Any]] = []
    for path in paths:
        if path.name != PREEMPTIONS_FILENAME or not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return sorted(events, key=lambda e: e.get("epoch", 0))
