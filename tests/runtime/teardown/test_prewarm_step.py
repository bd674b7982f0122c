"""Pre-warm in the decide_teardown step and in the first step: the request written before the
delete, a margin without a folder refused, an older request withdrawn."""

from __future__ import annotations

import logging

import pytest

from tests import cron_times
from tests.runtime.teardown.prewarm_cases import (
    LOCATION,
    NOW,
    PROJECT,
    intent_for,
    live_body,
    name,
)
from vsp.components.runtime.core import errors, gcp_labels
from vsp.components.runtime.steps import (
    check_run_parameters,
    decide_teardown,
    reap_expired_clusters,
)
from vsp.components.runtime.teardown import prewarm_intents

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
        "policy": "auto", "schedule_cron": cron_times.daily_cron_hours_away(12),
        "interval_hours": 0.0,
        "idle_price_per_hour": 100.0, "provisioning_minutes": 20.0,
        "provisioning_price_per_hour": 100.0, "delay_penalty_per_hour": 300.0,
        "pipeline_name": "", "expiry_slack_fraction": 0.25, "price_file": "",
        "storage_price_per_hour": 0.0, "shrunk_price_per_hour": 0.0, "scale_up_minutes": 10.0,
        "prewarm_margin_minutes": 0.0, "prewarm_dir": "", "pipeline_run": "",
    }  # fmt: skip
    return decide_teardown.main(**{**params, **changes})


def test_the_step_deletes_and_records_the_request_the_reaper_acts_on(
    emulator, emulator_api, cluster_body, tmp_path, caplog
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
    # The reaper says the request waits as progress, which `vsp run-local` shows (its summary
    # said only "none expired").
    caplog.set_level(logging.INFO, "vsp.progress")
    progress = logging.getLogger("vsp.progress")
    progress.addHandler(caplog.handler)  # the runtime's loggers do not propagate to the root
    try:
        reaped = reap_expired_clusters.main(
            project=PROJECT, location=LOCATION, dry_run=False, prewarm_dir=str(folder)
        )
    finally:
        progress.removeHandler(caplog.handler)
    assert reaped == []
    # A record reaches the handler twice where the "vsp" logger propagates (it does not once a
    # step has set its logging up): counted once.
    records = {id(record): record for record in caplog.records if record.name == "vsp.progress"}
    said = [record.getMessage() for record in records.values()]
    assert len(said) == 1 and said[0].startswith(f"pre-warm of {name('warm9')}: waiting: "), said


def test_the_step_refuses_a_margin_without_a_folder_before_any_request(emulator, tmp_path):
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
