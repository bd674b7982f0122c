"""Runs a pipeline on this machine with ``kfp.local`` against the Vertex emulator.

Unless ``VERTEX_EMULATOR_HOST`` is already set, an emulator is started in-process on a free
port with its state in ``state_dir``; every step inherits ``VERTEX_EMULATOR_HOST`` and so talks
to the emulator through the same client code as on Vertex AI.

Two modes:

* **faithful** (the default, what the main job and CI use): the template users deploy,
  ``compiled/pipelines/<name>.yaml``, is run as Vertex AI Pipelines runs it. Each step runs its
  compiled command in a fresh virtual environment (``SubprocessRunner(use_venv=True)``) that
  holds only what the YAML installs, with kfp.local's execution cache on (Vertex caches by
  default) and the task retries the template sets. pip's download cache is shared, so only the
  first run downloads.
* **in-process** (``in_process=True``, for quick iteration): the pipeline is rebuilt from the
  sources and each step runs in the current interpreter's environment
  (``SubprocessRunner(use_venv=False)``), without the cache.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import time
from typing import Any

from google.protobuf import json_format
from kfp import components, local
from kfp.local import pipeline_orchestrator
from kfp.pipeline_spec import pipeline_spec_pb2

from vsp import vertex_emulator
from vsp.components import catalog, packaging
from vsp.components.runtime.core import errors, rest
from vsp.components.runtime.trainer import contract
from vsp.pipelines import pipeline_caching, registry, run_console

log = logging.getLogger(__name__)

GCS_ROOT_ENV = contract.GCS_FUSE_ROOT_ENV
COMPILED_DIR = pathlib.Path(__file__).resolve().parent.parent / "compiled"


@dataclasses.dataclass
class LocalRunResult:
    """What a local run did.

    Attributes:
        pipeline: Pipeline name.
        succeeded: Whether every task succeeded.
        seconds: Wall time of the run.
        calls: Count of journal entries by ``METHOD kind`` (e.g. ``POST create-cluster``).
        journal: The journal entries written during the run.
        state_dir: The emulator's state directory (None when an external emulator was used).
        error: The failure message when the run failed.
        outputs: Task output files of the run by ``task/output``, e.g. ``train-on-cluster/report``.
        parameters: Output parameters of each task that ran, by task name.
        run_dir: kfp.local's folder of the run ('' when none was found).
        mode: ``faithful`` (compiled template, a venv per step) or ``in-process``.
    """

    pipeline: str
    succeeded: bool
    seconds: float
    calls: dict[str, int]
    journal: list[dict[str, Any]]
    state_dir: str | None
    error: str = ""
    outputs: dict[str, str] = dataclasses.field(default_factory=dict)
    parameters: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    run_dir: str = ""
    mode: str = "faithful"


def classify_call(entry: dict[str, Any]) -> str:
    """A short label of a journaled request, e.g. ``create cluster`` or ``get operation``."""
    method, path = entry.get("method", ""), entry.get("path", "")
    tail = path.rsplit("/", 2)
    if "/operations/" in path:
        return f"{method} operation"
    if path.endswith("/customJobs"):
        return "create custom job" if method == "POST" else "list custom jobs"
    if "/customJobs/" in path:
        return "cancel custom job" if path.endswith(":cancel") else f"{method} custom job"
    if ":upload" in path or ":listVersions" in path or ":mergeVersionAliases" in path:
        return {"upload": "upload model", "listVersions": "list model versions"}.get(
            path.rsplit(":", 1)[-1], "merge version aliases"
        )
    if path.endswith("/pipelineJobs"):
        return "create pipeline job" if method == "POST" else "list pipeline jobs"
    if path.endswith("/modelDevelopmentClusters"):
        return "create cluster" if method == "POST" else "list clusters"
    if "/modelDevelopmentClusters/" in path:
        verb = {"GET": "get", "DELETE": "delete", "PATCH": "update"}.get(method, method)
        return f"{verb} cluster" if ":" not in tail[-1] else f"{method} {tail[-1].split(':')[-1]}"
    return f"{method} {path}"


def local_settings(
    provisioning_seconds: float = 3.0, preemptions: int = 0, preempt_after: float = 2.5
) -> vertex_emulator.EmulatorSettings:
    """Emulator timings for a local run: short Slurm delays, and ``preemptions`` Spot
    preemptions, each ``preempt_after`` seconds into a job's run, with a 1 s notice."""
    return vertex_emulator.EmulatorSettings(
        provisioning_delay_seconds=provisioning_seconds,
        # The decision's defaults: 20 min to create, 10 min to scale a shrunk cluster up.
        scale_up_delay_seconds=provisioning_seconds / 2.0,
        delete_delay_seconds=1.0,
        slurm_kill_wait_seconds=2.0,
        slurm_requeue_delay_seconds=1.0,
        slurm_preempt_notice_seconds=1.0,
        slurm_node_recovery_seconds=1.0,
        slurm_min_job_age_seconds=3600.0,
        slurm_spot_preempt_after_seconds=preempt_after if preemptions else 0.0,
        slurm_spot_preempt_max_count=preemptions,
        custom_job_queue_delay_seconds=0.5,
        custom_job_pending_delay_seconds=1.0,
        custom_job_preempt_notice_seconds=1.0,
        custom_job_kill_wait_seconds=2.0,
        custom_job_spot_preempt_after_seconds=preempt_after if preemptions else 0.0,
        custom_job_spot_preempt_max_count=preemptions,
    )


