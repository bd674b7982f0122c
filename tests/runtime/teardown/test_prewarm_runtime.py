"""Pre-warm before a known cron tick: the rule, the request the decision writes, and the reaper
that creates the cluster from it (against the in-process Vertex emulator)."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import json
import logging

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st

from vsp.components.runtime.cluster import ops, resource
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors, gcp_labels, polling, rest
from vsp.components.runtime.steps import check_run_parameters, decide_teardown
from vsp.components.runtime.teardown import (
    cadence,
    decision,
    expiry,
    prewarm,
    prewarm_intents,
    prewarm_reaper,
    reaper,
    report,
)
from vsp.components.runtime.teardown import inputs as teardown_inputs

PROJECT, LOCATION = "test-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
COLLECTION = f"/v1beta1/{PARENT}/modelDevelopmentClusters"
FAST = resource.ClusterOptions(
    timeout=30, backoff=polling.Backoff(initial=0.05, maximum=0.2, jitter=0)
)


def utc(*args: int) -> float:
    return datetime.datetime(*args, tzinfo=datetime.timezone.utc).timestamp()


# A daily 06:00 run that ended at 01:30: 4.5 h idle. Keeping costs 100 USD/h; re-creating takes
# 20 min at 100 USD/h plus 300 USD/h of waiting (133.33 USD); pre-warming pays the 33.33 USD
# creation and the idle time from ready to the tick.
NOW = utc(2026, 12, 5, 1, 30)
TICK = utc(2026, 12, 5, 6, 0)
DAILY = teardown_inputs.TeardownInputs(
    idle_price_per_hour=100.0,
    provisioning_minutes=20.0,
    provisioning_price_per_hour=100.0,
    delay_penalty_per_hour=300.0,
    schedule_cron="0 6 * * *",
    now=NOW,
)


def with_margin(minutes: float, **changes) -> teardown_inputs.TeardownInputs:
    return dataclasses.replace(DAILY, prewarm_margin_minutes=minutes, **changes)


# ----- the rule ------------------------------------------------------------------------------


def test_pre_warm_is_off_unless_a_margin_is_given():
    chosen = decision.decide(DAILY)
    assert (chosen.action, chosen.prewarm) == ("delete", None)
    assert chosen.as_metrics()["teardown_prewarm"] == 0.0
    assert "teardown_prewarm_at" not in chosen.as_metrics()


def test_the_reaper_tick_before_the_latest_start_creates_it_and_the_cost_is_exact():
    chosen = decision.decide(with_margin(5))
    # Latest start 06:00 - 5 min - 20 min = 05:35; the reaper's tick at or before it is 05:30,
    # so the cluster is ready at 05:50, 10 min before the run.
    assert chosen.action == "delete"
    assert chosen.prewarm == prewarm.PrewarmPlan(
        tick=TICK,
        create_at=utc(2026, 12, 5, 5, 30),
        ready_at=utc(2026, 12, 5, 5, 50),
        expires_at=TICK + 6 * 3600,  # the daily cron's slack: a quarter of a day
        cost=pytest.approx(20 / 60 * 100 + 10 / 60 * 100),
    )
    assert chosen.why == "pre-warming before the next run is cheaper"
    assert "re-created by the reaper at 2026-12-05 05:30:00 UTC, ready 10 min before" in (
        chosen.reason
    )
    assert chosen.summary()[0] == (
        "delete: pre-warming before the next run is cheaper (next run in 4 h 30 min; "
        "re-created at 2026-12-05 05:30:00 UTC)"
    )
    assert chosen.summary()[1] == (
        "costs: keep 450.00 USD, re-create 133.33 USD, pre-warm 50.00 USD; idle 100.00 USD/h"
    )
    metrics = chosen.as_metrics()
    assert metrics["teardown_prewarm"] == 1.0
    assert metrics["teardown_prewarm_at"] == utc(2026, 12, 5, 5, 30)
    assert metrics["teardown_cost_if_prewarmed"] == pytest.approx(50.0)
    assert chosen.as_labels() == {gcp_labels.TEARDOWN: "delete"}


def test_a_tick_closer_than_provisioning_and_margin_is_not_pre_warmed():
    chosen = decision.decide(with_margin(5, now=TICK - 24 * 60))  # 24 min < 20 + 5
    assert chosen.prewarm is None


def test_keeping_wins_when_the_gap_is_short():
    hourly = with_margin(
        5, schedule_cron="0 * * * *", now=TICK - 40 * 60, provisioning_price_per_hour=300.0
    )
    chosen = decision.decide(hourly)
    # keep 40 min: 66.67 USD; pre-warm: the 100 USD creation (20 min at 300 USD/h) and more.
    assert chosen.action == "keep" and chosen.prewarm is None
    assert chosen.cost_if_kept == pytest.approx(66.6667, abs=1e-3)


def test_without_a_delay_penalty_re_creating_is_never_beaten():
    chosen = decision.decide(with_margin(5, delay_penalty_per_hour=0.0))
    # re-creating costs P itself (33.33 USD); pre-warming P plus idle time.
    assert chosen.action == "delete" and chosen.prewarm is None


@pytest.mark.parametrize("policy", ["keep", "shrink", "delete"])
def test_a_policy_override_is_never_pre_warmed(policy):
    chosen = decision.decide(with_margin(5, policy=policy, shrunk_price_per_hour=10.0))
    assert chosen.action == policy and chosen.prewarm is None


def test_missed_runs_of_the_schedule_add_their_waste_to_the_estimate():
    # The daily run came on 8 of the last 10 days (two ticks missed).
    days = [d for d in range(25, 31) if d != 27] + [1, 2, 3, 4] + []
    starts = (
        [utc(2026, 11, d, 6, 0) for d in days if d >= 25]
        + [utc(2026, 12, d, 6, 0) for d in (1, 3, 4)]
        + [utc(2026, 12, 5, 0, 0)]
    )
    inputs = with_margin(5, run_start_times=sorted(starts), delay_penalty_per_hour=3000.0)
    slack = 6 * 3600.0
    sample, missed, late = expiry.history_sample(inputs.schedule_cron, sorted(starts), NOW, slack)
    share = (missed + late) / len(sample)
    assert missed >= 2 and 0 < share < 1
    chosen = decision.decide(inputs)
    r = 100 / 3600
    lead = 10 * 60
    expected = 20 / 60 * 100 + r * lead + share * (r * (lead + slack) + inputs.recreation_cost)
    assert chosen.prewarm is not None
    assert chosen.prewarm.cost == pytest.approx(expected)


def test_a_negative_margin_is_refused_before_anything():
    with pytest.raises(errors.SpecValidationError) as caught:
        decision.decide(with_margin(-1))
    assert "prewarm_margin_minutes" in str(caught.value)


@settings(max_examples=150, deadline=None)
@given(
    idle=st.floats(1.0, 500.0),
    provisioning=st.floats(1.0, 60.0),
    penalty=st.floats(0.0, 2000.0),
    margin=st.floats(0.5, 60.0),
    idle_hours=st.floats(0.2, 30.0),
)
def test_a_chosen_pre_warm_is_cheaper_than_every_other_choice_and_ready_in_time(
    idle, provisioning, penalty, margin, idle_hours
):
    inputs = teardown_inputs.TeardownInputs(
        idle_price_per_hour=idle,
        provisioning_minutes=provisioning,
        provisioning_price_per_hour=idle,
        delay_penalty_per_hour=penalty,
        schedule_cron="0 6 * * *",
        now=TICK - idle_hours * 3600.0 if idle_hours < 24 else TICK - 3600.0,
        prewarm_margin_minutes=margin,
    )
    chosen = decision.decide(inputs)
    plan = chosen.prewarm
    if plan is None:
        return
    assert chosen.action == "delete"
    assert plan.cost < min(c for c in (chosen.cost_if_kept, chosen.cost_if_deleted) if c)
    assert inputs.now is not None and plan.create_at > inputs.now
    assert plan.create_at == cadence.tick_at_or_before(cadence.REAPER_CRON, plan.create_at)
    assert plan.ready_at == pytest.approx(plan.create_at + provisioning * 60)
    assert plan.ready_at <= plan.tick - margin * 60 + 1e-6


# ----- the request the decision writes -------------------------------------------------------


def test_a_request_round_trips_and_a_newer_one_replaces_it(tmp_path):
    intent = prewarm_intents.Intent(
        f"{PARENT}/modelDevelopmentClusters/c1", {"labels": {"team": "a"}}, TICK, 1.0, 2.0, 3.0,
        "run-7",
    )  # fmt: skip
    path = prewarm_intents.write(str(tmp_path), intent)
    expected = f"{PARENT}/modelDevelopmentClusters/c1".replace("/", "__") + ".prewarm.json"
    assert (
        path.name
        == expected
        == (
            "projects__test-project__locations__us-central1__modelDevelopmentClusters__c1"
            ".prewarm.json"
        )
    )
    newer = dataclasses.replace(intent, create_at=5.0)
    prewarm_intents.write(str(tmp_path), newer)
    assert prewarm_intents.read_all(str(tmp_path)) == [(path, newer)]
    assert json.loads(path.read_text())["version"] == 1


def test_an_unreadable_request_is_skipped_and_left_in_place(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(logging.getLogger("vsp"), "propagate", True)  # a step may have cut it
    bad = tmp_path / ("x" + prewarm_intents.SUFFIX)
    bad.write_text("{not json")
    assert prewarm_intents.read_all(str(tmp_path)) == []
    assert bad.exists() and "skipping unreadable pre-warm request" in caplog.text
    assert prewarm_intents.read_all(str(tmp_path / "missing")) == []


def test_a_margin_without_a_folder_is_refused_with_the_fix():
    with pytest.raises(errors.UserError) as caught:
        prewarm_intents.check_folder_given(5, "")
    assert "Fix: set prewarm_dir" in str(caught.value)
    prewarm_intents.check_folder_given(0, "")


# ----- against the emulator ------------------------------------------------------------------


@pytest.fixture
def client(emulator) -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def name(cluster_id: str) -> str:
    return f"{PARENT}/modelDevelopmentClusters/{cluster_id}"


def posts(emulator) -> list[dict]:
    return [e for e in emulator.journal() if e["method"] == "POST" and e["path"] == COLLECTION]


def live_body(cluster_body) -> dict:
    """A create body with user and managed labels, as a run's cluster has them."""
    body = copy.deepcopy(cluster_body)
    body["labels"] = {**body.get("labels", {}), "team": "vision", "vsp-pipeline-run": "run-1"}
    return body


