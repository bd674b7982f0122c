"""A run whose trainer wrote no model fails before anything is registered: the model manifest
names the run that wrote it, and the training step compares it with its own run key."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.runtime.training.fake_backends import supervise_success
from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import contract, manifests, model_files
from vsp.components.runtime.training import model_check


def _write_model(folder, run_key, monkeypatch):
    with monkeypatch.context() as env:
        if run_key:
            env.setenv(contract.RUN_KEY_ENV, run_key)
        else:
            env.delenv(contract.RUN_KEY_ENV, raising=False)
        return model_files.write_model_dir(folder, {"w": np.ones(2)}, {"step": 3})


def test_the_manifest_names_the_run_that_wrote_the_model(tmp_path, monkeypatch):
    manifest = _write_model(tmp_path / "model", "vsp-c1-run-3", monkeypatch)
    assert manifest[manifests.MODEL_RUN_KEY] == "vsp-c1-run-3"
    on_disk = json.loads((tmp_path / "model" / manifests.MANIFEST).read_text())
    assert on_disk["run_key"] == "vsp-c1-run-3"
    assert manifests.model_run_key(tmp_path / "model") == "vsp-c1-run-3"
    assert manifests.verify_model_dir(tmp_path / "model") == on_disk
    outside = _write_model(tmp_path / "plain", "", monkeypatch)
    assert manifests.MODEL_RUN_KEY not in outside
    assert manifests.model_run_key(tmp_path / "plain") is None
    assert manifests.model_run_key(tmp_path / "missing") is None


def test_only_another_runs_model_is_a_problem(tmp_path, monkeypatch):
    _write_model(tmp_path / "model", "vsp-c1-run-3", monkeypatch)
    folder = str(tmp_path / "model")
    assert model_check.foreign_model_problem(folder, "vsp-c1-run-3") == ""
    problem = model_check.foreign_model_problem(folder, "vsp-c1-run-4")
    assert f"the model in {folder} was written by another run (vsp-c1-run-3)" in problem
    assert "not by this one (vsp-c1-run-4)" in problem and "Fix:" in problem
    _write_model(tmp_path / "plain", "", monkeypatch)
    assert model_check.foreign_model_problem(str(tmp_path / "plain"), "vsp-c1-run-4") == ""
    assert model_check.foreign_model_problem(str(tmp_path / "none"), "vsp-c1-run-4") == ""


def _supervise(tmp_path, run_key):
    pages = []
    return supervise_success(tmp_path, run_key, pages), pages


def test_a_success_that_left_an_earlier_runs_model_fails_the_step(tmp_path, monkeypatch):
    _write_model(tmp_path / "model", "run-3", monkeypatch)
    outcome, pages = _supervise(tmp_path, "run-3")
    assert outcome.result.job_ids == ["100"] and "(failed)" not in pages[0]
    with pytest.raises(errors.UserError, match=r"written by another run \(run-3\)") as raised:
        _supervise(tmp_path, "run-4")
    assert not isinstance(raised.value, errors.TransientError)
    assert manifests.model_run_key(tmp_path / "model") == "run-3"  # left as it was


def test_the_report_of_that_run_says_failed(tmp_path, monkeypatch):
    _write_model(tmp_path / "model", "run-3", monkeypatch)
    pages = []
    with pytest.raises(errors.UserError):
        supervise_success(tmp_path, "run-4", pages)
    assert "Training run run-4 (failed)" in pages[0]
