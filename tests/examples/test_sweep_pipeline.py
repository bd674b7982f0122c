"""The learning-rate sweep example: a 3-way ``dsl.ParallelFor`` of trainings on one cluster.

The template is compiled (from components that install nothing, so kfp.local runs each step
in this interpreter) and run on the emulator: 3 Slurm jobs with 3 run keys, 3 checkpoint
folders, 3 model versions, one cluster created and deleted.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml
from kfp import compiler

from vsp.components import catalog, packaging
from vsp.examples import sweep_pipeline
from vsp.pipelines.local import run

SUBMIT = "/slurm/v0.0.42/job/submit"
RATES = ["0.003", "0.01", "0.03"]


def _tasks(spec):
    """Every task of the template, by name, whatever DAG holds it."""
    found = {}
    for component in spec["components"].values():
        found.update((component.get("dag") or {}).get("tasks") or {})
    return found


def test_each_iteration_gets_the_job_and_task_ids_not_the_task_name(tmp_path):
    template = tmp_path / "lr_sweep.yaml"
    compiler.Compiler().compile(sweep_pipeline.build(catalog.component_set()), str(template))
    tasks = _tasks(yaml.safe_load(template.read_text()))
    for name in ("train-on-cluster", "register-model"):
        values = tasks[name]["inputs"]["parameters"]
        assert values["pipeline_run"]["runtimeValue"]["constant"] == "{{$.pipeline_job_uuid}}"
        assert values["task_id"]["runtimeValue"]["constant"] == "{{$.pipeline_task_uuid}}"


@pytest.mark.slow
def test_a_three_way_sweep_trains_three_times_and_registers_three_versions(tmp_path, monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    template = tmp_path / "lr_sweep.yaml"
    components = catalog.component_set(packaging.PREINSTALLED)
    compiler.Compiler().compile(sweep_pipeline.build(components), str(template))
    arguments = {
        **sweep_pipeline.local_arguments(tmp_path),
        "learning_rates": RATES,
        "steps": "20",
    }
    result = run.run_template(
        template,
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=run.local_settings(0.3),
        in_process=True,
    )
    assert result.succeeded, result.error

    journal = result.journal
    creates = [e for e in journal if e["method"] == "POST" and e["path"].endswith("Clusters")]
    deletes = [e for e in journal if e["method"] == "DELETE" and e["path"].endswith("/sweep")]
    assert len(creates) == 1 and len(deletes) == 1
    submits = [
        e["body"]["body"]["job"]
        for e in journal
        if e["path"].endswith(":callSlurmRestApi") and (e.get("body") or {}).get("path") == SUBMIT
    ]
    assert len(submits) == 3
    keys = {job["name"] for job in submits}
    assert len(keys) == 3
    scripts = " ".join(job["script"] for job in submits)
    for rate in RATES:
        assert f"--lr {rate}" in scripts

    # Three checkpoint folders, one per run key, beside the models; three models.
    bucket = tmp_path / "emulator" / "gcs" / "local-bucket" / sweep_pipeline.NAME
    names = sorted(p.name for p in (bucket / "checkpoints").iterdir())
    # Each folder has its progress beacon beside it (checkpoints/KEY.beacon).
    assert names == sorted([*keys, *(f"{key}.beacon" for key in keys)])
    for key in keys:
        assert (bucket / "checkpoints" / key / "history.jsonl").is_file()
    for rate in RATES:
        assert (bucket / f"lr-{rate}" / "model.npz").is_file()

    # Three versions of one model, each the registration of its own iteration.
    # First registrations may race to create the model: a loser's upload answers 409
    # ALREADY_EXISTS, and it looks the model up and uploads a version of it instead.
    posted = [e for e in journal if e["method"] == "POST" and e["path"].endswith(":upload")]
    assert all(e["status"] in (200, 409) for e in posted), [e["status"] for e in posted]
    assert sum(e["status"] == 409 for e in posted) <= 2  # all but the first creator
    uploads = [e for e in posted if e["status"] == 200]
    assert len(uploads) == 3
    artifacts = sorted(e["body"]["model"]["artifactUri"] for e in uploads)
    assert artifacts == sorted(f"gs://local-bucket/lr-sweep/lr-{rate}" for rate in RATES)
    runs = {e["body"]["model"]["labels"]["vsp-pipeline-run"] for e in uploads}
    assert len(runs) == 3
    assert pathlib.Path(result.run_dir).name.startswith(sweep_pipeline.NAME)