def intent_for(cluster_id: str, body: dict, now: float, **changes) -> prewarm_intents.Intent:
    base = prewarm_intents.Intent(
        name(cluster_id), body, tick=now + 1800, create_at=now - 60, ready_at=now + 1140,
        expires_at=now + 7200, decided_by="run-1",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


def test_the_decision_records_the_clusters_spec_before_it_is_deleted(
    emulator_api, cluster_body, client, tmp_path
):
    emulator_api.create_running("warm1", live_body(cluster_body))
    ref = resource.ClusterRef(PROJECT, LOCATION, "warm1")
    chosen = decision.decide(with_margin(5))
    kept = decide_teardown.record_prewarm(client, ref, chosen, str(tmp_path), "run-9")
    assert kept is chosen
    [(_, intent)] = prewarm_intents.read_all(str(tmp_path))
    live = resource.ClusterResource(client, ref).get()
    expected = cluster_spec.ClusterSpec.from_api(live).to_request_body()
    expected["labels"] = {**cluster_body.get("labels", {}), "team": "vision"}
    assert intent.body == expected
    assert "name" not in intent.body and "createTime" not in intent.body
    assert (intent.cluster, intent.create_at, intent.decided_by) == (
        name("warm1"), utc(2026, 12, 5, 5, 30), "run-9",
    )  # fmt: skip


def test_a_cluster_already_gone_records_no_request(client, tmp_path):
    chosen = decision.decide(with_margin(5))
    ref = resource.ClusterRef(PROJECT, LOCATION, "gone1")
    plain = decide_teardown.record_prewarm(client, ref, chosen, str(tmp_path))
    assert plain.prewarm is None and "no pre-warm was recorded" in plain.reason
    assert prewarm_intents.read_all(str(tmp_path)) == []


def test_a_due_request_creates_the_cluster_with_an_expiry_and_is_removed(
    emulator, emulator_api, cluster_body, client, tmp_path
):
    now = NOW
    intent = intent_for("warm2", live_body(cluster_body), now)
    prewarm_intents.write(str(tmp_path), intent)
    report = reaper.reap_expired(
        client, PARENT, now=now, options=copy.deepcopy(FAST), prewarm_dir=str(tmp_path)
    )
    [entry] = report.prewarm
    assert entry.action == prewarm_reaper.PREWARMED
    [post] = posts(emulator)
    assert post["query"]["model_development_cluster_id"] in (["warm2"], "warm2")
    cluster = requests.get(emulator_api.clusters_url("warm2")).json()
    labels = cluster["labels"]
    assert labels["team"] == "vision"
    assert labels[gcp_labels.TEARDOWN] == "prewarmed"
    assert labels[gcp_labels.EXPIRES_AT] == gcp_labels.format_label_time(now + 7200)
    assert labels[gcp_labels.MANAGED] == "true"
    assert gcp_labels.PIPELINE_RUN not in labels
    assert prewarm_intents.read_all(str(tmp_path)) == []
    assert report.summary().endswith("pre-warm requests: 1 pre-warmed")


def test_the_next_runs_create_step_reuses_the_pre_warmed_cluster(
    emulator, emulator_api, cluster_body, client, tmp_path
):
    body = live_body(cluster_body)
    prewarm_intents.write(str(tmp_path), intent_for("warm3", body, NOW))
    prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW)
    ref = resource.ClusterRef(PROJECT, LOCATION, "warm3")
    manager = ops.ClusterManager(resource.ClusterResource(client, ref, options=copy.deepcopy(FAST)))
    users = copy.deepcopy(cluster_body)  # the run's own spec: no vsp- labels
    users["labels"] = {**users.get("labels", {}), "team": "vision"}
    desired = cluster_spec.ClusterSpec.from_api(users)
    result = manager.ensure(desired, {gcp_labels.PIPELINE_RUN: "run-2"})
    assert result.action == "reused"
    assert len(posts(emulator)) == 1  # the reaper's create, none from the run


