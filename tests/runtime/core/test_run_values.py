"""Run identity: never empty, never cut into another run's."""

from __future__ import annotations

import logging

from vsp.components.runtime.core import gcp_labels, run_identity
from vsp.components.runtime.training import driver


def test_an_empty_run_gets_a_fresh_identity_each_call_and_says_so(caplog):
    with caplog.at_level(logging.WARNING):
        first = run_identity.ensure("", "train_on_cluster")
        second = run_identity.ensure("  ", "train_on_cluster")
    assert first.startswith("manual-") and second.startswith("manual-") and first != second
    assert len(first) == len("manual-") + 12
    assert "pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER" in caplog.text
    assert run_identity.ensure("4f1c", "x") == "4f1c"


def test_run_values_keep_a_hash_when_cut_or_changed():
    name = "slurm-spot-training-of-the-recommendation-model-for-europe-x"
    a, b = f"{name}-20261205030000", f"{name}-20261205030001"
    assert gcp_labels.value(a) == gcp_labels.value(b)  # the cut alone collides
    assert gcp_labels.run_value(a) != gcp_labels.run_value(b)
    assert all(gcp_labels.VALUE.match(gcp_labels.run_value(v)) for v in (a, b))
    assert gcp_labels.run_value("R 1") != gcp_labels.run_value("r-1") == "r-1"
    assert gcp_labels.run_value("") == "" and gcp_labels.unique_value("!!") == ""


def test_derived_keys_of_iterations_differ_by_task_id():
    keys = {driver.run_key_for("51168511", "sweep", task=t) for t in ("101", "202", "303")}
    assert keys == {"vsp-sweep-51168511-101", "vsp-sweep-51168511-202", "vsp-sweep-51168511-303"}
    # A retried task passes the same ids, so it gets the same key and re-attaches.
    assert driver.run_key_for("51168511", "sweep", task="101") == "vsp-sweep-51168511-101"


def test_the_run_token_becomes_the_runs_label_value():
    run = "Slurm-Spot-Training 2026/12/05 03:00"
    value = gcp_labels.run_value(run)
    assert run_identity.expand_run_token("/gcs/b/model/{run}", run) == f"/gcs/b/model/{value}"
    assert "/" not in value and " " not in value
    assert run_identity.expand_run_token("gs://b/{run}/m/{run}", "r1") == "gs://b/r1/m/r1"
    assert run_identity.expand_run_token("/gcs/b/model", "r1") == "/gcs/b/model"
