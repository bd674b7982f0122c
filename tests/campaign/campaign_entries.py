"""The runtime entry points the fault campaign drives, their calls and their invariants.

Each ``Entry`` prepares the plan's resources (fresh ids per plan), runs the real entry point
and checks invariants from the emulator's state once the faults are cleared and every held
request has landed: the stored clusters (in any state), the registry's versions and aliases and
the Slurm job queue (cancelled jobs included), not the code's return values alone. Jobs of
another run share the clusters (the batch's Slurm cluster always; a torn-down cluster when the
plan says ``foreign``): they must be left running, never counted, adopted or cancelled, and a
cluster they run on is kept, with an expiry. ``check`` returns ``(invariant, ok, detail)``
triples; ``after_kill`` checks what a killed step left behind before its re-run, and
``no_blind_resend`` the order of a plan's requests.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from collections.abc import Callable
from typing import Any

import requests

from tests.campaign import campaign_world as cw
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import gcp_labels, gcp_resources
from vsp.components.runtime.registry import client as model_registry
from vsp.components.runtime.steps import create_cluster, delete_cluster
from vsp.components.runtime.teardown import exit_task
from vsp.components.runtime.training.backends import slurm
from vsp.components.runtime.training.recovery import Target

CLUSTERS = r"/v1beta1/projects/[^/]+/locations/[^/]+/modelDevelopmentClusters"
OPERATIONS = r"/v1beta1/projects/[^/]+/locations/[^/]+/operations/"
MODELS = r"/v1/projects/[^/]+/locations/[^/]+/models"
SLURM = "callSlurmRestApi"
SPOT = Target("spot", spot=True)
# How long registration keeps looking for a late version after an upload of unknown outcome:
# longer than a ``timeout`` fault holds the upload.
REGISTER_SETTLE = {"settle_seconds": 2.0}

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


def _cluster_calls(cluster: str) -> dict[str, tuple[str, str, str | None]]:
    return {
        "create": ("POST", f"{CLUSTERS}$", None),
        "get": ("GET", f"{CLUSTERS}/{cluster}$", None),
        "operation": ("GET", OPERATIONS, None),
        "patch": ("PATCH", f"{CLUSTERS}/{cluster}$", None),
        "delete": ("DELETE", f"{CLUSTERS}/{cluster}$", None),
        "slurm": ("POST", f"{CLUSTERS}/{cluster}:{SLURM}$", None),
    }


def _expiry_ok(world: cw.World, ctx: Ctx) -> Check:
    """A cluster left behind, in any state (ERROR and PROVISIONING cost too), has an expiry."""
    cluster = world.cluster(ctx.cluster_id)
    if cluster is None:
        return ("no_cluster_left_without_expiry", True, "absent")
    state = cluster_resource.cluster_state(cluster)
    labels = cluster.get("labels") or {}
    ok = gcp_labels.EXPIRES_AT in labels
    return ("no_cluster_left_without_expiry", ok, f"{state} labels={labels}")


def _job_active(world: cw.World, cluster_id: str, job_id: int | None) -> tuple[bool, str]:
    """Whether a job is still active (neither finished nor cancelled), and its state."""
    if job_id is None:
        return False, "no job"
    try:
        job = world.slurm_client(cluster_id).get_job(job_id)
    except Exception as exc:  # noqa: BLE001 - a gone cluster or job is the answer
        return False, f"{type(exc).__name__}: {exc}"
    return not job.is_terminal and job.base_state != "CANCELLED", job.base_state


def _foreign_checks(world: cw.World, ctx: Ctx, deleting: bool = True) -> list[Check]:
    """Another run's job on the torn-down cluster: the cluster stays, and so does the job
    (``deleting``: the run asked for a deletion, which the job turns into an in-use keep)."""
    if not ctx.foreign:
        return []
    active, state = _job_active(world, ctx.cluster_id, ctx.foreign_job)
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


def _recorded_before_polling(world: cw.World, ctx: Ctx, seen: list[cw.Seen]) -> list[Check]:
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


def _settle(world: cw.World, ctx: Ctx, seconds: float = 3.0) -> None:
    """Waits for a cluster's pending operation (e.g. a DELETE) to end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = cluster_resource.cluster_state(world.cluster(ctx.cluster_id) or {})
        if state not in ("PROVISIONING", "UPDATING", "STOPPING"):
            return
        time.sleep(0.02)


