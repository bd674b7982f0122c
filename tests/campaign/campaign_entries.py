"""The runtime entry points the fault campaign drives, their calls and their invariants.

Each ``Entry`` prepares the plan's resources (fresh ids per plan), runs the real entry point
and checks invariants from the emulator's state once the faults are cleared: the stored
clusters, the registry's versions and the Slurm job queue, not the code's return values alone.
``check`` returns ``(invariant, ok, detail)`` triples.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from typing import Any

from tests.campaign import campaign_world as cw
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.registry import client as model_registry
from vsp.components.runtime.registry import versions
from vsp.components.runtime.steps import create_cluster, delete_cluster
from vsp.components.runtime.teardown import exit_task
from vsp.components.runtime.training.backends import slurm
from vsp.components.runtime.training.recovery import Target

CLUSTERS = r"/v1beta1/projects/[^/]+/locations/[^/]+/modelDevelopmentClusters"
OPERATIONS = r"/v1beta1/projects/[^/]+/locations/[^/]+/operations/"
MODELS = r"/v1/projects/[^/]+/locations/[^/]+/models"
SLURM = "callSlurmRestApi"
SPOT = Target("spot", spot=True)

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
    cluster = world.cluster(ctx.cluster_id)
    if cluster is None:
        return ("no_running_cluster_without_expiry", True, "absent")
    state = cluster_resource.cluster_state(cluster)
    labels = cluster.get("labels") or {}
    ok = state != "RUNNING" or gcp_labels.EXPIRES_AT in labels
    return ("no_running_cluster_without_expiry", ok, f"{state} labels={labels}")


def _settle(world: cw.World, ctx: Ctx, seconds: float = 3.0) -> None:
    """Waits for a cluster's pending operation (e.g. a DELETE) to end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = cluster_resource.cluster_state(world.cluster(ctx.cluster_id) or {})
        if state not in ("PROVISIONING", "UPDATING", "STOPPING"):
            return
        time.sleep(0.02)


def finalize_after(world: cw.World, ctx: Ctx, state: str = "FAILED") -> Any:
    """The exit task of the plan's run (no faults), as the pipeline runs it after the step."""
    client = world.client()
    ref = world.ref(ctx.cluster_id)
    resource = cluster_resource.ClusterResource(client, ref, options=cw.fast_options())
    return exit_task.finalize(
        client,
        ref,
        state=state,
        failure_keep_minutes=ctx.keep_minutes,
        delete=resource.delete,
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
        options=cw.fast_options(),
    )


def _create_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
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
    if ok:
        return [("delete_leaves_no_cluster", world.cluster(ctx.cluster_id) is None, "")]
    finalize_after(world, ctx, "CANCELLED")
    _settle(world, ctx)
    return [_expiry_ok(world, ctx)]


def _finalize_run(world: cw.World, ctx: Ctx) -> Any:
    return finalize_after(world, ctx, ctx.state)


def _finalize_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
    _settle(world, ctx)
    checks = [_expiry_ok(world, ctx)]
    if ok and (ctx.state == "CANCELLED" or ctx.keep_minutes == 0):
        checks.append(("exit_task_deleted", world.cluster(ctx.cluster_id) is None, ""))
    return checks


# ----- model registration --------------------------------------------------------------------


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
        retry_delay=0.01,
        poll_backoff=cw.BACKOFF,
        timeout=8.0,
    )


def _register_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
    name = f"projects/{cw.PROJECT}/locations/{cw.LOCATION}/models/{ctx.model_id}"
    _, mine = versions.run_versions(world.client(), name, gcp_labels.run_value(ctx.run_label))
    ids = [v["versionId"] for v in mine]
    checks: list[Check] = [("at_most_one_model_version_per_run", len(ids) <= 1, str(ids))]
    if ok:
        same = ids == [ctx.result.version_id]
        checks.append(("returned_version_is_the_runs", same, f"{ids} vs {ctx.result}"))
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


def _submit_run(world: cw.World, ctx: Ctx) -> Any:
    return _backend(world, ctx).submit(ctx.run_key, 0, SPOT)


def _submit_check(world: cw.World, ctx: Ctx, ok: bool) -> list[Check]:
    client = world.slurm_client()
    jobs = client.find_jobs(ctx.run_key)
    # A job being cancelled (CANCELLED while its processes end) is not active.
    live = sorted(str(j.job_id) for j in jobs if not j.is_terminal and j.base_state != "CANCELLED")
    kept = sorted(str(j.job_id) for j in jobs if j.base_state != "CANCELLED")
    checks: list[Check] = [
        ("at_most_one_active_job_per_run_key_attempt", len(live) <= 1, str(live)),
        ("at_most_one_uncancelled_job_per_run_key_attempt", len(kept) <= 1, str(kept)),
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
        ),
        Entry(
            "cluster_delete",
            lambda c: _cluster_calls(c.cluster_id),
            _running_prepare,
            _delete_run,
            _delete_check,
            lro_calls=("delete",),
        ),
        Entry(
            "exit_task",
            lambda c: _cluster_calls(c.cluster_id),
            _running_prepare,
            _finalize_run,
            _finalize_check,
            lro_calls=("delete", "patch"),
        ),
        Entry(
            "register_model",
            lambda c: {
                "upload": ("POST", f"{MODELS}:upload$", None),
                "list": ("GET", f"{MODELS}/{c.model_id}:listVersions$", None),
                "operation": ("GET", r"/v1/projects/.*/operations/", None),
                "aliases": ("POST", f"{MODELS}/{c.model_id}.*:mergeVersionAliases$", None),
            },
            lambda w, c: None,
            _register_run,
            _register_check,
        ),
        Entry(
            "slurm_submit",
            lambda c: {
                "submit": ("POST", f"{SLURM}$", r"job\\?/submit"),
                "jobs": ("POST", f"{SLURM}$", r"/jobs"),
            },
            lambda w, c: None,
            _submit_run,
            _submit_check,
            restartable=False,
        ),
    ]
}
