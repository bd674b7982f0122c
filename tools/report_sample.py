"""A realistic sample run report, for the screenshots in docs/ and the browser test.

One Spot training job on a Slurm cluster, preempted (and requeued in place) three times, each
time saving a checkpoint on the notice and resuming from it; periodic checkpoints in between; a
loss curve of 700 steps; then the teardown decision of an hourly pipeline (next run at the top
of the hour), which weighs keeping, shrinking and re-creating the cluster. Everything is
computed from fixed numbers with the runtime's own code (``training.metrics``,
``teardown.decision``) and the same page builders as ``vsp run-local`` (``run_summary``), so
the sample shows what a real report shows.
"""

from __future__ import annotations

import json
import math
import pathlib

from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import report as teardown_report
from vsp.components.runtime.trainer.history import Record
from vsp.components.runtime.training import metrics as training_metrics
from vsp.components.runtime.training import report as training_report
from vsp.components.runtime.training.backends.interface import RunResult
from vsp.components.runtime.training.recovery import Attempt, Target
from vsp.pipelines.local import results, summary

START = 1796389200.0  # 2026-12-04 13:00:00 UTC
STEPS_PER_SECOND = 1.0
SAVE_EVERY_STEPS = 60
NOTICE_SECONDS = 30.0
# (running from, requeued at) in seconds after START; the last stretch runs to the end.
STRETCHES = ((20.0, 210.0), (270.0, 450.0), (490.0, 640.0))
TOTAL_STEPS = 700
PREEMPTIONS = len(STRETCHES)


def _training() -> tuple[RunResult, list[Record], float]:
    """The run's events, its checkpoint history and its end (epoch s)."""
    events = [{"time": START, "job_id": "1", "event": "submitted"}]
    history: list[Record] = []
    step = 0
    for begin, requeued in STRETCHES:
        events.append({"time": START + begin, "job_id": "1", "event": "running"})
        history.append(Record("resume" if step else "start", START + begin, step, 0.0))
        notice = requeued - NOTICE_SECONDS
        for tick in range(1, int((notice - begin) * STEPS_PER_SECOND) + 1):
            step += 1
            if step % SAVE_EVERY_STEPS == 0:
                at = START + begin + tick / STEPS_PER_SECOND
                history.append(Record("save", at, step, 0.0, "periodic"))
        history.append(Record("save", START + notice, step, 0.0, "notice"))  # then stopped
        events.append({"time": START + requeued, "job_id": "1", "event": "requeued"})
        events.append({"time": START + requeued + 8, "job_id": "1", "event": "pending"})
    begin, resumed = 690.0, step
    events.append({"time": START + begin, "job_id": "1", "event": "running"})
    history.append(Record("resume", START + begin, step, 0.0))
    while step < TOTAL_STEPS:
        step += 1
        if step % SAVE_EVERY_STEPS == 0 or step == TOTAL_STEPS:
            at = START + begin + (step - resumed) / STEPS_PER_SECOND
            reason = "final" if step == TOTAL_STEPS else "periodic"
            history.append(Record("save", at, step, 0.0, reason))
    end = history[-1].time + 4
    events.append({"time": end, "job_id": "1", "event": "succeeded"})
    attempt = Attempt("1", Target("spot", True), Outcome.SUCCEEDED, requeues=PREEMPTIONS)
    return RunResult([attempt], end - START, events=events), history, end


def losses(steps: int = TOTAL_STEPS) -> list[float]:
    """A deterministic, slightly noisy decaying loss for steps 1..steps."""
    return [
        0.12 + 2.2 * math.exp(-s / 160.0) + 0.03 * math.sin(s * 0.7) * math.exp(-s / 400.0)
        for s in range(1, steps + 1)
    ]


def teardown_case(
    now: float,
) -> tuple[teardown_inputs.TeardownInputs, teardown_decision.TeardownDecision]:
    """The decision of an hourly pipeline at ``now``: next run at the top of the hour."""
    inputs = teardown_inputs.TeardownInputs(
        idle_price_per_hour=12.0,
        provisioning_minutes=20.0,
        provisioning_price_per_hour=12.0,
        delay_penalty_per_hour=10.0,
        schedule_cron="0 * * * *",
        now=now,
        shrunk_price_per_hour=0.5,
        scale_up_minutes=8.0,
    )
    return inputs, teardown_decision.decide(inputs)


def pages() -> dict[str, str]:
    """The sample's pages by file name: the training report, the teardown page, the run report.

    ``run-report.html`` is what ``vsp run-local`` writes: the summary on top of the other two.
    """
    result, history, end = _training()
    metrics = training_metrics.compute(
        result, prices=training_metrics.Prices(2.5, 8.0), history=history, now=end
    )
    training = training_report.html_report(
        "Training run vsp-vsplocal-slurm-spot-training-train-on-cluster",
        result,
        metrics,
        losses=losses(),
        history=history,
        now=end,
    )
    inputs, decision = teardown_case(end + 40.0)
    return {
        "training-report.html": training,
        "teardown-report.html": teardown_report.html_page(inputs, decision),
        "metrics.json": json.dumps(metrics),
        "decision.json": json.dumps(
            {"action": decision.action, "reason": decision.reason, "labels": _labels(decision)}
        ),
    }


def _labels(decision: teardown_decision.TeardownDecision) -> dict[str, str]:
    if decision.expires_at is None:
        return {}
    return {gcp_labels.EXPIRES_AT: gcp_labels.format_label_time(decision.expires_at)}


def write(folder: pathlib.Path) -> dict[str, pathlib.Path]:
    """Writes the sample pages into ``folder``; returns their paths by name (with the run report).

    Args:
        folder: Where to write (created if missing).
    """
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, text in pages().items():
        paths[name] = folder / name
        paths[name].write_text(text)
    decided = json.loads(paths["decision.json"].read_text())
    result = results.LocalRunResult(
        pipeline="slurm-spot-training",
        succeeded=True,
        seconds=1187.6,  # the whole pipeline: cluster creation, training, registration
        calls={"create cluster": 1, "POST callSlurmRestApi": 41, "GET operation": 6},
        journal=[],
        state_dir=None,
        outputs={
            "train-on-cluster/report": str(paths["training-report.html"]),
            "train-on-cluster/metrics": str(paths["metrics.json"]),
            "decide-teardown/report": str(paths["teardown-report.html"]),
        },
        parameters={
            "create-cluster": {
                "action": "created",
                "reused": False,
                "cluster_name": "projects/demo/locations/us-central1/"
                "modelDevelopmentClusters/vsplocal",
            },
            "register-model": {
                "model_resource_name": "projects/demo/locations/us-central1/models/"
                "slurm-spot-example@1"
            },
            "decide-teardown": decided,
        },
    )
    paths["run-report.html"] = folder / summary.REPORT_NAME
    paths["run-report.html"].write_text(summary.html_report(result))
    return paths
