"""The "Use the components in your own pipeline" example (docs/own-pipeline.md), run as written.

``src/vsp/examples/own_pipeline.py`` is run as a script: it compiles its pipeline and runs the
template on the emulator (a venv per step, as Vertex AI runs it). The end state is read back from
the emulator's state: the cluster was created and is gone, the training job was preempted once
and resumed, and the model version is registered with the run's provenance.
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest
import requests
import yaml

from vsp import vertex_emulator

EXAMPLE = (
    pathlib.Path(__file__).resolve().parents[2] / "src" / "vsp" / "examples" / "own_pipeline.py"
)
PARENT = "v1/projects/local-project/locations/us-central1"
CLUSTER = "projects/local-project/locations/us-central1/modelDevelopmentClusters/myspot"


@pytest.mark.slow
def test_the_example_compiles_and_runs_on_the_emulator(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("VERTEX_EMULATOR_HOST",)}
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(tmp_path), "--preemptions", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1500,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "pipeline my-spot-training: SUCCEEDED" in run.stdout

    # The compiled template: training fed by the create output, the delete as the exit task.
    spec = yaml.safe_load((tmp_path / "my_spot_training.yaml").read_text())
    handler = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]
    assert sorted(handler) == ["create-cluster", "register-model", "train-on-cluster"]
    assert handler["train-on-cluster"]["dependentTasks"] == ["create-cluster"]
    assert spec["root"]["dag"]["tasks"]["delete-cluster"]["triggerPolicy"] == {
        "strategy": "ALL_UPSTREAM_TASKS_COMPLETED"
    }

    state = tmp_path / "emulator"
    journal = vertex_emulator.read_journal(str(state))
    creates = [
        e
        for e in journal
        if e["method"] == "POST" and e["path"].endswith("/modelDevelopmentClusters")
    ]
    deletes = [e for e in journal if e["method"] == "DELETE" and e["path"].endswith("/myspot")]
    assert (len(creates), creates[0]["status"]) == (1, 200)
    assert (len(deletes), deletes[0]["status"]) == (1, 200)

    with vertex_emulator.EmulatorServer(state) as server:
        base = server.base_url
        gone = requests.get(f"{base}/v1beta1/{CLUSTER}", timeout=10)
        assert gone.status_code == 404
        preemptions = server.app.slurm.preemptions("myspot")
        assert [(p["kind"], p["outcome"], p["restartCount"]) for p in preemptions] == [
            ("spot", "REQUEUE", 0)
        ]
        versions = requests.get(
            f"{base}/{PARENT}/models/my-spot-model:listVersions", timeout=10
        ).json()["models"]
    assert [v["versionId"] for v in versions] == ["1"]
    labels = versions[0]["labels"]
    assert labels["vsp-preemptions"] == "1"
    folder = versions[0]["artifactUri"]  # {run} in model_dir: the run's own folder
    assert folder.startswith("gs://local-bucket/my-spot-training/model/") and "{" not in folder
    # The model was written to the emulated Cloud Storage, not to a /gcs of this machine.
    relative = folder.removeprefix("gs://")
    assert (state / "gcs" / relative / "manifest.json").is_file()


def test_the_docs_show_this_example_as_valid_python():
    page = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "own-pipeline.md").read_text()
    section = page.split("# Use the components in your own pipeline", 1)[1].split("\n## ", 1)[0]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    ast.parse(block)
    source = EXAMPLE.read_text()
    for line in (
        "from vsp.components import create_cluster, delete_cluster, register_model, "
        "train_on_cluster",
        'cluster_name=create.outputs["cluster_name"],',
        'model_dir=train.outputs["model_dir"],',
        "with dsl.ExitHandler(cleanup):",
        "task.set_caching_options(False)",
    ):
        assert line in block and line in source, line
