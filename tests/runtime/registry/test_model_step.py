"""``model_step``: the register_model component's runtime, against the emulator."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from vsp.components.runtime.core import errors, rest
from vsp.components.runtime.steps import register_model
from vsp.components.runtime.trainer import model_files

PROJECT, LOCATION = "test-project", "us-central1"
NAME = f"projects/{PROJECT}/locations/{LOCATION}/models/digits"


@pytest.fixture
def gcs_root(tmp_path, monkeypatch):
    """A GCS FUSE root holding a verified model dir (step 42) at ``gs://bucket/run/model``."""
    root = tmp_path / "gcs"
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(root))
    model_files.write_model_dir(
        root / "bucket" / "run" / "model", {"w": np.arange(3.0)}, {"step": 42}
    )
    return root


def _register(**changes):
    kwargs = {
        "project": PROJECT,
        "location": LOCATION,
        "model_id": "digits",
        "display_name": "",
        "model_dir_path": "gs://bucket/run/model",
        "serving_image": "us-docker.pkg.dev/p/r/serve:1",
        "version_aliases": ["candidate"],
        "description": "nightly",
        "labels": {"team": "vision"},
        "job_ids": [101, 102, 103],
        "preemptions": 3,
        "data_version": "2026-12-01",
        "code_version": "abc1234",
        "pipeline_run": "slurm-spot-training-20261202",
    }
    kwargs.update(changes)
    return register_model.register(**kwargs)


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("gs://b/x/model/", "gs://b/x/model"),
        ("/gcs/b/x/model", "gs://b/x/model"),
        ("/gcs/b/x/../y", "gs://b/y"),
    ],
)
def test_to_gcs_uri_maps_fuse_paths(path, uri):
    assert register_model.to_gcs_uri(path, gcs_root="/gcs") == uri


@pytest.mark.parametrize("path", ["/home/user/model", "/gcs", "gs://", "", "relative/model"])
def test_to_gcs_uri_refuses_what_the_registry_cannot_read(path):
    with pytest.raises(errors.UserError, match="Fix:"):
        register_model.to_gcs_uri(path, gcs_root="/gcs")


def test_provenance_labels_are_label_safe_and_skip_empty_values():
    labels = register_model.provenance_labels(
        job_ids=["7", "8", "9"],
        preemptions=2,
        checkpoint_step=None,
        data_version="Data/V1",
        code_version="",
    )
    assert labels == {
        "vsp-jobs": "7-9",
        "vsp-job-count": "3",
        "vsp-preemptions": "2",
        "vsp-data-version": "data-v1",
    }


def test_exact_upload_body_with_provenance(emulator, gcs_root):
    registration = _register()
    assert registration.model.resource_name == f"{NAME}@1"
    assert registration.step == 42
    assert registration.vertex_uri == rest.VertexRestClient(LOCATION).url(f"v1/{NAME}@1")
    [upload] = [e for e in emulator.journal() if e["path"].endswith("models:upload")]
    assert upload["body"] == {
        "modelId": "digits",
        "model": {
            "displayName": "digits",
            "description": "nightly",
            "versionDescription": "nightly",
            "artifactUri": "gs://bucket/run/model",
            "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/serve:1"},
            "labels": {
                "team": "vision",
                "vsp-jobs": "101-103",
                "vsp-job-count": "3",
                "vsp-preemptions": "3",
                "vsp-checkpoint-step": "42",
                "vsp-data-version": "2026-12-01",
                "vsp-code-version": "abc1234",
                "vsp-pipeline-run": "slurm-spot-training-20261202",
            },
        },
    }
    # The aliases are moved onto the version once it is known (a late upload cannot take them).
    [merge] = [e for e in emulator.journal() if e["path"].endswith(":mergeVersionAliases")]
    assert merge["path"].endswith(f"{NAME}@1:mergeVersionAliases")
    assert merge["body"] == {"versionAliases": ["candidate"]}


def test_second_run_adds_a_version_to_the_same_model(emulator, gcs_root):
    _register()
    second = _register(pipeline_run="slurm-spot-training-20261203")
    assert second.model.resource_name == f"{NAME}@2"
    uploads = [e for e in emulator.journal() if e["path"].endswith("models:upload")]
    assert uploads[1]["body"]["parentModel"] == NAME
    assert "modelId" not in uploads[1]["body"]


def test_reserved_user_labels_are_refused_before_any_request(emulator, gcs_root):
    with pytest.raises(errors.UserError, match="reserved prefix"):
        _register(labels={"vsp-jobs": "x"})
    assert emulator.journal() == []


@pytest.mark.parametrize(
    ("changes", "text"),
    [({"labels": ["a"]}, "labels = ['a'] is not a mapping"),
     ({"version_aliases": "candidate"}, "version_aliases = 'candidate' is not a list")],
)  # fmt: skip
def test_wrong_types_are_user_errors_before_any_request(emulator, gcs_root, changes, text):
    with pytest.raises(errors.UserError, match=re.escape(text)):
        _register(**changes)
    assert emulator.journal() == []


def test_a_local_model_dir_is_refused_before_any_request(emulator, gcs_root, tmp_path):
    model_files.write_model_dir(tmp_path / "local", {"w": np.arange(2.0)}, {})
    with pytest.raises(errors.UserError, match="not on Cloud Storage"):
        _register(model_dir_path=str(tmp_path / "local"))
    assert emulator.journal() == []


STEP_SCRIPT = """
import sys
from vsp.components.runtime.steps import register_model
from vsp.components.runtime.core import step
step.configure_logging()
result = register_model.register(
    project=sys.argv[1], location=sys.argv[2], model_id="digits", display_name="digits",
    model_dir_path="gs://bucket/run/model", serving_image="img:1", pipeline_run="run-9",
    gcp_resources_path=sys.argv[3],
)
print(result.model.resource_name, result.model.reused)
"""


def test_step_killed_after_its_upload_creates_no_second_version_when_rerun(
    emulator, gcs_root, tmp_path
):
    # The upload is applied, then its answer is held back long enough to kill the step.
    emulator.add_fault(
        action="delay", method="POST", path="models:upload", when="after", seconds=30
    )
    outputs = str(tmp_path / "gcp_resources")
    argv = [sys.executable, "-c", STEP_SCRIPT, PROJECT, LOCATION, outputs]
    first = subprocess.Popen(argv, env=dict(os.environ), start_new_session=True)
    client = rest.VertexRestClient(LOCATION)
    deadline = time.monotonic() + 20
    while not client.get(f"v1/projects/{PROJECT}/locations/{LOCATION}/models").get("models"):
        assert time.monotonic() < deadline, "the step never uploaded"
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    before = len(emulator.journal())
    rerun = subprocess.run(argv, env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.split() == [f"{NAME}@1", "True"]
    rerun_calls = [(e["method"], e["path"]) for e in emulator.journal()[before:]]
    assert not [call for call in rerun_calls if call[1].endswith("models:upload")]
    versions = client.get(f"v1/{NAME}:listVersions")["models"]
    assert [v["versionId"] for v in versions] == ["1"]
    recorded = json.loads(open(outputs).read())["resources"]
    assert recorded[-1]["resourceType"] == "VertexModel"


@pytest.mark.parametrize("preemptions", [-3, 1.5, True, "2"])
def test_a_preemption_count_that_is_not_one_is_refused_before_any_request(
    emulator, gcs_root, preemptions
):
    # -3 was recorded as the label "3": the sign lost, the provenance wrong.
    with pytest.raises(errors.UserError, match=r"preemptions = .*: not a count of preemptions"):
        _register(preemptions=preemptions)
    assert emulator.journal() == []