@pytest.mark.parametrize(
    ("changes", "action", "why"),
    [
        ({"create_at": NOW + 60}, prewarm_reaper.WAITING, "due at"),
        ({"expires_at": NOW - 1}, prewarm_reaper.DROPPED, "did not come"),
    ],
)
def test_a_request_not_due_or_past_its_run_creates_nothing(
    emulator, cluster_body, client, tmp_path, changes, action, why
):
    prewarm_intents.write(
        str(tmp_path), intent_for("warm4", live_body(cluster_body), NOW, **changes)
    )
    [entry] = prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW)
    assert entry.action == action and why in entry.reason
    assert posts(emulator) == []
    assert bool(prewarm_intents.read_all(str(tmp_path))) == (action == prewarm_reaper.WAITING)


def test_an_existing_cluster_drops_the_request_without_a_create(
    emulator, emulator_api, cluster_body, client, tmp_path
):
    emulator_api.create_running("warm5", live_body(cluster_body))
    created = len(posts(emulator))
    prewarm_intents.write(str(tmp_path), intent_for("warm5", live_body(cluster_body), NOW))
    [entry] = prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW)
    assert (entry.action, entry.reason) == (prewarm_reaper.DROPPED, "the cluster exists (RUNNING)")
    assert len(posts(emulator)) == created
    assert prewarm_intents.read_all(str(tmp_path)) == []