def finalize_after(world: cw.World, ctx: Ctx, state: str = "FAILED") -> Any:
    """The exit task of the plan's run (no faults), composed as ``finalize_cluster`` composes it:
    its delete is ``delete_cluster`` (unless another run's jobs use the cluster)."""
    client = world.client()
    ref = world.ref(ctx.cluster_id)

    def delete() -> bool:
        left = (client.deadline_at or time.monotonic()) - time.monotonic()
        return delete_cluster.delete_cluster(
            project=cw.PROJECT,
            location=cw.LOCATION,
            cluster_id=ctx.cluster_id,
            timeout_seconds=max(left, 0.001),
            options=cw.fast_options(),
            pipeline_run=ctx.run_label,
            client=client,
        )

    return exit_task.finalize(
        client,
        ref,
        state=state,
        failure_keep_minutes=ctx.keep_minutes,
        delete=delete,
        deadline_seconds=6.0,
        backoff=cw.BACKOFF,
    )


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


# ----- cluster create-or-reuse ---------------------------------------------------------------


def _create_prepare(world: cw.World, ctx: Ctx) -> None:
    if ctx.reuse:  # kept warm by an earlier run, with an expiry: this run claims it
        labels = {
            gcp_labels.MANAGED: "true",
            gcp_labels.TEARDOWN: "keep",
            gcp_labels.EXPIRES_AT: "20990101t000000z",
        }
        world.create_running(ctx.cluster_id, cw.cluster_body(), labels)


def _create_run(world: cw.World, ctx: Ctx) -> Any:
    return create_cluster.create_cluster(
        project=cw.PROJECT,
        location=cw.LOCATION,
        cluster_id=ctx.cluster_id,
        cluster_spec=cw.cluster_body(),
        spec_params={},
        timeout_seconds=10.0,
        pipeline_run=ctx.run_label,
        gcp_resources_path=ctx.resources,
        options=cw.fast_options(),
    )


def _create_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
    _settle(world, ctx)  # a held update or create applied late has finished
    found = world.cluster(ctx.cluster_id)
    named = [
        key
        for key, record in world.server.app.store.items("clusters")
        if (record.get("cluster", {}).get("labels") or {}).get(gcp_labels.PIPELINE_RUN)
        == gcp_labels.run_value(ctx.run_label)
    ]
    checks: list[Check] = [("at_most_one_cluster_per_run", len(named) <= 1, str(named))]
    if ok:
        state = cluster_resource.cluster_state(found or {})
        labels = (found or {}).get("labels") or {}
        checks.append(("success_leaves_running_cluster", state == "RUNNING", state))
        if not ctx.reuse:  # teardowns and `vsp clusters list` tell the run's cluster by it
            run = labels.get(gcp_labels.PIPELINE_RUN)
            checks.append(
                ("created_cluster_names_its_run", run == gcp_labels.run_value(ctx.run_label), run)
            )
        checks.append(
            ("claimed_cluster_has_no_expiry", gcp_labels.EXPIRES_AT not in labels, str(labels))
        )
        return checks
    _settle(world, ctx)
    finalize_after(world, ctx, ctx.state)
    _settle(world, ctx)
    return [*checks, _expiry_ok(world, ctx)]


# ----- cluster delete and the exit task ------------------------------------------------------


def _running_prepare(world: cw.World, ctx: Ctx) -> None:
    labels = {
        gcp_labels.MANAGED: "true",
        gcp_labels.PIPELINE_RUN: gcp_labels.run_value(ctx.run_label),
    }
    world.create_running(ctx.cluster_id, cw.cluster_body(), labels)
    if ctx.foreign:
        ctx.foreign_job = world.ensure_foreign_job(ctx.cluster_id)


def _delete_run(world: cw.World, ctx: Ctx) -> Any:
    return delete_cluster.delete_cluster(
        project=cw.PROJECT,
        location=cw.LOCATION,
        cluster_id=ctx.cluster_id,
        timeout_seconds=10.0,
        options=cw.fast_options(),
        pipeline_run=ctx.run_label,
    )


