"""The run summary's metrics line names goodput and each overhead in node-seconds."""

from __future__ import annotations

import json

from vsp.pipelines.local import results, summary


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


def _result(state_dir, calls):
    return results.LocalRunResult(
        "slurm-spot-training", True, 12.0, calls, [], state_dir, mode="in-process"
    )


def test_the_injected_count_is_only_claimed_for_the_emulator_run_local_started(tmp_path):
    own = summary.terminal_lines(_result(str(tmp_path), {"POST create cluster": 1}), preemptions=3)
    assert "  injected preemptions: up to 3" in own
    assert "  requests: POST create cluster 1" in own
    external = summary.terminal_lines(_result(None, {}), preemptions=3)
    assert "  injected preemptions: the external emulator's own (VERTEX_EMULATOR_HOST)" in external
    assert not any(line.startswith("  requests:") for line in external)  # no journal to count


def test_a_delete_the_step_declined_is_not_reported_as_done(tmp_path):
    declined = _result(str(tmp_path), {})
    declined.parameters.update(
        {"decide-teardown": {"action": "delete", "summary": "delete: policy is 'delete'"}},
        **{"delete-cluster": {"Output": False}},
    )
    rows = dict(summary.facts(declined))
    assert rows["teardown"] == "delete: policy is 'delete'"
    assert rows["cluster after the run"].startswith("not deleted: already gone, or in use by")
    done = _result(str(tmp_path), {})
    done.parameters.update({"delete-cluster": {"Output": True}})
    assert "cluster after the run" not in dict(summary.facts(done))


def test_a_shrink_kept_whole_is_not_reported_shrunk(tmp_path):
    # The decision said shrink with a days-long expiry; the step found another run on the
    # cluster and kept it whole: the summary reports what the step did.
    kept = _result(str(tmp_path), {})
    kept.parameters.update(
        {
            "decide-teardown": {
                "action": "shrink",
                "summary": "shrink: ...",
                "labels": {"vsp-teardown": "shrink", "vsp-expires-at": "20991231t000000z"},
            },
            "shrink-cluster": {"Output": "kept whole"},
        }
    )
    rows = dict(summary.facts(kept))
    assert "shrunk until" not in rows
    assert rows["gpu pools"].startswith("kept whole: another run uses the cluster; labelled in")
    kept.parameters["shrink-cluster"] = {"Output": "shrunk"}
    rows = dict(summary.facts(kept))
    assert rows["shrunk until"] == "2099-12-31 00:00:00 UTC, then reaped"
    assert rows["gpu pools"] == "shrunk"


def test_interruptions_without_any_notice_save_point_to_the_trainer_contract(tmp_path):
    # A trainer that ignored SIGTERM was told only "no notice, or a notice save that did not land".
    def notice_row(landed: float) -> str:
        result = _result(str(tmp_path), {})
        path = tmp_path / f"metrics-{landed:g}.json"
        path.write_text(
            json.dumps(
                {"preemptions": 3.0, "notice_saves_landed": landed,
                 "interruptions_without_notice_save": 3.0 - landed}
            )
        )  # fmt: skip
        result.outputs["train-on-cluster/metrics"] = str(path)
        return dict(summary.facts(result))["notice saves"]

    assert notice_row(0.0).endswith(
        "; with none landed, check that the trainer saves when told (SIGTERM): "
        "docs/trainer-contract.md, 'Saving on the notice'"
    )
    assert notice_row(1.0).endswith("the work since the last save was lost)")
