"""Running an exit task as the pipeline backend does: kfp's executor, with the final status of
the run's group among its inputs, and the ``Output`` parameter read back."""

from __future__ import annotations

import json
import logging
from typing import Any

from kfp.dsl import executor

from vsp.components import catalog, packaging

PARENT = "projects/test-project/locations/us-central1"


def execute(tmp_path, component: str, parameters: dict[str, Any], state: str) -> Any:
    """Runs ``component`` with ``parameters`` and ``status`` = ``state``; returns its output
    (``Output``), or its outputs by name when it has several."""
    output = tmp_path / "output.json"
    built = catalog.component_set(packaging.PREINSTALLED)[component]
    names = list(built.component_spec.outputs or {"Output": None})
    status = {
        "state": state,
        "pipelineJobResourceName": f"{PARENT}/pipelineJobs/r",
        "pipelineTaskName": "exit-handler-1",
        "error": {"code": 1, "message": "ended"} if state != "SUCCEEDED" else {},
    }
    executor_input = {
        "inputs": {"parameterValues": {**parameters, "status": status}},
        "outputs": {
            "parameters": {n: {"outputFile": str(tmp_path / n)} for n in names},
            "outputFile": str(output),
        },
    }
    executor.Executor(executor_input, built).execute()
    values = json.loads(output.read_text())["parameterValues"]
    return values["Output"] if names == ["Output"] else values


def saved_step_loggers():
    """A generator for a fixture: a step configures the ``vsp`` logger as a step process
    would; this puts it back afterwards so later tests capture logs."""
    loggers = [logging.getLogger("vsp")]
    saved = [(lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    yield
    for logger, (handlers, level, propagate) in zip(loggers, saved, strict=True):
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
