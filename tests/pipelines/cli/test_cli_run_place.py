"""`--project` and `--location` of `vsp submit` and `vsp schedule` reach the pipeline.

Before, `--location europe-west4` sent the run there while the pipeline's own `location`
parameter kept its default, us-central1, where the cluster was created; `--param
project=other` was sent as given; `--location us-central9` was accepted.
"""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from tests.pipelines.cluster_place import PLACE_PARAM
from vsp.pipelines.cli import main

TEMPLATE = "src/vsp/compiled/pipelines/slurm_spot_training.yaml"
REQUIRED = [
    *("--param", "command=[python3]", "--param", "working_directory=/home/w"),
    *("--param", "model_dir=/gcs/b/m", "--param", "model_id=m"),
    *("--param", "serving_image=us-docker.pkg.dev/p/r/i:1"),
    *("--param", PLACE_PARAM),
]


@pytest.fixture
def template(tmp_path):
    path = tmp_path / "slurm_spot_training.yaml"
    shutil.copyfile(TEMPLATE, path)
    return str(path)


def _invoke(command, template, location, *extra):
    args = [command, "--project", "my-project", "--location", location, "--template", template]
    args += ["--pipeline-root", "gs://bucket/root", "--dry-run", *REQUIRED, *extra]
    if command == "schedule":
        args += ["--cron", "0 3 * * *"]
    return CliRunner().invoke(main.main, args)


@pytest.mark.parametrize("command", ["submit", "schedule"])
def test_project_and_location_fill_the_pipeline_parameters(emulator, template, command):
    result = _invoke(command, template, "europe-west4")
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    job = body["createPipelineJobRequest"]["pipelineJob"] if command == "schedule" else body
    values = job["runtimeConfig"]["parameterValues"]
    assert (values["project"], values["location"]) == ("my-project", "europe-west4")
    assert emulator.journal() == []


@pytest.mark.parametrize("command", ["submit", "schedule"])
def test_a_parameter_that_differs_from_the_option_is_refused_with_the_fix(
    emulator, template, command
):
    result = _invoke(command, template, "us-central1", "--param", "project=other")
    assert result.exit_code == 2
    assert (
        "parameter_values.project = 'other': Differs from --project my-project: the run would be "
        "sent to one project and create its resources in another. Fix: Drop --param project=... "
        "(--project fills it), or pass --project other."
    ) in result.output
    same = _invoke(command, template, "us-central1", "--param", "location=us-central1")
    assert same.exit_code == 0, same.output
    assert emulator.journal() == []


def test_a_location_vertex_does_not_list_is_refused(emulator, template):
    result = _invoke("submit", template, "us-central9")
    assert result.exit_code == 2
    assert "location = 'us-central9': Is not a Vertex AI region (google-cloud-aiplatform" in (
        result.output
    )
    assert "Fix: Pass --location REGION, e.g. us-central1, us-east1, us-east4" in result.output
    assert emulator.journal() == []
