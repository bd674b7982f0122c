"""The fault campaign's per-plan context and the invariants its entry points share.

``Ctx`` holds one plan's ids and what its run returned; ``Entry`` describes an entry point (its
calls, set-up, run and checks; the entry points are in ``campaign_entries``). The checks here read
the emulator's state (stored clusters, the Slurm queue) and the plan's requests, never the code's
return values alone: ``no_blind_resend`` the order of the requests, ``recorded_before_polling``
what a killed step left in ``gcp_resources``, ``foreign_checks`` that another run's job and its
cluster were left alone.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from typing import Any

from tests.campaign import campaign_world as cw
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import gcp_labels, gcp_resources

CLUSTERS = r"/v1beta1/projects/[^/]+/locations/[^/]+/modelDevelopmentClusters"
OPERATIONS = r"/v1beta1/projects/[^/]+/locations/[^/]+/operations/"
MODELS = r"/v1/projects/[^/]+/locations/[^/]+/models"
SLURM = "callSlurmRestApi"
Check = tuple[str, bool, str]


@dataclasses.dataclass
class Ctx:
    """One plan's ids and what its run returned."""

    cluster_id: str
    run_label: str
    model_id: str
    run_key: str
    state: str = "FAILED"
    keep_minutes: float = 30.0
    reuse: bool = False
    result: Any = None
    foreign: bool = False
    resources: str = ""
    foreign_job: int | None = None
    others: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Entry:
    """One entry point: its calls, set-up, run and checks."""

    name: str
    calls: Callable[[Ctx], dict[str, tuple[str, str, str | None]]]
    prepare: Callable[[cw.World, Ctx], None]
    run: Callable[[cw.World, Ctx], Any]
    check: Callable[[cw.World, Ctx, bool], list[Check]]
    lro_calls: tuple[str, ...] = ()
    restartable: bool = True
    foreign_jobs: bool = False
    unused: tuple[str, ...] = ()  # calls it never sends: a fault on them could not fire
    after_kill: Callable[[cw.World, Ctx, list[cw.Seen]], list[Check]] = lambda w, c, s: []


def cluster_calls(cluster: str) -> dict[str, tuple[str, str, str | None]]:
    return {
        "create": ("POST", f"{CLUSTERS}$", None),
        "get": ("GET", f"{CLUSTERS}/{cluster}$", None),
        "operation": ("GET", OPERATIONS, None),
        "patch": ("PATCH", f"{CLUSTERS}/{cluster}$", None),
        "delete": ("DELETE", f"{CLUSTERS}/{cluster}$", None),
        "slurm": ("POST", f"{CLUSTERS}/{cluster}:{SLURM}$", None),
    }


def expiry_ok(world: cw.World, ctx: Ctx) -> Check:
    """A cluster left behind, in any state (ERROR and PROVISIONING cost too), has an expiry."""
    cluster = world.cluster(ctx.cluster_id)
    if cluster is None:
        return ("no_cluster_left_without_expiry", True, "absent")
    state = cluster_resource.cluster_state(cluster)
    labels = cluster.get("labels") or {}
    ok = gcp_labels.EXPIRES_AT in labels
    return ("no_cluster_left_without_expiry", ok, f"{state} labels={labels}")


def job_active(world: cw.World, cluster_id: str, job_id: int | None) -> tuple[bool, str]:
    """Whether a job is still active (neither finished nor cancelled), and its state."""
    if job_id is None:
        return False, "no job"
    try:
        job = world.slurm_client(cluster_id).get_job(job_id)
    except Exception as exc:  # noqa: BLE001 - a gone cluster or job is the answer
        return False, f"{type(exc).__name__}: {exc}"
    return not job.is_terminal and job.base_state != "CANCELLED", job.base_state


