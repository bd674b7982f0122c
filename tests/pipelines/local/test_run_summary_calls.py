"""The run summary's metrics line shows the training step's calls (Vertex, Cloud Storage)."""

from __future__ import annotations

import json

from vsp.pipelines.local import summary


def test_metrics_line_shows_every_counted_call(tmp_path):
    path = tmp_path / "metrics.json"
    values = {
        "vertex_calls": 24,
        "storage_calls": 30,
        "api_calls": 54,
        "api_calls_per_job_hour": 50.5,
    }
    path.write_text(json.dumps(values))
    assert summary._metrics_line(str(path)) == (
        "vertex_calls=24, storage_calls=30, api_calls=54, api_calls_per_job_hour=50.5"
    )


def test_metrics_line_shows_vertex_calls_and_calls_per_job_hour(tmp_path):
    path = tmp_path / "metrics.json"
    values = {"preemptions": 1, "vertex_calls": 24, "vertex_calls_per_job_hour": 23.5, "x": 9}
    path.write_text(json.dumps(values))
    assert summary._metrics_line(str(path)) == (
        "preemptions=1, vertex_calls=24, vertex_calls_per_job_hour=23.5"
    )