def _delete_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
    _settle(world, ctx)
    if ok and not ctx.foreign:
        return [("delete_leaves_no_cluster", world.cluster(ctx.cluster_id) is None, "")]
    if ok:
        refused = ctx.result is False
        return [("delete_refused_in_use", refused, str(ctx.result)), *_foreign_checks(world, ctx)]
    finalize_after(world, ctx, "CANCELLED")
    _settle(world, ctx)
    return [_expiry_ok(world, ctx), *_foreign_checks(world, ctx)]


def _finalize_run(world: cw.World, ctx: Ctx) -> Any:
    return finalize_after(world, ctx, ctx.state)


def _finalize_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
    _settle(world, ctx)
    checks = [_expiry_ok(world, ctx)]
    deleting = ctx.state == "CANCELLED" or ctx.keep_minutes == 0
    if ok and not ctx.foreign and deleting:
        checks.append(("exit_task_deleted", world.cluster(ctx.cluster_id) is None, ""))
    return [*checks, *_foreign_checks(world, ctx, deleting)]


# ----- model registration --------------------------------------------------------------------


def _model_name(ctx: Ctx) -> str:
    return f"projects/{cw.PROJECT}/locations/{cw.LOCATION}/models/{ctx.model_id}"


def _versions(world: cw.World, ctx: Ctx) -> list[dict[str, Any]]:
    """Every version of the plan's model (read from the emulator, not through the runtime)."""
    url = f"{world.server.base_url}/v1/{_model_name(ctx)}:listVersions"
    response = requests.get(url, params={"pageSize": 1000})
    if response.status_code == 404:
        return []
    response.raise_for_status()
    return response.json().get("models", [])


def _register_prepare(world: cw.World, ctx: Ctx) -> None:
    """A shared model gets a version of another run first; it must survive the plan."""
    if ctx.reuse:
        other = world.next_id("other-")
        parent = f"projects/{cw.PROJECT}/locations/{cw.LOCATION}"
        model = {
            "displayName": "other",
            "artifactUri": "gs://bucket/model",
            "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/serve:1"},
            "labels": {gcp_labels.PIPELINE_RUN: other},
        }
        body: dict[str, Any] = {"model": model}
        if _versions(world, ctx):
            body["parentModel"] = _model_name(ctx)
        else:
            body["modelId"] = ctx.model_id
        url = f"{world.server.base_url}/v1/{parent}/models:upload"
        requests.post(url, json=body).raise_for_status()
    ctx.others = {
        v["versionId"]: (v.get("labels") or {}).get(gcp_labels.PIPELINE_RUN, "")
        for v in _versions(world, ctx)
    }


def _register_run(world: cw.World, ctx: Ctx) -> Any:
    return model_registry.register_model(
        world.client(),
        project=cw.PROJECT,
        location=cw.LOCATION,
        model_id=ctx.model_id,
        display_name="campaign",
        artifact_uri="gs://bucket/model",
        serving_image="us-docker.pkg.dev/p/r/serve:1",
        version_aliases=["candidate"],
        run_label=ctx.run_label,
        gcp_resources_path=ctx.resources,
        retry_delay=0.01,
        poll_backoff=cw.BACKOFF,
        timeout=8.0,
        **REGISTER_SETTLE,
    )


def _register_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
    listed = _versions(world, ctx)
    run_value = gcp_labels.run_value(ctx.run_label)
    mine = [v for v in listed if (v.get("labels") or {}).get(gcp_labels.PIPELINE_RUN) == run_value]
    ids = sorted((v["versionId"] for v in mine), key=int)
    present = {
        v["versionId"]: (v.get("labels") or {}).get(gcp_labels.PIPELINE_RUN, "") for v in listed
    }
    lost = {k: v for k, v in ctx.others.items() if present.get(k) != v}
    checks: list[Check] = [
        ("at_most_one_model_version_per_run", len(ids) <= 1, str(ids)),
        ("other_runs_versions_untouched", not lost, f"gone or changed: {lost}"),
    ]
    if ok:
        same = ids == [ctx.result.version_id]
        checks.append(("returned_version_is_the_runs", same, f"{ids} vs {ctx.result}"))
        holders = [v["versionId"] for v in listed if "candidate" in (v.get("versionAliases") or [])]
        checks.append(
            ("alias_on_the_returned_version", holders == [ctx.result.version_id], str(holders))
        )
    return checks


