"""Shared pieces of the pipeline run/schedule tests: templates, a request builder, a fake client."""

from __future__ import annotations

import shutil

import yaml

from vsp.components.runtime.core import errors, rest
from vsp.pipelines.vertex import jobs

LIFECYCLE = "src/vsp/compiled/pipelines/cluster_lifecycle.yaml"
HOST = "https://us-central1-kfp.pkg.dev/test-project/pipelines"
DIGEST = "sha256:" + "ab" * 32
PARENT = "projects/test-project/locations/us-central1"
AR_PARENT = f"{PARENT}/repositories/pipelines"


def copy_template(tmp_path) -> str:
    """A private copy of a compiled template (the compiled/ folder may change meanwhile)."""
    path = tmp_path / "cluster_lifecycle.yaml"
    shutil.copyfile(LIFECYCLE, path)
    return str(path)


def write_cron_template(tmp_path) -> str:
    """A tiny compiled-like template with a ``schedule_cron`` parameter."""
    spec = {
        "pipelineInfo": {"name": "Nightly Train"},
        "root": {
            "inputDefinitions": {
                "parameters": {
                    "project": {"parameterType": "STRING"},
                    "schedule_cron": {
                        "parameterType": "STRING",
                        "defaultValue": "",
                        "isOptional": True,
                    },
                }
            }
        },
        "schemaVersion": "2.1.0",
        "sdkVersion": "kfp-2.17.3",
    }
    path = tmp_path / "nightly.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def job(template, **changes) -> jobs.PipelineJobRequest:
    """A valid request for ``template`` (id ``run-1``), with ``changes`` applied."""
    fields = dict(
        project="test-project",
        location="us-central1",
        template=template,
        pipeline_root="gs://bucket/root",
        parameter_values={"project": "test-project"},
        job_id="run-1",
    )
    fields.update(changes)
    return jobs.PipelineJobRequest(**fields)


class FakeRest:
    """Scripted answers: each call pops the next outcome (an exception is raised)."""

    def __init__(self, **outcomes):
        self.outcomes = {k.upper(): list(v) for k, v in outcomes.items()}
        self.calls = []

    def _answer(self, method, path, params=None, body=None):
        self.calls.append((method, path, params))
        outcome = self.outcomes[method].pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def post(self, path, body, params=None, *, idempotent=False):
        return self._answer("POST", path, params, body)

    def get(self, path, params=None):
        return self._answer("GET", path, params)

    def delete(self, path, params=None, *, retry=True):
        return self._answer("DELETE", path, params)

    list_all = rest.VertexRestClient.list_all  # paging on top of the scripted ``get``


def lost():
    return errors.UnavailableError("no response (ConnectionError)", status="UNAVAILABLE")


def not_found():
    return errors.NotFoundError("missing", http_status=404)


def exists():
    return errors.AlreadyExistsError("exists", http_status=409)