@contextlib.contextmanager
def emulator_for_run(
    state_dir: str | None,
    settings: vertex_emulator.EmulatorSettings | None,
    cluster_id: str = "",
):
    """Yields the emulator state dir in use (None for an external emulator set by env).

    A cluster ``cluster_id`` kept warm by an earlier run gets the settings' preemption plan
    afresh, so a run that reuses it sees the same injected preemptions as one that creates it.
    """
    if rest.emulator_host():
        log.info("using the emulator at %s", rest.emulator_host())
        yield None
        return
    state = pathlib.Path(state_dir or ".vsp/emulator").resolve()
    state.mkdir(parents=True, exist_ok=True)
    server = vertex_emulator.EmulatorServer(str(state), settings=settings)
    server.start()
    if cluster_id:
        with contextlib.suppress(Exception):  # no such cluster yet: its plan starts fresh anyway
            server.app.slurm.clear_preemption_plan(cluster_id)
    # Emulated Cloud Storage: gs://BUCKET/PATH lives at {state}/gcs/BUCKET/PATH, for the jobs
    # (set by the emulator) and for the steps that read checkpoints and models.
    changes = {rest.EMULATOR_ENV: server.address, GCS_ROOT_ENV: str(state / "gcs")}
    previous = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    log.info("started the Vertex emulator at %s (state in %s)", server.address, state)
    try:
        yield str(state)
    finally:
        server.stop()
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def compiled_template(pipeline: str, template_dir: str | os.PathLike | None = None) -> pathlib.Path:
    """The compiled template of a registered pipeline, ``<template_dir>/pipelines/<name>.yaml``.

    Raises:
        errors.UserError: The template does not exist (names the fix).
    """
    root = pathlib.Path(template_dir) if template_dir else COMPILED_DIR
    path = root / "pipelines" / f"{pipeline.replace('-', '_')}.yaml"
    if not path.is_file():
        raise errors.UserError(
            f"no compiled template {path}. Fix: run `vsp compile` (or pass the folder that "
            "holds pipelines/<name>.yaml), or use --in-process to run from the sources."
        )
    return path


