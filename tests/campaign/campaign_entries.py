"""The runtime entry points the fault campaign drives, their calls and their invariants.

Each ``Entry`` (``campaign_checks``) prepares the plan's resources (fresh ids per plan), runs the
real entry point and checks invariants from the emulator's state once the faults are cleared and
every held request has landed: the stored clusters (in any state), the registry's versions and
aliases and the Slurm job queue (cancelled jobs included), not the code's return values alone.
Jobs of another run share the clusters (the batch's Slurm cluster always; a torn-down cluster
when the plan says ``foreign``): they must be left running, never counted, adopted or cancelled,
and a cluster they run on is kept, with an expiry. ``check`` returns ``(invariant, ok, detail)``
triples; ``after_kill`` checks what a killed step left behind before its re-run.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import requests

from tests.campaign import campaign_checks as cc
from tests.campaign import campaign_world as cw
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.registry import client as model_registry
from vsp.components.runtime.steps import create_cluster, delete_cluster
from vsp.components.runtime.teardown import exit_task
from vsp.components.runtime.training.backends import slurm
from vsp.components.runtime.training.recovery import Target

SPOT = Target("spot", spot=True)
# How long registration keeps looking for a late version after an upload of unknown outcome:
# longer than a ``timeout`` fault holds the upload.
REGISTER_SETTLE = {"settle_seconds": 2.0}


def finalize_after(world: cw.World, ctx: cc.Ctx, state: str = "FAILED") -> Any:
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


# ----- cluster create-or-reuse ---------------------------------------------------------------


def _create_prepare(world: cw.World, ctx: cc.Ctx) -> None:
    if ctx.reuse:  # kept warm by an earlier run, with an expiry: this run claims it
        labels = {
            gcp_labels.MANAGED: "true",
            gcp_labels.TEARDOWN: "keep",
            gcp_labels.EXPIRES_AT: "20990101t000000z",
        }
        world.create_running(ctx.cluster_id, cw.cluster_body(), labels)


def _create_run(world: cw.World, ctx: cc.Ctx) -> Any:
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


def _create_check(world: cw.World, ctx: cc.Ctx, ok: bool) -> list[cc.Check]:
    cc.settle(world, ctx)  # a held update or create applied late has finished
    found = world.cluster(ctx.cluster_id)
    named = [
        key
        for key, record in world.server.app.store.items("clusters")
        if (record.get("cluster", {}).get("labels") or {}).get(gcp_labels.PIPELINE_RUN)
        == gcp_labels.run_value(ctx.run_label)
    ]
    checks: list[cc.Check] = [("at_most_one_cluster_per_run", len(named) <= 1, str(named))]
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
    cc.settle(world, ctx)
    finalize_after(world, ctx, ctx.state)
    cc.settle(world, ctx)
    return [*checks, cc.expiry_ok(world, ctx)]


# ----- cluster delete and the exit task ------------------------------------------------------


def _running_prepare(world: cw.World, ctx: cc.Ctx) -> None:
    labels = {
        gcp_labels.MANAGED: "true",
        gcp_labels.PIPELINE_RUN: gcp_labels.run_value(ctx.run_label),
    }
    world.create_running(ctx.cluster_id, cw.cluster_body(), labels)
    if ctx.foreign:
        ctx.foreign_job = world.ensure_foreign_job(ctx.cluster_id)


def _delete_run(world: cw.World, ctx: cc.Ctx) -> Any:
    return delete_cluster.delete_cluster(
        project=cw.PROJECT,
        location=cw.LOCATION,
        cluster_id=ctx.cluster_id,
        timeout_seconds=10.0,
        options=cw.fast_options(),
        pipeline_run=ctx.run_label,
    )


def _delete_check(world: cw.World, ctx: cc.Ctx, ok: bool) -> list[cc.Check]:
    cc.settle(world, ctx)
    if ok and not ctx.foreign:
        return [("delete_leaves_no_cluster", world.cluster(ctx.cluster_id) is None, "")]
    if ok:
        refused = ctx.result is False
        return [("delete_refused_in_use", refused, str(ctx.result)), *cc.foreign_checks(world, ctx)]
    finalize_after(world, ctx, "CANCELLED")
    cc.settle(world, ctx)
    return [cc.expiry_ok(world, ctx), *cc.foreign_checks(world, ctx)]


def _finalize_run(world: cw.World, ctx: cc.Ctx) -> Any:
    return finalize_after(world, ctx, ctx.state)


def _finalize_check(world: cw.World, ctx: cc.Ctx, ok: bool) -> list[cc.Check]:
    cc.settle(world, ctx)
    checks = [cc.expiry_ok(world, ctx)]
    deleting = ctx.state == "CANCELLED" or ctx.keep_minutes == 0
    if ok and not ctx.foreign and deleting:
        checks.append(("exit_task_deleted", world.cluster(ctx.cluster_id) is None, ""))
    return [*checks, *cc.foreign_checks(world, ctx, deleting)]


# ----- model registration --------------------------------------------------------------------


def _model_name(ctx: cc.Ctx) -> str:
    return f"projects/{cw.PROJECT}/locations/{cw.LOCATION}/models/{ctx.model_id}"


def _versions(world: cw.World, ctx: cc.Ctx) -> list[dict[str, Any]]:
    """Every version of the plan's model (read from the emulator, not through the runtime)."""
    url = f"{world.server.base_url}/v1/{_model_name(ctx)}:listVersions"
    response = requests.get(url, params={"pageSize": 1000})
    if response.status_code == 404:
        return []
    response.raise_for_status()
    return response.json().get("models", [])