def foreign_checks(world: cw.World, ctx: Ctx, deleting: bool = True) -> list[Check]:
    """Another run's job on the torn-down cluster: the cluster stays, and so does the job
    (``deleting``: the run asked for a deletion, which the job turns into an in-use keep)."""
    if not ctx.foreign:
        return []
    active, state = job_active(world, ctx.cluster_id, ctx.foreign_job)
    cluster = world.cluster(ctx.cluster_id)
    labels = (cluster or {}).get("labels") or {}
    checks: list[Check] = [
        ("other_runs_job_left_running", active, f"job {ctx.foreign_job}: {state}"),
        ("cluster_in_use_is_kept", cluster is not None, "deleted under another run's job"),
        (
            "cluster_in_use_is_labelled",
            cluster is None or not deleting or labels.get(gcp_labels.TEARDOWN) == "in-use",
            str(labels),
        ),
    ]
    if active:  # end it: its process would outlive the plan
        world.slurm_client(ctx.cluster_id).cancel(int(ctx.foreign_job))
    return checks


def _sends(
    requests_seen: list[cw.Seen], send: Callable[[cw.Seen], bool], look: Callable[[cw.Seen], bool]
) -> list[int]:
    """Numbers of the sends that followed an earlier send with no look-up in between."""
    blind, last_send, looked = [], None, False
    for seen in requests_seen:
        if send(seen):
            if last_send is not None and not looked:
                blind.append(seen.number)
            last_send, looked = seen.number, False
        elif look(seen):
            looked = True
    return blind


def no_blind_resend(requests_seen: list[cw.Seen], ctx: Ctx) -> list[Check]:
    """A create, upload or submit is sent again only after the thing was looked up."""
    cluster_path = f"/modelDevelopmentClusters/{ctx.cluster_id}"
    run_value = gcp_labels.run_value(ctx.run_label)
    kinds = {
        "cluster create": (
            lambda s: (
                s.method == "POST"
                and s.path.endswith("/modelDevelopmentClusters")
                and f"model_development_cluster_id={ctx.cluster_id}" in s.query
            ),
            lambda s: s.method == "GET" and s.path.endswith(cluster_path),
        ),
        "model upload": (
            lambda s: (
                s.method == "POST" and s.path.endswith("models:upload") and run_value in s.body
            ),
            lambda s: s.method == "GET" and s.path.endswith(f"/models/{ctx.model_id}:listVersions"),
        ),
        "Slurm submit": (
            lambda s: (
                s.path.endswith(SLURM)
                and re.search(r"job\\?/submit", s.body) is not None
                and ctx.run_key in s.body
            ),
            lambda s: s.path.endswith(SLURM) and re.search(r"/jobs", s.body) is not None,
        ),
    }
    checks: list[Check] = []
    for what, (send, look) in kinds.items():
        blind = _sends(requests_seen, send, look)
        checks.append(("no_blind_resend", not blind, f"{what} resent unlooked: {blind}"))
    return checks


def recorded_before_polling(world: cw.World, ctx: Ctx, seen: list[cw.Seen]) -> list[Check]:
    """A killed step that was polling the operation of its create (or upload) had recorded it
    in ``gcp_resources`` (the operations of updates, e.g. of a reused cluster, are not
    recorded: the resource is)."""
    creates = [
        s.number
        for s in seen
        if s.method == "POST"
        and (
            f"model_development_cluster_id={ctx.cluster_id}" in s.query
            or s.path.endswith("models:upload")
        )
    ]
    polled = [
        s
        for s in seen
        if creates and s.number > creates[0] and s.method == "GET" and "/operations/" in s.path
    ]
    if not polled:
        return []
    recorded = gcp_resources.find(gcp_resources.read(ctx.resources), gcp_resources.LRO)
    return [
        (
            "operation_recorded_before_polling",
            recorded is not None,
            f"polled {polled[0].path}, recorded {recorded}",
        )
    ]


def settle(world: cw.World, ctx: Ctx, seconds: float = 3.0) -> None:
    """Waits for a cluster's pending operation (e.g. a DELETE) to end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = cluster_resource.cluster_state(world.cluster(ctx.cluster_id) or {})
        if state not in ("PROVISIONING", "UPDATING", "STOPPING"):
            return
        time.sleep(0.02)
