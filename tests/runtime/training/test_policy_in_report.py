"""The trainer's checkpoint-policy explanation reaches the training step's report."""

from __future__ import annotations

import json

from tests.runtime.training.fake_backends import supervise_success
from vsp.components.runtime.training import driver

EXPLAINED = "notice-first: a save takes 26 s (2 s blocking) & <more>"


def _supervise(tmp_path):
    pages = []
    supervise_success(tmp_path, pages=pages)
    return pages[0]


def test_the_report_shows_the_trainers_policy_explanation(tmp_path):
    (tmp_path / "model").mkdir()
    metrics = {"loss_history": [2.0, 1.0], "checkpoint_policy": EXPLAINED}
    (tmp_path / "model" / "metrics.json").write_text(json.dumps(metrics))
    assert driver.checkpoint_policy_text(str(tmp_path / "model")) == EXPLAINED
    page = _supervise(tmp_path)
    escaped = "notice-first: a save takes 26 s (2 s blocking) &amp; &lt;more&gt;"
    assert f"<h2>Checkpoint policy</h2>{escaped}" in page


def test_no_section_without_an_explanation(tmp_path):
    assert driver.checkpoint_policy_text(str(tmp_path / "missing")) == ""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "metrics.json").write_text('{"checkpoint_policy": 3}')
    assert driver.checkpoint_policy_text(str(tmp_path / "model")) == ""
    assert "Checkpoint policy" not in _supervise(tmp_path)
