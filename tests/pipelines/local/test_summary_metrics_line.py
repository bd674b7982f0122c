"""The run summary's metrics line names goodput and each overhead in node-seconds."""

from __future__ import annotations

import json

from vsp.pipelines.local import summary


def test_the_metrics_line_shows_goodput_and_every_overhead(tmp_path):
    path = tmp_path / "metrics.json"
    figures = {
        "useful_node_seconds": 80.0,
        "startup_node_seconds": 6.0,
        "reload_node_seconds": 1.0,
        "periodic_save_node_seconds": 2.0,
        "notice_window_node_seconds": 3.0,
        "finish_node_seconds": 4.0,
        "work_lost_node_seconds": 4.0,
    }
    path.write_text(json.dumps({"preemptions": 2.0, "goodput": 0.8, **figures, "cost": 1.5}))
    assert summary._metrics_line(str(path)) == (
        "preemptions=2, goodput=0.8, useful_node_seconds=80, startup_node_seconds=6, "
        "reload_node_seconds=1, periodic_save_node_seconds=2, notice_window_node_seconds=3, "
        "finish_node_seconds=4, work_lost_node_seconds=4"
    )
