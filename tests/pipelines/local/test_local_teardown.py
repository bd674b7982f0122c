"""The whole slurm-spot-training graph through kfp.local: register, keep warm or delete, reap."""

from __future__ import annotations

import json
import pathlib
import time

import croniter
import pytest

from tests import cron_times
from tests.pipelines.local import run_arguments
from vsp import vertex_emulator
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import readable_time, rest
from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import run, summary

SHORT_TRAINING = ["--steps", "20", "--seed", "7", "--step-seconds", "0.05"]
CLUSTERS = "/modelDevelopmentClusters/vsplocal"


def _run(tmp_path, monkeypatch, pipeline="slurm-spot-training", preemptions=0, **overrides):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = catalog.local_arguments(pipeline, str(tmp_path / "shared"))
    if "command" in arguments:
        arguments["command"] = [*arguments["command"][:3], *SHORT_TRAINING]
    if pipeline == "slurm-spot-training":
        arguments = run_arguments.with_overrides(arguments, **overrides)
    else:
        arguments.update(overrides)
    return run.run_local(
        pipeline,
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=run.local_settings(0.3, preemptions=preemptions, preempt_after=0.6),
        in_process=True,
    )


def _gap(cron, at):
    """Seconds from ``at`` to the next time ``cron`` fires (UTC)."""
    return croniter.croniter(cron, at).get_next(float) - at


def _writes(result):
    return [
        (e["method"], e["path"].rsplit("/", 1)[-1])
        for e in result.journal
        if e["method"] in ("POST", "PATCH", "DELETE")
        and not e["path"].endswith((":callSlurmRestApi", ":wait"))
    ]


# A created cluster carries its run's claim from the create request (no update of its own);
# a training step claims it again as it ends.
CREATED = [("POST", "modelDevelopmentClusters")]
TRAINED = [("PATCH", "vsplocal")]


def _patch_labels(result):
    return [e["body"]["labels"] for e in result.journal if e["method"] == "PATCH"]


@pytest.mark.slow
def test_hourly_cron_keeps_the_cluster_and_the_next_weekly_run_reuses_then_deletes_it(
    tmp_path, monkeypatch
):
    # Explicit prices (they win over the price table): a cheap cluster is worth keeping hourly.
    cheap = {"idle_price_per_hour": 1.0, "provisioning_price_per_hour": 1.0}
    first = _run(tmp_path, monkeypatch, preemptions=1, schedule_cron="0 * * * *", **cheap)
    assert first.succeeded, first.error
    assert _writes(first) == [*CREATED, *TRAINED, ("POST", "models:upload"), ("PATCH", "vsplocal")]
    *_claims, kept = _patch_labels(first)
    assert kept["vsp-teardown"] == "keep" and kept["vsp-expires-at"]
    assert first.parameters["decide-teardown"]["action"] == "keep"
    assert first.parameters["register-model"]["model_resource_name"].endswith(
        "/models/slurm-spot-example@1"
    )
    train = json.loads(pathlib.Path(first.outputs["train-on-cluster/metrics"]).read_text())
    assert train["preemptions"] == 1

    # Scaling back up as long as re-creating: shrinking never beats deleting, whatever the day.
    weekly = cron_times.weekly_cron_days_away(3.5)
    started = time.time()
    second = _run(tmp_path, monkeypatch, schedule_cron=weekly, scale_up_minutes=20.0)
    ended = time.time()
    assert second.succeeded, second.error
    # No create: the warm cluster is reused, its expiry cleared, then deleted by the decision.
    assert _writes(second) == [
        ("PATCH", "vsplocal"),
        *TRAINED,
        ("POST", "models:upload"),
        ("DELETE", "vsplocal"),
    ]
    claimed, _renewed = _patch_labels(second)
    assert "vsp-expires-at" not in claimed and "vsp-teardown" not in claimed
    assert second.parameters["create-cluster"]["reused"] is True
    upload = next(e for e in second.journal if e["path"].endswith("models:upload"))
    assert upload["body"]["parentModel"].endswith("/models/slurm-spot-example")
    assert second.parameters["register-model"]["version_id"] == "2"
    assert second.parameters["decide-teardown"]["action"] == "delete"
    assert [e["status"] for e in second.journal if e["path"].endswith(CLUSTERS)][-1] == 404

    facts = dict(summary.facts(second))
    assert facts["cluster"].startswith("reused (warm)")
    assert facts["model version"].endswith("slurm-spot-example@2")
    # The gap to next Monday 03:00 depends on when the test runs: it is measured from the
    # decision's own clock, somewhere between the run's start and end.
    decided = json.loads(pathlib.Path(second.outputs["decide-teardown/metrics"]).read_text())
    idle = decided["teardown_idle_seconds"]
    assert _gap(weekly, ended) <= idle <= _gap(weekly, started)
    assert facts["teardown"] == (
        f"delete: deleting is cheaper (next run in {readable_time.duration(idle)})"
    )
    assert facts["teardown costs"].endswith("; idle 159.67 USD/h")
    # No price given: the cluster's pools priced from the table (login n2-standard-8, 2 Spot
    # and 1 on-demand a3-highgpu-8g, fixed-size pools).
    reason = second.parameters["decide-teardown"]["reason"]
    assert reason.startswith("Delete the cluster: deleting is cheaper")
    assert "Idle cost 159.67 USD/h" in reason and "price table" in reason
    decided = json.loads(pathlib.Path(second.outputs["decide-teardown/metrics"]).read_text())
    assert decided["teardown_input_idle_price_per_hour"] == pytest.approx(159.669972)
    page = pathlib.Path(summary.write_report(second)).read_text()
    assert "Teardown: keep the cluster warm, shrink it or delete it" in page
    assert 'aria-label="timeline"' in page and 'aria-label="teardown costs"' in page


