"""`vsp submit --dry-run` with a 60-character pipeline name: two runs, two identities.

The generated job id is ``<name>-<UTC seconds>``; with a name of 49 characters or more, two job
ids differ only after their 63rd character, where a label value is cut. The run's identity no
longer comes from the job id: the template passes kfp's unique-id placeholders, and any run
value that does not fit a label keeps a hash of the whole.
"""

from __future__ import annotations

import datetime
import json
import re

import yaml
from click.testing import CliRunner

from tests.pipelines.cluster_place import PLACE_PARAM
from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.training import driver
from vsp.pipelines.cli import main
from vsp.pipelines.vertex import jobs

LONG_NAME = "slurm-spot-training-of-the-recommendation-model-for-europe-x"
GENERATE = jobs.generate_job_id
IDENTITY_TASKS = ("create-cluster", "train-on-cluster", "register-model", "finalize-cluster")


def _template(tmp_path):
    spec = yaml.safe_load(open("src/vsp/compiled/pipelines/slurm_spot_training.yaml"))
    spec["pipelineInfo"]["name"] = LONG_NAME
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def _tasks(spec):
    found = dict(spec["root"]["dag"]["tasks"])
    for component in spec["components"].values():
        found.update((component.get("dag") or {}).get("tasks") or {})
    return found


def _dry_run(template, when, monkeypatch):
    monkeypatch.setattr(jobs, "generate_job_id", lambda name, now=None: GENERATE(name, when))
    result = CliRunner().invoke(
        main.main,
        ["submit", "--project", "test-project", "--location", "us-central1"]
        + ["--template", template, "--pipeline-root", "gs://bucket/root", "--dry-run"]
        + ["--param", "command=[python3]", "--param", "working_directory=/home/w"]
        + [
            "--param",
            "model_dir=/gcs/b/m",
            "--param",
            "model_id=m",
            "--param",
            "project=test-project",
        ]
        + ["--param", "serving_image=us-docker.pkg.dev/p/r/i:1", "--param", PLACE_PARAM],
    )
    assert result.exit_code == 0, result.output
    job_id = re.search(r"pipelineJobId=(\S+) \(not sent\)", result.stderr).group(1)
    return job_id, json.loads(result.stdout)


def test_two_dry_runs_of_a_60_character_pipeline_give_two_run_identities(tmp_path, monkeypatch):
    assert len(LONG_NAME) == 60
    template = _template(tmp_path)
    start = datetime.datetime(2026, 12, 5, 3, 0, 0, tzinfo=datetime.timezone.utc)
    first, body = _dry_run(template, start, monkeypatch)
    second, _ = _dry_run(template, start + datetime.timedelta(seconds=1), monkeypatch)
    assert first.startswith(LONG_NAME) and first != second
    # Where the collision came from: the job ids agree on the 63 characters a label keeps.
    assert gcp_labels.value(first) == gcp_labels.value(second)

    # The template takes each task's identity from the run's and the task's unique ids...
    tasks = _tasks(body["pipelineSpec"])
    for name in IDENTITY_TASKS:
        run = tasks[name]["inputs"]["parameters"]["pipeline_run"]["runtimeValue"]["constant"]
        assert run == "{{$.pipeline_job_uuid}}", name
    train = tasks["train-on-cluster"]["inputs"]["parameters"]
    assert train["task_id"]["runtimeValue"]["constant"] == "{{$.pipeline_task_uuid}}"

    # ...and a run value that does not fit a label (the job id, as a run passed by hand)
    # keeps a hash of itself: two values, two run keys, two model-version labels.
    assert gcp_labels.run_value(first) != gcp_labels.run_value(second)
    assert len(gcp_labels.run_value(first)) <= 63
    keys = {driver.run_key_for(run, "vsptrain", task="t1") for run in (first, second)}
    assert len(keys) == 2
