"""Step metrics: what reaches the artifact, and what is left out with a warning."""

from __future__ import annotations

import json
import logging
import math

from vsp.components.runtime.core import step


class _Metrics:
    """The part of kfp's Metrics artifact a step writes to: a path and log_metric."""

    def __init__(self, path: str):
        self.path = path
        self.logged: dict[str, float] = {}

    def log_metric(self, name: str, value: float) -> None:
        self.logged[name] = value


def test_non_finite_metrics_are_left_out_with_a_warning_naming_them(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger=step.log.name)
    artifact = _Metrics(str(tmp_path / "metrics"))
    published = step.publish_metrics(
        artifact, {"goodput": 0.97, "break_even_hours": math.inf, "loss": math.nan, "steps": 12}
    )
    assert published == {"goodput": 0.97, "steps": 12.0}
    assert artifact.logged == published
    assert json.loads((tmp_path / "metrics").read_text()) == published
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert caplog.messages == [
        "metrics left out (not finite numbers): break_even_hours (inf), loss (nan)"
    ]


def test_finite_metrics_log_nothing(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=step.log.name)
    artifact = _Metrics(str(tmp_path / "metrics"))
    assert step.publish_metrics(artifact, {"a": 1}) == {"a": 1.0}
    assert caplog.messages == []