def test_a_dry_run_sends_no_create_and_keeps_the_request(emulator, cluster_body, client, tmp_path):
    prewarm_intents.write(str(tmp_path), intent_for("warm6", live_body(cluster_body), NOW))
    [entry] = prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW, dry_run=True)
    assert entry.action == prewarm_reaper.WOULD_CREATE
    assert posts(emulator) == [] and len(prewarm_intents.read_all(str(tmp_path))) == 1


def test_a_create_without_an_answer_keeps_the_request_for_a_read_first(
    emulator, cluster_body, client, tmp_path, monkeypatch
):
    prewarm_intents.write(str(tmp_path), intent_for("warm7", live_body(cluster_body), NOW))

    def lost(*_args, **_kwargs):
        raise errors.TransientError("connection reset")

    monkeypatch.setattr(client, "post", lost)
    [entry] = prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW)
    assert entry.action == prewarm_reaper.WAITING and "read again" in entry.reason
    assert len(prewarm_intents.read_all(str(tmp_path))) == 1


def test_requests_of_another_location_are_left_alone(emulator, cluster_body, client, tmp_path):
    other = intent_for("warm8", live_body(cluster_body), NOW)
    other = dataclasses.replace(other, cluster=other.cluster.replace(LOCATION, "europe-west4"))
    prewarm_intents.write(str(tmp_path), other)
    assert prewarm_reaper.create_due(client, PARENT, str(tmp_path), now=NOW) == []
    assert posts(emulator) == [] and len(prewarm_intents.read_all(str(tmp_path))) == 1


# ----- the first step ------------------------------------------------------------------------


def test_the_first_step_refuses_a_margin_without_a_folder():
    params = _check_defaults() | {
        "teardown_options": {"prewarm_margin_minutes": 5.0},
        "check_teardown": True,
    }
    with pytest.raises(errors.UserError) as caught:
        check_run_parameters.check_component_params(params)
    assert str(caught.value).startswith(
        "teardown_options.prewarm_margin_minutes = 5 but teardown_options.prewarm_dir is empty"
    )


def test_the_first_step_refuses_a_negative_margin():
    params = _check_defaults() | {"teardown_options": {"prewarm_margin_minutes": -2.0}}
    with pytest.raises(errors.SpecValidationError) as caught:
        check_run_parameters.check_component_params(params)
    assert "teardown_options.prewarm_margin_minutes" in str(caught.value)