@pytest.mark.slow
def test_hourly_cron_at_table_prices_shrinks_and_the_next_run_scales_the_pools_back_up(
    tmp_path, monkeypatch
):
    # No price given: keeping costs 159.67/h, a shrunk cluster 0.39/h (its login node).
    # An hourly interval, not a cron: the idle time must not depend on the minute of the hour
    # (a cron tick under 11 minutes away makes keeping cheaper).
    first = _run(tmp_path, monkeypatch, interval_hours=1.0)
    assert first.succeeded, first.error
    assert first.parameters["decide-teardown"]["action"] == "shrink"
    assert _writes(first) == [
        *CREATED,
        *TRAINED,
        ("POST", "models:upload"),
        ("PATCH", "vsplocal"),
        ("PATCH", "vsplocal"),
    ]
    patches = [e for e in first.journal if e["method"] == "PATCH"][1:]  # after the claim
    assert [p["query"]["updateMask"] for p in patches] == ["labels", "node_pools"]
    assert patches[0]["body"]["labels"]["vsp-teardown"] == "shrink"
    # The shrink ends the run's claim in its labels update: no update of its own.
    assert not any(k.startswith("vsp-lease-") for k in patches[0]["body"]["labels"])
    counts = {
        p["id"]: (p["scalingSpec"]["minNodeCount"], p["scalingSpec"]["maxNodeCount"])
        for p in patches[1]["body"]["nodePools"]
    }
    assert counts == {"login": (1, 1), "spot": (0, 0), "ondemand": (0, 0)}
    assert first.parameters["shrink-cluster"] == {"Output": "shrunk"}
    facts = dict(summary.facts(first))
    assert facts["teardown"] == "shrink: shrinking is cheaper (next run in 1 h)"
    assert "shrink " in facts["teardown costs"] and "idle 159.67 USD/h" in facts["teardown costs"]
    reason = first.parameters["decide-teardown"]["reason"]
    assert "Shrunk (compute pools at no nodes): 0.39 USD/h." in reason
    assert facts["gpu pools"] == "shrunk" and facts["shrunk until"].endswith("then reaped")
    decided = json.loads(pathlib.Path(first.outputs["decide-teardown/metrics"]).read_text())
    assert decided["teardown_shrink"] == 1.0
    assert decided["teardown_cost_if_shrunk"] < decided["teardown_cost_if_deleted"]
    assert decided["teardown_cost_if_shrunk"] < decided["teardown_cost_if_kept"]
    page = pathlib.Path(summary.write_report(first)).read_text()
    assert "cost if shrunk (GPU pools at no nodes, then scaled up)" in page

    second = _run(tmp_path, monkeypatch, teardown_policy="delete")
    assert second.succeeded, second.error
    assert _writes(second) == [
        ("PATCH", "vsplocal"),
        ("PATCH", "vsplocal"),
        *TRAINED,
        ("POST", "models:upload"),
        ("DELETE", "vsplocal"),
    ]
    grow, claim, _renewed = [e for e in second.journal if e["method"] == "PATCH"]
    assert grow["query"] == {"updateMask": "node_pools", "updateMode": "USER_AND_SERVICE"}
    assert {p["id"]: p["scalingSpec"]["maxNodeCount"] for p in grow["body"]["nodePools"]} == {
        "login": 1,
        "spot": 2,
        "ondemand": 1,
    }
    assert "vsp-teardown" not in claim["body"]["labels"]
    assert second.parameters["create-cluster"]["action"] == "scaled_up"
    assert dict(summary.facts(second))["cluster"].startswith("reused (shrunk, scaled back up)")