def run_local(
    pipeline: str,
    arguments: dict[str, Any],
    *,
    state_dir: str | None = None,
    pipeline_root: str = ".vsp/local_outputs",
    settings: vertex_emulator.EmulatorSettings | None = None,
    in_process: bool = False,
    template_dir: str | os.PathLike | None = None,
    enable_caching: bool | None = None,
    console: run_console.StepConsole | None = None,
) -> LocalRunResult:
    """Runs a registered pipeline locally.

    Args:
        pipeline: Registered pipeline name (see ``registry.PIPELINES``).
        arguments: Pipeline parameter values.
        state_dir: Emulator state directory (default ``.vsp/emulator``).
        pipeline_root: Where kfp.local writes task outputs.
        settings: Emulator timings for an in-process emulator.
        in_process: Run the pipeline rebuilt from the sources in this interpreter's
            environment instead of the compiled template in fresh virtual environments.
        template_dir: Folder of compiled templates for the faithful mode (default the
            repository's ``compiled/``).
        enable_caching: Faithful mode: True or False sets caching of every task, as
            ``vsp submit --enable-caching`` does; None keeps the template's settings.
        console: Show the run through this console (a line per task state change and the
            progress of waits; everything else to its log) instead of kfp.local's full stream.

    Returns:
        The outcome, with the emulator journal of the run.
    """
    if pipeline not in registry.PIPELINES:
        known = ", ".join(sorted(registry.PIPELINES))
        raise errors.UserError(f"unknown pipeline {pipeline!r}. Fix: use one of {known}.")
    root = str(pathlib.Path(pipeline_root).resolve())
    if in_process:
        pipeline_func = registry.PIPELINES[pipeline](catalog.component_set(packaging.PREINSTALLED))
        arguments = coerce_arguments(pipeline_func, arguments)

        def launch(values: dict[str, Any]) -> None:
            pipeline_func(**values)

        runner = local.SubprocessRunner(use_venv=False)
    else:
        path = compiled_template(pipeline, template_dir)
        template = components.load_component_from_file(str(path))
        arguments = coerce_arguments(template, arguments)
        pipeline_spec = template.pipeline_spec
        if enable_caching is not None:
            spec = pipeline_caching.with_caching(
                json_format.MessageToDict(pipeline_spec), enable_caching
            )
            pipeline_spec = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())

        def launch(values: dict[str, Any]) -> None:
            pipeline_orchestrator.run_local_pipeline(pipeline_spec=pipeline_spec, arguments=values)

        runner = local.SubprocessRunner(use_venv=True)
    with emulator_for_run(state_dir, settings, str(arguments.get("cluster_id", ""))) as state:
        before = len(vertex_emulator.read_journal(state)) if state else 0
        local.init(runner, pipeline_root=root, raise_on_error=True, enable_caching=not in_process)
        start = time.monotonic()
        error = ""
        shown = run_console.capture(console) if console else contextlib.nullcontext()
        try:
            with shown:
                launch(arguments)
        except RuntimeError as exc:  # kfp.local raises RuntimeError when a task fails
            error = str(exc)
        seconds = time.monotonic() - start
        entries = vertex_emulator.read_journal(state)[before:] if state else []
    calls = collections.Counter(classify_call(e) for e in entries)
    run_dir = _newest_run(pathlib.Path(pipeline_root), pipeline)
    return LocalRunResult(
        pipeline,
        not error,
        seconds,
        dict(calls),
        entries,
        state,
        error,
        _task_outputs(run_dir),
        _task_parameters(run_dir),
        str(run_dir or ""),
        "in-process" if in_process else "faithful",
    )


def coerce_arguments(pipeline_func: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Whole numbers given for ``float`` parameters become floats (``--param x=0`` reads 0).

    Raises:
        errors.UserError: A parameter the pipeline does not have.
    """
    inputs = pipeline_func.component_spec.inputs or {}
    unknown = sorted(set(arguments) - set(inputs))
    if unknown:
        raise errors.UserError(
            f"unknown parameters {unknown}. Fix: use parameters of the pipeline: "
            f"{', '.join(sorted(inputs))}."
        )
    coerced = dict(arguments)
    for name, value in arguments.items():
        if inputs[name].type == "Float" and isinstance(value, int) and not isinstance(value, bool):
            coerced[name] = float(value)
    return coerced


def _newest_run(root: pathlib.Path, pipeline: str) -> pathlib.Path | None:
    """kfp.local's folder of the newest run of ``pipeline`` under the pipeline root."""
    runs = sorted(root.glob(f"{pipeline}-*"), key=lambda p: p.stat().st_mtime)
    return runs[-1] if runs else None


def _task_outputs(run_dir: pathlib.Path | None) -> dict[str, str]:
    """Output files of a run by ``task/output``."""
    if run_dir is None:
        return {}
    return {
        str(path.relative_to(run_dir)): str(path)
        for path in sorted(run_dir.glob("*/*"))
        if path.is_file() and path.name != "executor_output.json"
    }


def _task_parameters(run_dir: pathlib.Path | None) -> dict[str, dict[str, Any]]:
    """Output parameters of each task of a run, from kfp.local's executor output files."""
    if run_dir is None:
        return {}
    found = {}
    for path in sorted(run_dir.glob("*/executor_output.json")):
        try:
            found[path.parent.name] = json.loads(path.read_text()).get("parameterValues") or {}
        except (OSError, ValueError):
            log.warning("unreadable task output %s", path)
    return found
