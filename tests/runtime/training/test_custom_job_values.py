"""``train_custom_job`` applies its value rules (``param_rules``) at its start, exit code 2."""

from __future__ import annotations

import inspect
import logging

import pytest

from vsp.components import catalog
from vsp.components.runtime.core import errors, step
from vsp.components.runtime.steps import train_custom_job


def params(**changes):
    declaration = catalog.declarations()["train_custom_job"]
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(declaration).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }
    given = {
        "project": "p",
        "location": "us-central1",
        "gcp_resources": "/nonexistent/gcp_resources",
        "metrics": None,
        "report": None,
        "display_name": "train",
        "base_output_directory": "gs://bucket/runs/r1",
        "container_image": "us-docker.pkg.dev/p/r/train:1",
        "command": ["python", "-m", "trainer"],
    }
    return {**defaults, **given, **changes}


@pytest.mark.parametrize(
    ("change", "text"),
    [
        ({"env": ["A=1"]}, "env = ['A=1']: is not a dict."),
        ({"env": {"VSP_CHECKPOINT_DIR": "gs://b/x"}}, "sets VSP_CHECKPOINT_DIR"),
        (
            {"base_output_directory": "gs://bucket/runs/../../other"},
            "base_output_directory = 'gs://bucket/runs/../../other': has a '.' or '..' segment.",
        ),
        ({"base_output_directory": "/gcs/bucket/runs"}, "is not a gs://BUCKET/PATH URI."),
        ({"display_name": "t" * 129}, "has 129 characters; Vertex AI allows 128."),
    ],
)
def test_values_vertex_or_the_step_would_refuse_stop_it_before_any_request(
    monkeypatch, caplog, change, text
):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "127.0.0.1:9")  # nothing listens: no request
    step.configure_logging()
    monkeypatch.setattr(logging.getLogger("vsp"), "propagate", True)  # to caplog
    with pytest.raises(SystemExit) as caught:
        train_custom_job.main(**params(**change))
    assert caught.value.code == errors.EXIT_USER_ERROR
    assert text in caplog.text
