"""Which pipeline run a step belongs to: the run's unique id, or a fresh one outside a pipeline.

Every resource a run makes (Slurm jobs, CustomJobs, checkpoint folders, model versions) is
found again by the run's identity, so that a retried step re-attaches to its own work. An empty
identity would make every call outside a pipeline (and every pipeline that forgot to pass the
placeholder) one and the same run, each adopting the previous one's finished job, checkpoint
and model version; so an empty ``pipeline_run`` gets a fresh identity instead, and the step
says so: such a call never re-attaches to an earlier one.
"""

from __future__ import annotations

import logging
import uuid

log = logging.getLogger(__name__)

MANUAL_PREFIX = "manual-"


def ensure(pipeline_run: str, what: str) -> str:
    """``pipeline_run``, or a fresh ``manual-<12 hex digits>`` identity when it is empty.

    Args:
        pipeline_run: The run's identity as passed to the component ('' outside a pipeline).
        what: The step, for the log line (``train_on_cluster``).
    """
    if (pipeline_run or "").strip():
        return pipeline_run
    fresh = f"{MANUAL_PREFIX}{uuid.uuid4().hex[:12]}"
    log.warning(
        "%s: pipeline_run is empty, so this call is a new run %s that re-attaches to nothing "
        "earlier. Fix (in a pipeline): pass pipeline_run=dsl.PIPELINE_JOB_ID_PLACEHOLDER.",
        what,
        fresh,
    )
    return fresh
