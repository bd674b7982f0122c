"""What every training step does around its backend: supervise, then metrics and the report.

Backend-agnostic: the Slurm entry (``train_step``) and the CustomJob entry (``custom_job_step``)
both build a backend and a strategy and call ``supervise``; neither imports the other, so each
component embeds only its own backend. The report and metrics are written also when the run
fails, so a failed step still shows what happened.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import html
import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from vsp.components.runtime.core import (
    errors,
    gcp_labels,
    gcs_paths,
    polling,
    step,
)
from vsp.components.runtime.trainer import history, manifests
from vsp.components.runtime.training import (
    hang,
    model_check,
    poll_plan,
    recovery,
    report,
    storage_reads,
    supervisor,
)
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training.backends import interface
from vsp.components.runtime.training.progress_feed import ProgressFeed

log = logging.getLogger(__name__)


@dataclasses.dataclass
class TrainOutcome:
    """What ``train_on_cluster`` returns to the component.

    Attributes:
        result: The run (all attempts and the timeline).
        metrics: Flat metrics for KFP.
        report_html: The HTML report.
    """

    result: interface.RunResult
    metrics: dict[str, float]
    report_html: str


MAX_RUN_KEY = 120


def run_key_for(pipeline_run: str, scope: str, explicit: str = "", task: str = "") -> str:
    """The run key: given, or derived from the pipeline run and the task (stable across retries).

    The pipelines pass the run's unique id and the task's unique id (kfp's
    ``PIPELINE_JOB_ID_PLACEHOLDER`` and ``PIPELINE_TASK_ID_PLACEHOLDER``), so two runs of one
    template, two training tasks of one run and the iterations of a ``dsl.ParallelFor`` each
    get their own key, while a retry of the same task gets the same one. Each part is a
    ``gcp_labels.unique_value`` (a long part keeps a hash of the whole), and a key longer than
    ``MAX_RUN_KEY`` keeps a hash of the whole key, so keys that share a long prefix stay
    distinct.

    Args:
        pipeline_run: The pipeline run's identity; must not be empty (see
            ``run_identity.ensure``).
        scope: The cluster id, or the CustomJob display name.
        explicit: A run key given by the user; used as is.
        task: The pipeline task's unique id ('' = none).

    Raises:
        ValueError: No key was given and ``pipeline_run`` is empty.
    """
    if explicit:
        return explicit
    if not pipeline_run:
        raise ValueError("a derived run key needs the pipeline run (run_identity.ensure)")
    parts = [scope, gcp_labels.run_value(pipeline_run), gcp_labels.run_value(task)]
    key = "vsp-" + "-".join(p for p in parts if p)
    if len(key) <= MAX_RUN_KEY:
        return key
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"{key[: MAX_RUN_KEY - 13]}-{digest}"


# Slurm's start times are whole seconds; a trainer's first line is never earlier than this
# before the start its job reports.
HISTORY_SLACK_SECONDS = 1.0


def own_records(
    records: list[history.Record] | None, events: list[dict[str, Any]]
) -> list[history.Record] | None:
    """The lines of the checkpoint history that this run's jobs wrote.

    A checkpoint folder may continue another task's (pretraining, then fine-tuning from its
    final checkpoint): its history then starts with the other task's processes. They are not
    this run's, so they count neither in its billed time nor in its goodput: only the lines
    from this run's first job event on (less ``HISTORY_SLACK_SECONDS``) are kept.

    Args:
        records: The folder's history (None: not visible).
        events: The run's event timeline (``RunResult.events``), re-attached attempts included.
    """
    if not records or not events:
        return records
    first = min(float(e["time"]) for e in events) - HISTORY_SLACK_SECONDS
    mine = [r for r in records if r.time >= first]
    if len(mine) < len(records):
        log.info(
            "checkpoint history: %d lines of earlier tasks left out (before this run's first job)",
            len(records) - len(mine),
        )
        resumed = next((r.step for r in mine if r.event in history.START_EVENTS), None)
        if resumed:
            log.warning(
                "this run continued the checkpoints an earlier task or run left in its "
                "checkpoint_dir: its first process resumed from step %d. Right for a chain "
                "(fine-tuning a pretraining); for a run meant to start from step 0 (each run of "
                "a schedule), give checkpoint_dir a {run} (a folder per run) or leave it '' "
                "(a folder per run beside model_dir)",
                resumed,
            )
    return mine


def saved_nothing(checkpoint_dir: str, visible: bool) -> bool:
    """Whether the trainer is known to have saved no checkpoint: the directory is on Cloud
    Storage, which this step sees, and is not there (on the cluster's own storage it may be)."""
    return not visible and gcs_paths.to_gcs_uri(checkpoint_dir) is not None


def unknown_goodput_note(
    checkpoint_dir: str, visible: bool = False, cancelled: bool = False, failed: bool = False
) -> str:
    """Why goodput and its overheads are missing, and how to get them.

    Args:
        checkpoint_dir: The run's checkpoint directory.
        visible: Whether this step sees that directory (and it exists).
        cancelled: The run was cancelled: with no checkpoint saved yet, nothing is wrong
            with the trainer, and no fix is named.
        failed: The run failed: with no checkpoint saved yet, the failure is the thing to fix
            (its own message says how), and no other fix is named.
    """
    if (cancelled or failed) and saved_nothing(checkpoint_dir, visible):
        return (
            f"unknown: the run {'was cancelled' if cancelled else 'failed'} before the trainer "
            "saved its first checkpoint, so there is no checkpoint history to read."
        )
    if visible:
        return (
            f"unknown: {checkpoint_dir} has no {history.HISTORY_FILE} with the "
            "trainer's start lines. Fix: load with checkpoint.resume() and save with "
            "checkpoint.save(..., reason=...) (vsp.components.runtime.trainer)."
        )
    if saved_nothing(checkpoint_dir, visible):
        return (
            f"unknown: the checkpoint directory {checkpoint_dir} does not exist: the trainer "
            "saved no checkpoint there (it ended before its first save, or saves elsewhere), "
            "so there is no checkpoint history to read. Fix: save with checkpoint.save(..., "
            "reason=...) into $VSP_CHECKPOINT_DIR (vsp.components.runtime.trainer)."
        )
    return (
        f"unknown: the checkpoint directory {checkpoint_dir} is not visible from this step (it "
        "is on the cluster's own storage), so the checkpoint history cannot be read. "
        "Put checkpoint_dir on Cloud Storage (gs://BUCKET/PATH, which the cluster sees as "
        "/gcs/BUCKET/PATH) to measure them."
    )


def _trainer_metrics(model_dir: str) -> dict[str, Any]:
    path = os.path.join(gcs_paths.to_local_path(model_dir), "metrics.json")
    try:
        with open(path) as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _losses(model_dir: str) -> list[float]:
    try:
        return [float(v) for v in _trainer_metrics(model_dir).get("loss_history", [])]
    except (ValueError, TypeError):
        return []


def checkpoint_policy_text(model_dir: str) -> str:
    """The trainer's own explanation of its checkpoint interval (``checkpoint_policy`` in its
    ``metrics.json``), or "" when it wrote none."""
    text = _trainer_metrics(model_dir).get("checkpoint_policy", "")
    return text if isinstance(text, str) else ""


def supervise(
    backend: interface.TrainingBackend,
    strategy: recovery.RecoveryStrategy,
    run_key: str,
    *,
    checkpoint_dir: str,
    model_dir: str,
    prices: training_metrics.Prices | None = None,
    timeout_seconds: float | None = None,
    gcp_resources_path: str = "",
    poll_backoff: polling.Backoff = supervisor.DEFAULT_BACKOFF,
    poll_settings: poll_plan.PlanSettings | None = None,
    write_report: Callable[[str], None] | None = None,
    report_notes: Sequence[tuple[str, str]] = (),
    hang_rule: hang.HangRule | None = None,
    keep_job_on_timeout: bool = False,
    progress_feed: ProgressFeed | None = None,
    on_success: Callable[[], None] | None = None,
) -> TrainOutcome:
    """Runs the supervisor on any backend, then writes metrics and the report (also on failure).

    ``report_notes`` are (heading, plain text) sections the report shows first among its notes
    (the staged code's digest, ...).

    The metrics include ``vertex_calls``, ``storage_calls`` (Cloud Storage reads) and
    ``api_calls`` (both), each also per job-hour the step supervised the run
    (``metrics.call_metrics``); ``poll_settings`` lets a backend that writes beacons call
    Vertex only when the beacon asks for it (``poll_plan``). ``hang_rule`` cancels and resubmits an
    attempt whose trainer stopped making step progress (``hang``); at ``timeout_seconds`` the
    running attempt is cancelled unless ``keep_job_on_timeout``. With ``progress_feed`` the
    run's subscription is opened before the first submit and deleted at the end, and polls wait
    on its pulls (``progress_feed``); its calls are the ``pubsub_calls`` metric. ``on_success``
    runs once the run has succeeded, before the metrics, so that its calls are counted too.

    Raises:
        errors.UserError: The trainer failed beyond its restart budget.
        errors.TransientError: Preemption budget or capacity exhausted.
        errors.StepCancelled: The step was cancelled (its jobs were cancelled first).
    """
    log.info("run key %s; checkpoints in %s", run_key, checkpoint_dir)
    loop = supervisor.TrainingSupervisor(
        backend,
        strategy,
        run_key,
        gcp_resources_path=gcp_resources_path,
        timeout=timeout_seconds,
        backoff=poll_backoff,
        poll_settings=poll_settings,
        hang_rule=hang_rule,
        keep_job_on_timeout=keep_job_on_timeout,
        progress_feed=progress_feed,
    )
    failure: BaseException | None = None
    began = loop.clock.now()
    ended: tuple[float, float] | None = None  # (clock, wall) before on_success
    try:
        if progress_feed is not None:
            progress_feed.open()
        result = loop.run()
    except (errors.VspError, errors.StepCancelled) as exc:
        failure = exc
        result = interface.RunResult(
            loop.attempts,
            0.0,
            events=list(loop.events),
            vertex_calls=loop.vertex_calls(),
            storage_calls=loop.storage_calls(),
            observations=list(loop.observations),
            pubsub_calls=loop.pubsub_calls(),
        )
    else:
        problem = model_check.missing_model_problem(model_dir) or (
            model_check.foreign_model_problem(model_dir, run_key)
        )
        if problem:  # nothing to register: fail before the registration step runs
            failure = errors.UserError(problem)  # raised, and so logged, once the report is out
        elif unregistrable := model_check.unregistrable_problem(model_dir):
            log.warning("%s", unregistrable)  # this step's work is done; the next one refuses
        if on_success is not None and failure is None:
            ended = (loop.clock.now(), time.time())  # the run's times end here, not after it
            on_success()
            result = dataclasses.replace(result, vertex_calls=loop.vertex_calls())
    finally:
        if progress_feed is not None:
            progress_feed.close()
    supervised = (ended[0] if ended else loop.clock.now()) - began
    visible = manifests.checkpoints_visible(checkpoint_dir)
    records = own_records(history.read(checkpoint_dir) if visible else None, result.events)
    now = ended[1] if ended else time.time()
    metrics = training_metrics.compute(
        result, prices=prices or training_metrics.Prices(), history=records, now=now
    )
    metrics.update(
        training_metrics.call_metrics(
            result.vertex_calls, supervised, result.storage_calls, loop.pubsub_calls()
        )
    )
    losses = _losses(model_dir)
    if losses:
        metrics["final_loss"] = losses[-1]
    notes = [(heading, html.escape(text)) for heading, text in report_notes]
    if "goodput" not in metrics and result.events:
        cancelled = isinstance(failure, errors.StepCancelled)
        note = unknown_goodput_note(
            checkpoint_dir, visible, cancelled=cancelled, failed=failure is not None
        )
        # Before a first checkpoint, the run's failure is the news, not the goodput.
        quiet = failure is not None and saved_nothing(checkpoint_dir, visible)
        level = logging.INFO if quiet else logging.WARNING
        log.log(level, "goodput %s", note)  # "goodput unknown: ..."
        notes.append(("Goodput", html.escape(note)))
    elif "goodput" not in metrics:  # nothing ran: the failure says why
        notes.append(("Goodput", "unknown: no job of this run started."))
    policy_text = checkpoint_policy_text(model_dir)
    if policy_text:
        log.info("checkpoint policy: %s", policy_text)
        notes.append(("Checkpoint policy", html.escape(policy_text)))
    title = f"Training run {run_key}" + (" (failed)" if failure else "")
    page = report.html_report(
        title,
        result,
        metrics,
        losses=losses,
        history=records,
        extra_sections=notes,
        now=now,
    )
    log.info("\n%s", report.markdown(title, result, metrics))
    if write_report is not None:
        write_report(page)
    if failure is not None:
        raise failure
    return TrainOutcome(result, metrics, page)


def spot_strategy(
    targets: list[recovery.Target],
    *,
    max_preemptions: int,
    max_user_failures: int,
    fallback_after_preemptions: int,
    capacity_wait_seconds: float,
    max_hangs: int = 1,
) -> recovery.SpotRecovery:
    """The Spot recovery strategy over ``targets`` (Spot first, optional fallback second)."""
    return recovery.SpotRecovery(
        primary=targets[0],
        fallback=targets[1] if len(targets) > 1 else None,
        max_preemptions=max_preemptions,
        max_user_failures=max_user_failures,
        fallback_after=fallback_after_preemptions,
        capacity_wait_seconds=capacity_wait_seconds,
        max_hangs=max_hangs,
    )


def write_text(path: str) -> Callable[[str], None]:
    """A ``write_report`` callback writing to ``path`` (folders created)."""
    return functools.partial(step.write_file, path)


def component_options(
    *,
    spot_price: float,
    ondemand_price: float,
    poll_seconds: float,
    timeout_seconds: float,
    gcp_resources_path: str,
    report_path: str,
) -> dict[str, Any]:
    """The ``supervise`` options a training component passes, from its flat parameters."""
    return {
        "prices": training_metrics.Prices(spot_price, ondemand_price),
        "timeout_seconds": timeout_seconds,
        "gcp_resources_path": gcp_resources_path,
        "poll_backoff": polling.Backoff(initial=min(2.0, poll_seconds), maximum=poll_seconds),
        "poll_settings": poll_plan.PlanSettings.for_poll_seconds(
            poll_seconds, storage_reads.mount_cache_seconds()
        ),
        "write_report": write_text(report_path),
    }


def publish_metrics(outcome: TrainOutcome, metrics_artifact: Any) -> None:
    """Logs the metrics on a KFP ``Metrics`` artifact and writes them into its file as JSON."""
    step.publish_metrics(metrics_artifact, outcome.metrics)
