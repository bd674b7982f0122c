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

from vsp.components.runtime.core import gcp_labels

log = logging.getLogger(__name__)

MANUAL_PREFIX = "manual-"
# In a path parameter (``model_dir``), replaced by the run's identity: a folder per run from one
# value, as a schedule needs (its runs all get the same parameters).
RUN_TOKEN = "{run}"


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


def expand_run_token(path: str, pipeline_run: str) -> str:
    """``path`` with each ``{run}`` replaced by the run's identity as a label value
    (``gcp_labels.run_value``: letters, digits, ``-`` and ``_``; safe in a path), so that
    ``/gcs/b/model/{run}`` gives every run of a schedule a model folder of its own.

    Args:
        path: A path or ``gs://`` URI, with or without the token.
        pipeline_run: The run's identity (``ensure``'s result, never empty).
    """
    if RUN_TOKEN not in path:
        return path
    return path.replace(RUN_TOKEN, gcp_labels.run_value(pipeline_run))
