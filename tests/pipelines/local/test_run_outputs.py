"""A run's summary shows only its own outputs: a run that failed its check (only its exit task
wrote a folder of kfp.local's) is never given an earlier run's cluster, model version or
report."""

from __future__ import annotations

import json
import os
import time

from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import results, run


def test_a_run_failing_its_check_shows_no_outputs_of_an_earlier_run(tmp_path, monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    outputs = tmp_path / "outputs"
    earlier = outputs / "slurm-spot-training-2026-01-01-00-00-00-000000" / "register-model"
    earlier.mkdir(parents=True)
    (earlier / "executor_output.json").write_text(
        json.dumps({"parameterValues": {"model_resource_name": "models/earlier@5"}})
    )
    (earlier / "model_resource_name").write_text("models/earlier@5")
    later = time.time() + 3600  # newer than anything this run may write
    os.utime(earlier.parent, (later, later))
    arguments = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    arguments["cluster_id"] = "001"
    result = run.run_local(
        "slurm-spot-training",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(outputs),
        settings=run.local_settings(0.3),
        in_process=True,
    )
    assert not result.succeeded and "'check-run-parameters'" in result.error
    assert result.journal == []  # refused before any request
    # Only the exit task wrote outputs (no cluster can have that id: nothing to end).
    assert result.run_dir != str(earlier.parent) and result.run_dir.startswith(str(outputs))
    assert result.parameters == {
        "finalize-cluster": {
            "action": "none",
            "summary": "none: no cluster can have the id '001', so none is ended",
        }
    }
    assert not [path for path in result.outputs.values() if "earlier" in str(path)]


def test_a_run_that_left_no_folder_is_given_none_not_an_earlier_runs(tmp_path):
    earlier = tmp_path / "slurm-spot-training-2026-01-01-00-00-00-000000"
    earlier.mkdir()
    before = results.run_dirs(tmp_path, "slurm-spot-training")
    assert results.newest_run(tmp_path, "slurm-spot-training", before) is None
    assert results.task_outputs(None) == {}
    mine = tmp_path / "slurm-spot-training-2026-12-07-00-00-00-000000"
    mine.mkdir()
    later = time.time() + 3600
    os.utime(earlier, (later, later))  # the earlier folder is the newer one: still not this run's
    assert results.newest_run(tmp_path, "slurm-spot-training", before) == mine