@pytest.mark.slow
def test_failed_training_keeps_the_cluster_for_a_retry_and_the_reaper_deletes_it_later(
    tmp_path, monkeypatch
):
    failing = [catalog.local_python(str(tmp_path / "shared")), "-c", "import sys; sys.exit(3)"]
    failed = _run(tmp_path, monkeypatch, command=failing, failure_keep_minutes=0.02)
    assert not failed.succeeded and "train-on-cluster" in failed.error
    # Nothing registered, no decision; the exit task labelled the cluster for a short retry.
    # No training step ended well, so no claim after the create's.
    assert _writes(failed) == [*CREATED, ("PATCH", "vsplocal")]
    [labels] = _patch_labels(failed)
    assert labels["vsp-teardown"] == "retry"
    assert failed.parameters["finalize-cluster"]["action"] == "kept"
    facts = dict(summary.facts(failed))
    fate = facts["cluster after the run"]
    assert fate.startswith("kept for a retry until ") and "idle at 159.67 USD/h" in fate
    # Its emulator stopped with the run: how to reach the kept cluster from here.
    assert f"`vsp emulator start --state-dir {failed.state_dir}`" in facts["locally"]

    time.sleep(1.5)  # past the 1.2 s retry window
    reaped = _run(tmp_path, monkeypatch, pipeline="reap-expired-clusters")
    assert reaped.succeeded, reaped.error
    assert _writes(reaped) == [("DELETE", "vsplocal")]
    name = "projects/local-project/locations/us-central1/modelDevelopmentClusters/vsplocal"
    assert reaped.parameters["reap-expired-clusters"]["Output"] == [name]
    assert dict(summary.facts(reaped))["clusters reaped"] == name


@pytest.mark.slow
def test_failed_training_with_no_retry_window_deletes_the_cluster(tmp_path, monkeypatch):
    failing = [catalog.local_python(str(tmp_path / "shared")), "-c", "import sys; sys.exit(3)"]
    failed = _run(tmp_path, monkeypatch, command=failing, failure_keep_minutes=0)
    assert not failed.succeeded
    assert _writes(failed) == [*CREATED, ("DELETE", "vsplocal")]
    assert failed.parameters["finalize-cluster"]["action"] == "deleted"
    assert vertex_emulator.read_journal(failed.state_dir)[-1]["status"] == 404


def test_bad_registration_parameters_fail_before_any_cluster_is_created(tmp_path, monkeypatch):
    failed = _run(tmp_path, monkeypatch, model_id="Not A Model Id", schedule_cron="hourly")
    assert not failed.succeeded and "check-run-parameters" in failed.error
    # No create, no job: only the exit task's look-up of the (absent) cluster.
    assert [(e["method"], e["status"]) for e in failed.journal] == [("GET", 404)]
    assert failed.parameters["finalize-cluster"]["action"] == "absent"


@pytest.mark.slow
def test_a_run_failing_its_check_leaves_the_cluster_another_run_kept_as_it_was(
    tmp_path, monkeypatch, emulator_factory
):
    kept = _run(tmp_path, monkeypatch, teardown_policy="keep")
    assert kept.succeeded, kept.error
    *_claims, labels = _patch_labels(kept)
    failed = _run(tmp_path, monkeypatch, teardown_policy="keep", model_id="Not A Model Id")
    assert not failed.succeeded and "check-run-parameters" in failed.error
    # The exit task read the cluster and changed nothing: it was never this run's.
    assert [e["method"] for e in failed.journal] == ["GET"]
    assert failed.parameters["finalize-cluster"]["action"] == "none"
    fate = dict(summary.facts(failed))["cluster after the run"]
    assert fate.startswith("none: the run ended before it created or reused the cluster")
    emulator_factory(failed.state_dir)  # the state both runs left, served again to read it
    ref = cluster_resource.ClusterRef("local-project", "us-central1", "vsplocal")
    cluster = cluster_resource.ClusterResource(rest.VertexRestClient("us-central1"), ref).get()
    assert {k: cluster["labels"][k] for k in labels} == labels


def test_bad_training_parameters_fail_before_any_cluster_is_created(tmp_path, monkeypatch):
    failed = _run(
        tmp_path, monkeypatch, environment={"1BAD": "x"}, fallback_after_preemptions=-3,
        poll_seconds=-1,
    )  # fmt: skip
    assert not failed.succeeded and "check-run-parameters" in failed.error
    # Nothing was created: only the exit task's look-up of the (absent) cluster.
    assert [(e["method"], e["status"]) for e in failed.journal] == [("GET", 404)]
    assert failed.parameters["finalize-cluster"]["action"] == "absent"


