"""The ``train_custom_job`` step: Spot CustomJobs with checkpoint resume.

Same supervisor, strategy, metrics and report as ``train_on_cluster``; only the backend differs.
``main`` is the component's entry; ``train_custom_job`` the same work from a typed spec.
"""

from __future__ import annotations

from typing import Any

from vsp.components.runtime.core import errors, param_rules, rest, run_identity, step
from vsp.components.runtime.training import driver
from vsp.components.runtime.training.backends import custom_job
from vsp.components.runtime.training.backends.custom_job_spec import CustomJobTraining
from vsp.components.runtime.training.recovery import Target

# The component's parameters that make the CustomJob (``CustomJobTraining``), as is.
JOB_PARAMETERS = (
    "display_name", "base_output_directory", "machine_type", "accelerator_type",
    "accelerator_count", "replica_count", "boot_disk_type", "boot_disk_size_gb",
    "container_image", "executor_image", "python_module", "service_account",
    "restart_job_on_worker_restart", "max_wait_seconds",
)  # fmt: skip


def main(
    *,
    project: str,
    location: str,
    gcp_resources: str,
    metrics: Any,
    report: Any,
    command: list,
    args: list,
    env: dict,
    package_uris: list,
    labels: dict,
    attempt_timeout_seconds: float,
    fallback_strategy: str,
    max_preemptions: int,
    max_user_failures: int,
    fallback_after_preemptions: int,
    capacity_wait_seconds: float,
    spot_price_per_node_hour: float,
    ondemand_price_per_node_hour: float,
    timeout_seconds: float,
    poll_seconds: float,
    run_key: str,
    pipeline_run: str,
    task_id: str,
    **job: Any,
) -> tuple[list, str, str, int]:
    """The component's entry: its parameters in, its outputs out (see the component).

    Returns:
        ``(job_ids, checkpoint_dir, model_dir, preemptions)``.
    """
    unknown = sorted(set(job) - set(JOB_PARAMETERS))
    if unknown:
        raise TypeError(f"train_custom_job has no parameters {unknown}")
    given = {"command": command, "args": args, "env": env, "package_uris": package_uris}
    given |= {"labels": labels, **job}
    step.run_step("train_custom_job", lambda: param_rules.check("train_custom_job", given))
    pipeline_run = run_identity.ensure(pipeline_run, "train_custom_job")
    base = job.get("base_output_directory")
    if isinstance(base, str):  # {run}: a folder per run, so a schedule's runs never chain
        job["base_output_directory"] = run_identity.expand_run_token(base, pipeline_run)
    training = CustomJobTraining(
        **job,
        command=[str(c) for c in command],
        args=[str(a) for a in args],
        env={str(k): str(v) for k, v in env.items()},
        package_uris=[str(u) for u in package_uris],
        timeout_seconds=attempt_timeout_seconds,
        labels={str(k): str(v) for k, v in labels.items()},
    )
    report.metadata["title"] = "Spot training report"
    outcome = step.run_step(
        "train_custom_job",
        lambda: train_custom_job(
            project=project,
            location=location,
            training=training,
            fallback_strategy=fallback_strategy,
            max_preemptions=max_preemptions,
            max_user_failures=max_user_failures,
            fallback_after_preemptions=fallback_after_preemptions,
            capacity_wait_seconds=capacity_wait_seconds,
            run_key=run_key,
            pipeline_run=pipeline_run,
            task_id=task_id,
            **driver.component_options(
                spot_price=spot_price_per_node_hour,
                ondemand_price=ondemand_price_per_node_hour,
                poll_seconds=poll_seconds,
                timeout_seconds=timeout_seconds,
                gcp_resources_path=gcp_resources,
                report_path=report.path,
            ),
        ),
    )
    driver.publish_metrics(outcome, metrics)
    base = training.base_output_directory.rstrip("/")
    result = outcome.result
    return (result.job_ids, f"{base}/checkpoints/", f"{base}/model/", result.preemptions)


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
    task_id: str = "",
    **supervise_options: Any,
) -> driver.TrainOutcome:
    """Trains with Spot CustomJobs until one succeeds; see ``driver.supervise``.

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
        pipeline_run: The pipeline run's unique id (also labelled on every job for the exit
            task); '' = a fresh identity.
        task_id: The pipeline task's unique id (part of the derived run key).
        **supervise_options: Passed to ``driver.supervise``.
    """
    training.validate()
    pipeline_run = run_identity.ensure(pipeline_run, "train_custom_job")
    if fallback_strategy not in ("", "STANDARD", "FLEX_START"):
        raise errors.UserError(
            f"fallback_strategy = {fallback_strategy!r} is not STANDARD, FLEX_START or ''. "
            "Fix: use STANDARD (on-demand) or FLEX_START (DWS), or '' to stay on Spot."
        )
    targets = [Target("SPOT", spot=True)]
    if fallback_strategy:
        targets.append(Target(fallback_strategy, spot=False))
    strategy = driver.spot_strategy(
        targets,
        max_preemptions=max_preemptions,
        max_user_failures=max_user_failures,
        fallback_after_preemptions=fallback_after_preemptions,
        capacity_wait_seconds=capacity_wait_seconds,
    )
    backend = custom_job.CustomJobBackend(
        rest.VertexRestClient(location),
        f"projects/{project}/locations/{location}",
        training,
        pipeline_run=pipeline_run,
    )
    base = training.base_output_directory.rstrip("/")
    return driver.supervise(
        backend,
        strategy,
        driver.run_key_for(pipeline_run, training.display_name, run_key, task_id),
        checkpoint_dir=f"{base}/checkpoints",
        model_dir=f"{base}/model",
        **supervise_options,
    )