def _register_prepare(world: cw.World, ctx: cc.Ctx) -> None:
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


def _register_run(world: cw.World, ctx: cc.Ctx) -> Any:
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


def _register_check(world: cw.World, ctx: cc.Ctx, ok: bool) -> list[cc.Check]:
    listed = _versions(world, ctx)
    run_value = gcp_labels.run_value(ctx.run_label)
    mine = [v for v in listed if (v.get("labels") or {}).get(gcp_labels.PIPELINE_RUN) == run_value]
    ids = sorted((v["versionId"] for v in mine), key=int)
    present = {
        v["versionId"]: (v.get("labels") or {}).get(gcp_labels.PIPELINE_RUN, "") for v in listed
    }
    lost = {k: v for k, v in ctx.others.items() if present.get(k) != v}
    checks: list[cc.Check] = [
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


def _backend(world: cw.World, ctx: cc.Ctx) -> slurm.SlurmBackend:
    work = world.gcs_root / "shared" / ctx.run_key
    training = slurm.SlurmTraining(
        command=[sys.executable, "-c", "import time; time.sleep(20)"],
        working_directory=str(work),
        checkpoint_dir=str(work / "ckpt"),
        model_dir=str(work / "model"),
    )
    return slurm.SlurmBackend(world.slurm_client(), training, [SPOT], pipeline_run=ctx.run_label)


def _submit_prepare(world: cw.World, ctx: cc.Ctx) -> None:
    ctx.foreign_job = world.ensure_foreign_job()


def _submit_run(world: cw.World, ctx: cc.Ctx) -> Any:
    """The step's start: re-attach to the run key's job if there is one, else submit."""
    backend = _backend(world, ctx)
    found = backend.find(ctx.run_key)
    return found[-1] if found else backend.submit(ctx.run_key, 0, SPOT)


def _submit_check(world: cw.World, ctx: cc.Ctx, ok: bool) -> list[cc.Check]:
    client = world.slurm_client()
    jobs = [j for j in client.list_jobs() if j.name == ctx.run_key]
    # A job being cancelled (CANCELLED while its processes end) is not active.
    live = sorted(str(j.job_id) for j in jobs if not j.is_terminal and j.base_state != "CANCELLED")
    every = sorted(str(j.job_id) for j in jobs)
    active, state = cc.job_active(world, cw.SLURM_CLUSTER, ctx.foreign_job)
    checks: list[cc.Check] = [
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


ENTRIES: dict[str, cc.Entry] = {
    e.name: e
    for e in [
        cc.Entry(
            "cluster_create",
            lambda c: cc.cluster_calls(c.cluster_id),
            _create_prepare,
            _create_run,
            _create_check,
            lro_calls=("create", "patch"),
            after_kill=cc.recorded_before_polling,
            unused=("slurm",),
        ),
        cc.Entry(
            "cluster_delete",
            lambda c: cc.cluster_calls(c.cluster_id),
            _running_prepare,
            _delete_run,
            _delete_check,
            lro_calls=("delete",),
            foreign_jobs=True,
            unused=("create",),
        ),
        cc.Entry(
            "exit_task",
            lambda c: cc.cluster_calls(c.cluster_id),
            _running_prepare,
            _finalize_run,
            _finalize_check,
            lro_calls=("delete", "patch"),
            foreign_jobs=True,
            unused=("create",),
        ),
        cc.Entry(
            "register_model",
            lambda c: {
                "upload": ("POST", f"{cc.MODELS}:upload$", None),
                "list": ("GET", f"{cc.MODELS}/{c.model_id}:listVersions$", None),
                "operation": ("GET", r"/v1/projects/.*/operations/", None),
                "aliases": ("POST", f"{cc.MODELS}/{c.model_id}.*:mergeVersionAliases$", None),
            },
            _register_prepare,
            _register_run,
            _register_check,
            after_kill=cc.recorded_before_polling,
        ),
        cc.Entry(
            "slurm_submit",
            lambda c: {
                "submit": ("POST", f"{cc.SLURM}$", r"job\\?/submit"),
                "jobs": ("POST", f"{cc.SLURM}$", r"/jobs"),
            },
            _submit_prepare,
            _submit_run,
            _submit_check,
            restartable=False,
        ),
    ]
}