# ----- Slurm submit --------------------------------------------------------------------------


def _backend(world: cw.World, ctx: Ctx) -> slurm.SlurmBackend:
    work = world.gcs_root / "shared" / ctx.run_key
    training = slurm.SlurmTraining(
        command=[sys.executable, "-c", "import time; time.sleep(20)"],
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
    )
    return slurm.SlurmBackend(world.slurm_client(), training, [SPOT], pipeline_run=ctx.run_label)


def _submit_prepare(world: cw.World, ctx: Ctx) -> None:
    ctx.foreign_job = world.ensure_foreign_job()


def _submit_run(world: cw.World, ctx: Ctx) -> Any:
    """The step's start: re-attach to the run key's job if there is one, else submit."""
    backend = _backend(world, ctx)
    found = backend.find(ctx.run_key)
    return found[-1] if found else backend.submit(ctx.run_key, 0, SPOT)


def _submit_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
    client = world.slurm_client()
    jobs = [j for j in client.list_jobs() if j.name == ctx.run_key]
    # A job being cancelled (CANCELLED while its processes end) is not active.
    live = sorted(str(j.job_id) for j in jobs if not j.is_terminal and j.base_state != "CANCELLED")
    every = sorted(str(j.job_id) for j in jobs)
    active, state = _job_active(world, cw.SLURM_CLUSTER, ctx.foreign_job)
    checks: list[Check] = [
        ("at_most_one_active_job_per_run_key_attempt", len(live) <= 1, str(live)),
        ("at_most_one_job_per_run_key_attempt_cancelled_included", len(every) <= 1, str(every)),
        ("other_runs_job_left_running", active, f"job {ctx.foreign_job}: {state}"),
    ]
    if ok:
        checks.append(("returned_job_is_the_active_one", live == [ctx.result.job_id], str(live)))
    for job_id in sorted(
        str(j.job_id) for j in jobs if not j.is_terminal
    ):  # end the plan's job: its process would outlive the plan
        client.cancel(int(job_id))
    return checks


ENTRIES: dict[str, Entry] = {
    e.name: e
    for e in [
        Entry(
            "cluster_create",
            lambda c: _cluster_calls(c.cluster_id),
            _create_prepare,
            _create_run,
            _create_check,
            lro_calls=("create", "patch"),
            after_kill=_recorded_before_polling,
            unused=("slurm",),
        ),
        Entry(
            "cluster_delete",
            lambda c: _cluster_calls(c.cluster_id),
            _running_prepare,
            _delete_run,
            _delete_check,
            lro_calls=("delete",),
            foreign_jobs=True,
            unused=("create",),
        ),
        Entry(
            "exit_task",
            lambda c: _cluster_calls(c.cluster_id),
            _running_prepare,
            _finalize_run,
            _finalize_check,
            lro_calls=("delete", "patch"),
            foreign_jobs=True,
            unused=("create",),
        ),
        Entry(
            "register_model",
            lambda c: {
                "upload": ("POST", f"{MODELS}:upload$", None),
                "list": ("GET", f"{MODELS}/{c.model_id}:listVersions$", None),
                "operation": ("GET", r"/v1/projects/.*/operations/", None),
                "aliases": ("POST", f"{MODELS}/{c.model_id}.*:mergeVersionAliases$", None),
            },
            _register_prepare,
            _register_run,
            _register_check,
            after_kill=_recorded_before_polling,
        ),
        Entry(
            "slurm_submit",
            lambda c: {
                "submit": ("POST", f"{SLURM}$", r"job\\?/submit"),
                "jobs": ("POST", f"{SLURM}$", r"/jobs"),
            },
            _submit_prepare,
            _submit_run,
            _submit_check,
            restartable=False,
        ),
    ]
}
