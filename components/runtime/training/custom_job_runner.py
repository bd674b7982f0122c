"""Entry point of the ``train_custom_job`` component: Spot CustomJobs with checkpoint resume.

Same supervisor, strategy, metrics and report as ``train_on_cluster``; only the backend differs.
"""

from __future__ import annotations

from typing import Any

from vsp.components.runtime.core import errors, rest, step
from vsp.components.runtime.training import custom_job_backend
from vsp.components.runtime.training import runner as training_step
from vsp.components.runtime.training.custom_job_spec import CustomJobTraining
from vsp.components.runtime.training.recovery import Target


def train_custom_job(
    *,
    project: str,
    location: str,
    training: CustomJobTraining,
    fallback_strategy: str = "STANDARD",
    max_preemptions: int = 20,
    max_user_failures: int = 0,
    fallback_after_preemptions: int = 0,
    capacity_wait_seconds: float = 0.0,
    run_key: str = "",
    pipeline_run: str = "",
    task_name: str = "",
    **supervise_options: Any,
) -> training_step.TrainOutcome:
    """Trains with Spot CustomJobs until one succeeds; see ``training_run``.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region.
        training: The job spec (validated before any request).
        fallback_strategy: STANDARD or FLEX_START to fall back to ('' = stay on Spot).
        max_preemptions: Preemptions survived, in-place restarts included.
        max_user_failures: Restarts after the trainer itself failed.
        fallback_after_preemptions: Fall back after this many preemptions (0 = never).
        capacity_wait_seconds: Longest wait for Spot capacity (0 = no limit).
        run_key: Identity of the run's jobs ('' = from the pipeline run).
        pipeline_run: Pipeline run name (also labelled on every job for the exit task).
        task_name: The pipeline task's name (part of the derived run key).
        **supervise_options: Passed to ``training_step.supervise``.
    """
    training.validate()
    if fallback_strategy not in ("", "STANDARD", "FLEX_START"):
        raise errors.UserError(
            f"fallback_strategy = {fallback_strategy!r} is not STANDARD, FLEX_START or ''. "
            "Fix: use STANDARD (on-demand) or FLEX_START (DWS), or '' to stay on Spot."
        )
    targets = [Target("SPOT", spot=True)]
    if fallback_strategy:
        targets.append(Target(fallback_strategy, spot=False))
    strategy = training_step.spot_strategy(
        targets,
        max_preemptions=max_preemptions,
        max_user_failures=max_user_failures,
        fallback_after_preemptions=fallback_after_preemptions,
        capacity_wait_seconds=capacity_wait_seconds,
    )
    backend = custom_job_backend.CustomJobBackend(
        rest.VertexRestClient(location),
        f"projects/{project}/locations/{location}",
        training,
        pipeline_run=pipeline_run,
    )
    base = training.base_output_directory.rstrip("/")
    return training_step.supervise(
        backend,
        strategy,
        training_step.run_key_for(pipeline_run, training.display_name, run_key, task_name),
        checkpoint_dir=f"{base}/checkpoints",
        model_dir=f"{base}/model",
        **supervise_options,
    )


def finalize_custom_jobs(
    *, project: str, location: str, state: str, pipeline_run: str
) -> list[str]:
    """The exit task of a CustomJob pipeline: no job of a failed or cancelled run left running.

    After a cancel the training step normally cancels its job itself (SIGTERM), but a step
    killed outright, or a run that failed elsewhere while a job was queued, would leave it
    running on paid capacity. This finds every job of the pipeline run by its
    ``vsp-pipeline-run`` label (put on each attempt by ``train_custom_job``, whatever its task
    or run key) and cancels the unfinished ones.

    Args:
        project: Google Cloud project id.
        location: Vertex AI region.
        state: Final state of the run's group (``SUCCEEDED``, ``FAILED``, ``CANCELLED``).
        pipeline_run: Pipeline run name.

    Returns:
        Names of the jobs cancelled (none after a success).
    """
    if step.normalize_final_state(state) == "SUCCEEDED":
        return []
    if not pipeline_run:
        raise errors.UserError("pipeline_run is empty. Fix: pass the pipeline job name.")
    parent = f"projects/{project}/locations/{location}"
    return custom_job_backend.cancel_unfinished(
        rest.VertexRestClient(location), parent, pipeline_run
    )