def test_a_machine_without_a_price_fails_before_any_cluster_is_created(
    tmp_path, monkeypatch, capsys
):
    # The teardown prices the cluster (no price given); the table has no a3-edgegpu-8g figure.
    failed = _run(tmp_path, monkeypatch, machine_type="a3-edgegpu-8g", schedule_cron="0 * * * *")
    assert not failed.succeeded and "check-run-parameters" in failed.error
    assert [(e["method"], e["status"]) for e in failed.journal] == [("GET", 404)]
    shown = capsys.readouterr().out
    assert "machine_type = 'a3-edgegpu-8g': machine type 'a3-edgegpu-8g' (SPOT, node pool" in shown
    assert "has no price" in shown and "price_file" in shown


@pytest.mark.slow
def test_delete_with_a_machine_without_a_price_deletes_the_cluster(tmp_path, monkeypatch):
    # Its break-even time is infinite: logging it as a metric made kfp.local raise after the
    # decision ("Fail to serialize Infinity"), so the run stopped before its exit task and
    # the cluster ran on without an expiry.
    result = _run(
        tmp_path, monkeypatch, machine_type="a3-highgpu-4g", accelerator_count=4,
        gpus_per_node=4, teardown_policy="delete",
    )  # fmt: skip
    assert result.succeeded, result.error
    assert result.parameters["decide-teardown"]["action"] == "delete"
    assert _writes(result) == [
        *CREATED,
        *TRAINED,
        ("POST", "models:upload"),
        ("DELETE", "vsplocal"),
    ]
    decided = json.loads(pathlib.Path(result.outputs["decide-teardown/metrics"]).read_text())
    assert decided["teardown_keep"] == 0.0 and "teardown_break_even_seconds" not in decided


@pytest.mark.slow
def test_a_pre_warm_deletes_then_the_reaper_re_creates_and_the_next_run_reuses(
    tmp_path, monkeypatch
):
    # A daily run three hours from now, re-creating dear (the wait at 300 USD/h), keeping dear
    # (100 USD/h): deleting now and having the reaper create the cluster again is cheapest.
    cron = cron_times.daily_cron_hours_away(3)
    folder = tmp_path / "prewarm"
    prices = {
        "idle_price_per_hour": 100.0,
        "provisioning_price_per_hour": 100.0,
        "delay_penalty_per_hour": 300.0,
        "prewarm_margin_minutes": 5.0,
        "prewarm_dir": str(folder),
    }
    first = _run(tmp_path, monkeypatch, schedule_cron=cron, **prices)
    assert first.succeeded, first.error
    assert _writes(first) == [*CREATED, *TRAINED, ("POST", "models:upload"), ("DELETE", "vsplocal")]
    decided = json.loads(pathlib.Path(first.outputs["decide-teardown/metrics"]).read_text())
    assert decided["teardown_prewarm"] == 1.0
    [request] = list(folder.glob("*.prewarm.json"))
    intent = json.loads(request.read_text())
    assert intent["create_at"] == decided["teardown_prewarm_at"] > time.time()
    assert intent["cluster"].endswith(CLUSTERS)

    early = _run(tmp_path, monkeypatch, pipeline="reap-expired-clusters", prewarm_dir=str(folder))
    assert early.succeeded, early.error
    assert _writes(early) == []  # not due yet: nothing created, the request stays
    assert request.exists()

    intent["create_at"] = time.time() - 1  # the reaper run at the due tick
    request.write_text(json.dumps(intent))
    due = _run(tmp_path, monkeypatch, pipeline="reap-expired-clusters", prewarm_dir=str(folder))
    assert due.succeeded, due.error
    assert _writes(due) == [("POST", "modelDevelopmentClusters")]
    [create] = [
        e
        for e in due.journal
        if e["method"] == "POST" and e["path"].endswith("/modelDevelopmentClusters")
    ]
    assert create["body"]["labels"]["vsp-teardown"] == "prewarmed"
    assert create["body"]["labels"]["vsp-expires-at"]
    assert not request.exists()

    second = _run(tmp_path, monkeypatch, schedule_cron=cron, teardown_policy="delete")
    assert second.succeeded, second.error
    assert second.parameters["create-cluster"]["action"] == "reused"
    assert ("POST", "modelDevelopmentClusters") not in _writes(second)