def _check_defaults() -> dict:
    import inspect

    from vsp.components import catalog

    declaration = catalog.declarations()["check_run_parameters"]
    defaults = {
        n: p.default
        for n, p in inspect.signature(declaration).parameters.items()
        if p.default is not inspect.Parameter.empty
    }
    return defaults | {
        "project": PROJECT,
        "location": LOCATION,
        "model_id": "m1",
        "serving_image": "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest",
        "model_dir": "gs://bucket/run/model",
        "idle_price_per_hour": 10.0,
        "provisioning_price_per_hour": 10.0,
    }


class Artifact:
    """What the step writes through a KFP output artifact: a path, metadata and metrics."""

    def __init__(self, path):
        self.path, self.metadata, self.logged = str(path), {}, {}

    def log_metric(self, name, value):
        self.logged[name] = value


def run_step(tmp_path, cluster_id: str, metrics=None, **changes):
    """``decide_teardown.main`` as the component calls it (every parameter, the daily cron's
    prices), with ``changes`` over those values."""
    params = {
        "project": PROJECT, "location": LOCATION, "cluster_id": cluster_id,
        "metrics": metrics or Artifact(tmp_path / "m"), "report": Artifact(tmp_path / "r"),
        "policy": "auto", "schedule_cron": "0 6 * * *", "interval_hours": 0.0,
        "idle_price_per_hour": 100.0, "provisioning_minutes": 20.0,
        "provisioning_price_per_hour": 100.0, "delay_penalty_per_hour": 300.0,
        "pipeline_name": "", "expiry_slack_fraction": 0.25, "price_file": "",
        "storage_price_per_hour": 0.0, "shrunk_price_per_hour": 0.0, "scale_up_minutes": 10.0,
        "prewarm_margin_minutes": 0.0, "prewarm_dir": "", "pipeline_run": "",
    }  # fmt: skip
    return decide_teardown.main(**{**params, **changes})


def test_the_step_deletes_and_records_the_request_the_reaper_acts_on(
    emulator, emulator_api, cluster_body, tmp_path
):
    emulator_api.create_running("warm9", live_body(cluster_body))
    metrics = Artifact(tmp_path / "metrics")
    folder = tmp_path / "prewarm"
    action, reason, _summary, labels = run_step(
        tmp_path, "warm9", metrics=metrics, pipeline_run="run-3",
        options={"prewarm_margin_minutes": 5.0, "prewarm_dir": str(folder)},
    )  # fmt: skip
    assert action == "delete" and labels == {gcp_labels.TEARDOWN: "delete"}
    assert "pre-warming before the next run is cheaper" in reason
    assert metrics.logged["teardown_prewarm"] == 1.0
    [(_, intent)] = prewarm_intents.read_all(str(folder))
    assert intent.cluster == name("warm9") and intent.decided_by == "run-3"
    assert intent.create_at == metrics.logged["teardown_prewarm_at"]


def test_the_step_refuses_a_margin_without_a_folder_before_any_request(emulator, tmp_path, caplog):
    with pytest.raises(SystemExit) as caught:
        run_step(tmp_path, "warm10", options={"prewarm_margin_minutes": 5.0})
    assert caught.value.code == errors.EXIT_USER_ERROR
    assert "prewarm_dir is empty" in str(caught.value.__cause__)
    assert emulator.journal() == []


def test_a_later_decision_that_does_not_pre_warm_withdraws_the_older_request(
    emulator, emulator_api, cluster_body, tmp_path
):
    emulator_api.create_running("warm11", live_body(cluster_body))
    folder = tmp_path / "prewarm"
    prewarm_intents.write(str(folder), intent_for("warm11", live_body(cluster_body), NOW))
    other = intent_for("warm12", live_body(cluster_body), NOW)
    prewarm_intents.write(str(folder), other)
    action, *_ = run_step(
        tmp_path, "warm11", policy="delete", prewarm_margin_minutes=5.0, prewarm_dir=str(folder)
    )
    assert action == "delete"
    assert [i.cluster for _, i in prewarm_intents.read_all(str(folder))] == [name("warm12")]


def test_the_report_shows_the_pre_warm_weighed():
    inputs = with_margin(5)
    page = report.html_section(inputs, decision.decide(inputs))
    assert (
        "<th>pre-warm (deleted now, re-created by the reaper before the next run)</th>"
        "<td>50.00 USD: created at 2026-12-05 05:30:00 UTC, ready 2026-12-05 05:50:00 UTC</td>"
    ) in page
    off = report.html_section(DAILY, decision.decide(DAILY))
    assert "before the next run)</th><td>not weighed</td>" in off
