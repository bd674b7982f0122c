"""Execution caching and task retries of every task in our pipelines, decided in one place.

**Caching.** Vertex AI Pipelines skips a task whose component and inputs match an earlier
successful execution and reuses its outputs. Every task here but one acts on the world (creates,
trains, registers, decides from live state, labels, deletes, cancels, reaps), and a scheduled
pipeline passes the same inputs every time: with caching on, the second identical run would
skip ``decide-teardown`` and ``delete-cluster`` and leave a GPU cluster running with no expiry.
So caching is off for every task with a side effect or a live read; only the pure parameter
check (its output depends on its inputs alone) stays cacheable.

**Retries.** A task retry re-runs the step in a new container. Steps that look up their resource
before acting (create re-attaches to its recorded operation, register finds the version labelled
with the run, keep, shrink and delete and the exit tasks are idempotent) are retried, so a lost
pod or an outage longer than a step's own backoff does not end the run or leave a cluster
behind. The
training steps are not: they fail only when a budget (preemptions, trainer failures, capacity
wait) is spent or on a user error, and a retry would re-open those budgets; retrying the run
from the Vertex console resumes training from the checkpoint when that is wanted. The pure
parameter check is not retried either: its failures are the user's input.
"""

from __future__ import annotations

from typing import Any

CACHEABLE = frozenset({"check-run-parameters"})
RETRIED = frozenset(
    {
        "create-cluster",
        "decide-teardown",
        "delete-cluster",
        "ensure-slurm-account",
        "finalize-cluster",
        "finalize-custom-jobs",
        "keep-cluster",
        "reap-expired-clusters",
        "register-model",
        "shrink-cluster",
    }
)
RETRY = {"num_retries": 2, "backoff_duration": "10s", "backoff_factor": 3.0}


def component_name(task: Any) -> str:
    """The task's component name as compiled, e.g. ``create-cluster``."""
    return task.component_spec.name.replace("_", "-")


def apply(task: Any, display_name: str = "") -> Any:
    """Sets the display name, the caching option and the retry policy of a task.

    Args:
        task: A ``PipelineTask`` of one of our components.
        display_name: Name shown in the Vertex UI ('' = leave kfp's).

    Returns:
        The task, for chaining.
    """
    name = component_name(task)
    if display_name:
        task.set_display_name(display_name)
    task.set_caching_options(name in CACHEABLE)
    if name in RETRIED:
        task.set_retry(**RETRY)
    return task
