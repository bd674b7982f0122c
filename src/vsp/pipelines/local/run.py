"""Runs a pipeline on this machine with ``kfp.local`` against the Vertex emulator.

Unless ``VERTEX_EMULATOR_HOST`` is already set, an emulator is started in-process on a free
port with its state in ``state_dir``; every step inherits ``VERTEX_EMULATOR_HOST`` and so talks
to the emulator through the same client code as on Vertex AI.

Two modes:

* **faithful** (the default, what the main job and CI use): the template users deploy,
  ``compiled/pipelines/<name>.yaml``, is run as Vertex AI Pipelines runs it. Each step runs its
  compiled command, install stage included, in a fresh virtual environment of its own that
  sees only what the YAML installs (``step_envs``: the installed packages come from a base
  built once per exact install list and never written after), with kfp.local's execution cache
  on (Vertex caches by default) and the task retries the template sets.
* **in-process** (``in_process=True``, for quick iteration): the pipeline is rebuilt from the
  sources and each step runs in the current interpreter's environment
  (``SubprocessRunner(use_venv=False)``), without the cache.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import logging
import os
import pathlib
import sys
import time
from collections.abc import Iterator
from typing import Any

from google.protobuf import json_format
from kfp import components, local
from kfp.local import pipeline_orchestrator
from kfp.pipeline_spec import pipeline_spec_pb2

from vsp import vertex_emulator
from vsp.components import catalog, packaging
from vsp.components.runtime.core import errors, step
from vsp.pipelines.definitions import catalog as pipeline_catalog
from vsp.pipelines.local import (
    emulator_session,
    interrupts,
    parameter_values,
    results,
    step_console,
    step_envs,
    stopped_at_once,
)
from vsp.pipelines.vertex import caching

log = logging.getLogger(__name__)

COMPILED_DIR = pathlib.Path(__file__).resolve().parents[2] / "compiled"


# The outcome of a local run (defined with the other readers of what a run left).


def local_settings(
    provisioning_seconds: float = 3.0,
    preemptions: int = 0,
    preempt_after: float = 2.5,
    notice_seconds: float = 1.0,
    unannounced_share: float = 0.0,
) -> vertex_emulator.EmulatorSettings:
    """Emulator timings for a local run: short Slurm delays, and ``preemptions`` Spot
    preemptions, each ``preempt_after`` seconds into a job's run.

    Args:
        provisioning_seconds: Seconds a new cluster stays PROVISIONING.
        preemptions: Spot preemptions injected in all.
        preempt_after: Seconds into a run of each preemption.
        notice_seconds: Seconds from a preemption's notice (SIGTERM) to its SIGKILL.
        unannounced_share: Share (0 to 1) of the Slurm preemptions that come without notice.
    """
    if not 0.0 <= unannounced_share <= 1.0:
        raise errors.UserError(
            f"unannounced share {unannounced_share}: it is a share of the preemptions. Fix: "
            "give a value from 0 (every preemption announced) to 1 (none)."
        )
    if notice_seconds < 0:
        raise errors.UserError(
            f"notice of {notice_seconds} s: it cannot be negative. Fix: give 0 or more seconds "
            "(GCP gives a Spot VM 30 s)."
        )
    return vertex_emulator.EmulatorSettings(
        provisioning_delay_seconds=provisioning_seconds,
        # The decision's defaults: 20 min to create, 10 min to scale a shrunk cluster up.
        scale_up_delay_seconds=provisioning_seconds / 2.0,
        delete_delay_seconds=1.0,
        slurm_kill_wait_seconds=2.0,
        slurm_requeue_delay_seconds=1.0,
        slurm_preempt_notice_seconds=notice_seconds,
        slurm_spot_preempt_unannounced_share=unannounced_share,
        slurm_node_recovery_seconds=1.0,
        slurm_min_job_age_seconds=3600.0,
        slurm_spot_preempt_after_seconds=preempt_after if preemptions else 0.0,
        slurm_spot_preempt_max_count=preemptions,
        custom_job_queue_delay_seconds=0.5,
        custom_job_pending_delay_seconds=1.0,
        custom_job_preempt_notice_seconds=notice_seconds,
        custom_job_kill_wait_seconds=2.0,
        custom_job_spot_preempt_after_seconds=preempt_after if preemptions else 0.0,
        custom_job_spot_preempt_max_count=preemptions,
    )


def compiled_template(pipeline: str, template_dir: str | os.PathLike | None = None) -> pathlib.Path:
    """The compiled template of a registered pipeline, ``<template_dir>/pipelines/<name>.yaml``.

    Raises:
        errors.UserError: The template does not exist (names the fix).
    """
    root = pathlib.Path(template_dir) if template_dir else COMPILED_DIR
    path = root / "pipelines" / f"{pipeline.replace('-', '_')}.yaml"
    if not path.is_file():
        raise errors.UserError(
            f"no compiled template {path}. Fix: run `make compile` (or pass the folder that "
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
    console: step_console.StepConsole | None = None,
    pipeline_name: str = "",
) -> results.LocalRunResult:
    """Runs a registered pipeline locally.

    Args:
        pipeline: Registered pipeline name (see ``pipeline_catalog.PIPELINES``).
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
        pipeline_name: In-process: run the pipeline under this name, as a copy of its template
            compiled under another name would run ('' = its registered name).

    Returns:
        The outcome, with the emulator journal of the run.
    """
    check_pipeline_name(pipeline)
    if not in_process:
        return run_template(
            compiled_template(pipeline, template_dir),
            arguments,
            state_dir=state_dir,
            pipeline_root=pipeline_root,
            settings=settings,
            enable_caching=enable_caching,
            console=console,
        )
    pipeline_func = pipeline_catalog.PIPELINES[pipeline](
        catalog.component_set(packaging.PREINSTALLED)
    )
    arguments = coerce_arguments(pipeline_func, arguments)
    spec = with_local_retry_backoff(json_format.MessageToDict(pipeline_func.pipeline_spec))
    if pipeline_name:
        spec["pipelineInfo"]["name"] = pipeline_name
    run = _LocalRun(pipeline_name or pipeline, _launcher(spec), "in-process")
    return run.execute(arguments, state_dir, pipeline_root, settings, console)


def check_pipeline_name(pipeline: str) -> None:
    """Refuses a name that is not a shipped pipeline's; a path is pointed to ``run_template``.

    Raises:
        errors.UserError: ``pipeline`` is not in ``pipeline_catalog.PIPELINES``.
    """
    if pipeline in pipeline_catalog.PIPELINES:
        return
    known = ", ".join(sorted(pipeline_catalog.PIPELINES))
    own = ""
    if str(pipeline).endswith((".yaml", ".yml")) or os.path.sep in str(pipeline):
        own = (
            " Shipped pipelines run by name; a template of your own runs locally with "
            "vsp.pipelines.local.run.run_template(path, arguments) (docs/own-pipeline.md)."
        )
    raise errors.UserError(f"unknown pipeline {pipeline!r}. Fix: use one of {known}.{own}")


def run_template(
    template: str | os.PathLike,
    arguments: dict[str, Any],
    *,
    state_dir: str | None = None,
    pipeline_root: str = ".vsp/local_outputs",
    settings: vertex_emulator.EmulatorSettings | None = None,
    enable_caching: bool | None = None,
    console: step_console.StepConsole | None = None,
    in_process: bool = False,
) -> results.LocalRunResult:
    """Runs a compiled pipeline template (the project's or your own) locally, as Vertex runs it.

    Each step runs its compiled command in a fresh virtual environment holding only what its
    YAML installs, against the Vertex emulator: unless ``VERTEX_EMULATOR_HOST`` is set, one
    is started in-process with its state in ``state_dir``, and the steps get
    ``VERTEX_EMULATOR_HOST`` and ``VSP_GCS_FUSE_ROOT`` (``{state_dir}/gcs``, the emulated
    Cloud Storage) in their environment.

    Args:
        template: Path of the compiled pipeline YAML.
        arguments: Pipeline parameter values.
        state_dir: Emulator state directory (default ``.vsp/emulator``).
        pipeline_root: Where kfp.local writes task outputs.
        settings: Emulator timings for an in-process emulator (None = the saved ones).
        enable_caching: True or False sets caching of every task; None keeps the template's.
        console: Show the run through this console instead of kfp.local's full stream.
        in_process: Run each step's compiled command in this interpreter's environment
            instead of a fresh virtual environment (for a template compiled from components
            that install nothing, ``packaging.PREINSTALLED``).

    Returns:
        The outcome, with the emulator journal of the run.

    Raises:
        errors.UserError: A parameter the template does not have.
    """
    loaded = components.load_component_from_file(str(template))
    arguments = coerce_arguments(loaded, arguments)
    spec = with_local_retry_backoff(json_format.MessageToDict(loaded.pipeline_spec))
    if enable_caching is not None:
        spec = caching.with_caching(spec, enable_caching)
    warning = caching.side_effect_caching_warning(spec)
    if warning:
        print(warning, file=sys.stderr)
    mode = "in-process" if in_process else "faithful"
    run = _LocalRun(spec["pipelineInfo"]["name"], _launcher(spec), mode)
    return run.execute(arguments, state_dir, pipeline_root, settings, console)


def _launcher(spec: dict[str, Any]) -> Any:
    """What runs a PipelineSpec (dict form) with given arguments through kfp.local."""
    pipeline_spec = json_format.ParseDict(spec, pipeline_spec_pb2.PipelineSpec())

    def launch(values: dict[str, Any]) -> None:
        pipeline_orchestrator.run_local_pipeline(pipeline_spec=pipeline_spec, arguments=values)

    return launch


LOCAL_RETRY_BACKOFF_SECONDS = 1


def with_local_retry_backoff(spec: dict[str, Any]) -> dict[str, Any]:
    """The PipelineSpec with each task retry's first backoff cut to one second.

    kfp.local waits out a retry policy's backoff in real seconds (the templates wait 10 s, then
    30 s, as Vertex does); a local run compresses it as the emulator compresses provisioning
    and Slurm delays. The number of retries and the backoff factor stay as compiled.
    """
    rewritten = copy.deepcopy(spec)
    components = rewritten.get("components") or {}
    for dag in [rewritten.get("root") or {}, *components.values()]:
        for task in ((dag.get("dag") or {}).get("tasks") or {}).values():
            policy = task.get("retryPolicy")
            if policy and policy.get("backoffDuration"):
                policy["backoffDuration"] = f"{LOCAL_RETRY_BACKOFF_SECONDS}s"
    return rewritten


@dataclasses.dataclass
class _LocalRun:
    """One local run: its name, how it starts, and its mode (``faithful`` or ``in-process``)."""

    pipeline: str
    launch: Any
    mode: str

    def execute(
        self,
        arguments: dict[str, Any],
        state_dir: str | None,
        pipeline_root: str,
        settings: vertex_emulator.EmulatorSettings | None,
        console: step_console.StepConsole | None,
    ) -> results.LocalRunResult:
        in_process = self.mode == "in-process"
        root = str(pathlib.Path(pipeline_root).resolve())
        runner = local.SubprocessRunner(use_venv=not in_process)
        cluster_id = str(arguments.get("cluster_id", ""))
        with emulator_session.emulator_for_run(state_dir, settings, cluster_id) as state:
            before = len(vertex_emulator.read_journal(state)) if state else 0
            earlier_runs = results.run_dirs(pathlib.Path(pipeline_root), self.pipeline)
            local.init(
                runner, pipeline_root=root, raise_on_error=True, enable_caching=not in_process
            )
            start = time.monotonic()
            error = ""
            shown = step_console.capture(console) if console else contextlib.nullcontext()
            steps = contextlib.nullcontext() if in_process else step_envs.patched()
            on_stop = stopped_at_once.labelled_on_stop(arguments, own_emulator=state is not None)
            # The steps stop if this process is killed outright (core.step.watch_local_run).
            watched = _environment({step.LOCAL_RUN_PID_ENV: str(os.getpid())})
            with on_stop, watched, interrupts.forwarded() as interruption:
                if console:
                    console.cancelled = lambda: bool(interruption.signum)
                try:
                    with shown, steps, parameter_values.kept_as_given():
                        self.launch(arguments)
                except RuntimeError as exc:  # kfp.local raises RuntimeError when a task fails
                    error = str(exc)
            if interruption.signum:
                error = f"cancelled by {interruption.name}" + (f": {error}" if error else "")
            seconds = time.monotonic() - start
            entries = vertex_emulator.read_journal(state)[before:] if state else []
        calls = collections.Counter(results.classify_call(e) for e in entries)
        run_dir = results.newest_run(pathlib.Path(pipeline_root), self.pipeline, earlier_runs)
        return results.LocalRunResult(
            self.pipeline,
            not error,
            seconds,
            dict(calls),
            entries,
            state,
            error,
            results.task_outputs(run_dir),
            results.task_parameters(run_dir),
            str(run_dir or ""),
            self.mode,
            interruption.exit_code,
        )


@contextlib.contextmanager
def _environment(changes: dict[str, str]) -> Iterator[None]:
    """``changes`` in ``os.environ`` (which the step processes inherit) for the block."""
    previous = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def coerce_arguments(pipeline_func: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """Whole numbers given for ``float`` parameters become floats (``--param x=0`` reads 0).

    Raises:
        errors.UserError: A parameter the pipeline does not have, or one without a default that
            is not given (kfp.local would fail on it with "Unknown value type").
    """
    inputs = pipeline_func.component_spec.inputs or {}
    unknown = sorted(set(arguments) - set(inputs))
    if unknown:
        raise errors.UserError(
            f"unknown parameters {unknown}. Fix: use parameters of the pipeline: "
            f"{', '.join(sorted(inputs))}."
        )
    missing = sorted(
        name
        for name, spec in inputs.items()
        if name not in arguments and spec.default is None and not spec.optional
    )
    if missing:
        raise errors.UserError(
            f"missing parameters {missing}: the pipeline has no default for them. Fix: give "
            "each a value (`--param NAME=VALUE` with vsp run-local, or the arguments mapping)."
        )
    coerced = dict(arguments)
    for name, value in arguments.items():
        if inputs[name].type == "Float" and isinstance(value, int) and not isinstance(value, bool):
            coerced[name] = float(value)
    return coerced
