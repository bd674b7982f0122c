"""The ``finalize_custom_jobs`` step: the exit task of a CustomJob pipeline.

``main`` is the component's entry; ``finalize_custom_jobs`` the same work for callers in Python.
"""

from __future__ import annotations

from typing import Any

from vsp.components.runtime.core import errors, rest, step
from vsp.components.runtime.training.backends import custom_job


def main(*, project: str, location: str, status: Any, pipeline_run: str) -> list[str]:
    """The component's entry: its parameters in, its output out (see the component)."""
    return step.run_step(
        "finalize_custom_jobs",
        lambda: finalize_custom_jobs(
            project=project, location=location, state=status.state, pipeline_run=pipeline_run
        ),
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
        raise errors.UserError(
            "pipeline_run is empty. Fix: pass the run's unique id, dsl.PIPELINE_JOB_ID_PLACEHOLDER."
        )
    parent = f"projects/{project}/locations/{location}"
    return custom_job.cancel_unfinished(rest.VertexRestClient(location), parent, pipeline_run)
