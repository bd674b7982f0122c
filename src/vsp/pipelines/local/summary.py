"""What a local run did, in a few lines and one HTML page.

Reads the task outputs kfp.local left (output parameters, Metrics files, HTML reports) and
the emulator journal counts of a ``LocalRunResult``: whether the cluster was created or reused,
the preemptions survived, the model version registered, the teardown decision and why. The
HTML report puts the run summary on top of the training report (timeline, loss curve) and the
teardown decision (the cost of both choices).
"""

from __future__ import annotations

import html
import json
import pathlib
import re
from typing import Any

from vsp.components.runtime.core import gcp_labels, money, readable_time
from vsp.components.runtime.training import job_logs
from vsp.pipelines.local import results

_BODY = re.compile(r"<body>(.*)</body>", re.DOTALL)
REPORT_NAME = "run-report.html"


def _metrics(result: results.LocalRunResult, task: str) -> dict[str, float]:
    path = result.outputs.get(f"{task}/metrics")
    if not path:
        return {}
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError):
        return {}


def facts(result: results.LocalRunResult) -> list[tuple[str, str]]:
    """The run's outcome as (what, value) pairs, only for the steps that ran."""
    params = result.parameters
    rows: list[tuple[str, str]] = []
    create = params.get("create-cluster")
    if create:
        how = create.get("action", "")
        if create.get("reused"):
            how = "reused (shrunk, scaled back up)" if how == "scaled_up" else "reused (warm)"
        rows.append(("cluster", f"{how}: {create.get('cluster_name', '')}"))
    train = _metrics(result, "train-on-cluster") or _metrics(result, "train-custom-job")
    if train:
        rows.append(
            (
                "preemptions survived",
                f"{train.get('preemptions', 0):g} "
                f"(resubmissions {train.get('resubmissions', 0):g}, "
                f"goodput {_goodput(train)}, cost {money.amount(train.get('cost', 0), 4)})",
            )
        )
        if train.get("interruptions_without_notice_save"):
            landed = train.get("notice_saves_landed", 0)
            rows.append(
                (
                    "notice saves",
                    f"{landed:g} landed; "
                    f"{train['interruptions_without_notice_save']:g} interruption(s) resumed "
                    "from an older checkpoint (no notice, or a notice save that did not land "
                    "in time: the work since the last save was lost)"
                    + (
                        "; with none landed, check that the trainer saves when told (SIGTERM): "
                        "docs/trainer-contract.md, 'Saving on the notice'"
                        if not landed
                        else ""
                    ),
                )
            )
        if "final_loss" in train:
            rows.append(("final loss", f"{train['final_loss']:.6g}"))
    trained = params.get("train-on-cluster") or params.get("train-custom-job") or {}
    if trained.get("model_dir"):
        rows.append(("model files", str(trained["model_dir"])))
    if trained.get("checkpoint_dir"):
        rows.append(("checkpoints", str(trained["checkpoint_dir"])))
    register = params.get("register-model")
    if register:
        again = " (already registered by this run)" if register.get("reused") else ""
        rows.append(("model version", f"{register.get('model_resource_name', '')}{again}"))
    decide = params.get("decide-teardown")
    if decide:
        what, _, costs = str(decide.get("summary") or decide.get("action", "")).partition("\n")
        rows.append(("teardown", what))
        if costs:
            rows.append(("teardown costs", costs.removeprefix("costs: ")))
        labels = decide.get("labels") or {}
        shrink_step = params.get("shrink-cluster") or {}
        kept_whole = shrink_step.get("Output") == "kept whole"  # the step's, not the decision's
        if labels.get(gcp_labels.EXPIRES_AT) and not kept_whole:
            what = "shrunk until" if decide.get("action") == "shrink" else "kept until"
            expires = gcp_labels.parse_timestamp(labels[gcp_labels.EXPIRES_AT]).timestamp()
            rows.append((what, f"{readable_time.utc(expires)}, then reaped"))
    deleted = params.get("delete-cluster")
    if deleted and deleted.get("Output") is False:  # the decision was delete, the step declined
        rows.append(
            (
                "cluster after the run",
                "not deleted: already gone, or in use by another run (the delete-cluster log "
                "names the users; it is labelled with an expiry for the reaper)",
            )
        )
    shrink = params.get("shrink-cluster")
    if shrink:
        pools = str(shrink.get("Output", ""))
        if pools == "kept whole":
            pools += (
                ": another run uses the cluster; labelled in use for 30 min, and that run's "
                "teardown decides (the shrink-cluster log names it)"
            )
        rows.append(("gpu pools", pools))
    reap = params.get("reap-expired-clusters")
    if reap:
        reaped = reap.get("Output") or []
        rows.append(("clusters reaped", ", ".join(reaped) if reaped else "none expired"))
    finalize = params.get("finalize-cluster")
    # "none" after a success: the decision acted; after a failure: the run never used it.
    if (
        finalize
        and finalize.get("action")
        and (finalize["action"] != "none" or not result.succeeded)
    ):
        rows.append(("cluster after the run", str(finalize.get("summary") or finalize["action"])))
        if finalize["action"] == "kept" and result.state_dir:
            rows.append(("locally", _local_kept_note(result.state_dir)))
    return rows


def _local_kept_note(state_dir: str) -> str:
    """How a cluster kept by a local run is reached: its emulator stopped with the run, so the
    exit task's `vsp clusters delete` needs the emulator started again on the folder."""
    return (
        "the emulator stopped with this run and keeps the cluster in its folder: the next run "
        "there reuses it, `vsp run-local reap-expired-clusters` deletes it once expired, and to "
        f"delete it now start the emulator on the folder (`vsp emulator start --state-dir "
        f"{state_dir}`), set VERTEX_EMULATOR_HOST to the address it prints, then run the "
        "`vsp clusters delete` above"
    )


def _body(path: str | None) -> str:
    if not path:
        return ""
    try:
        text = pathlib.Path(path).read_text()
    except OSError:
        return ""
    match = _BODY.search(text)
    return match.group(1) if match else ""


def _table(rows: list[tuple[str, str]]) -> str:
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{cells}</table>"


def trainer_logs(
    result: results.LocalRunResult, arguments: dict[str, Any]
) -> list[tuple[str, str]]:
    """``(job id, log file)`` of each Slurm training job, when the logs go to a known folder
    (the run's own: a job's file there is ``slurm-JOBID-RUNKEY.out``, ``job_logs.FILE_PATTERN``,
    and the run key is the step's, so the one file of the job's id is its log)."""
    training = arguments.get("training_options") or {}
    folder = str(arguments.get("log_directory") or training.get("log_directory") or "")
    jobs = (result.parameters.get("train-on-cluster") or {}).get("job_ids") or []
    if not folder:
        return []
    local = pathlib.Path(folder)
    found = []
    for job in jobs:
        named = sorted(local.glob(job_logs.file_path(job_logs.FILE_PATTERN, str(job), "*")))
        found.append((str(job), str(named[-1]) if named else ""))
    return [(job, path) for job, path in found if path]


def html_report(
    result: results.LocalRunResult,
    arguments: dict[str, Any] | None = None,
    durations: dict[str, float] | None = None,
) -> str:
    """One self-contained page: the summary, the trainer logs, the steps and their durations,
    the run's parameters, the training report and the teardown decision.

    Args:
        result: The run.
        arguments: The run's parameters (a table, and the trainer logs' folder).
        durations: Seconds each task took, by task (the console's record).
    """
    state = "SUCCEEDED" if result.succeeded else "FAILED"
    sections = [_table(facts(result))]
    logs = trainer_logs(result, arguments or {})
    if logs:
        links = "".join(
            f"<li>job {html.escape(job)}: <a href='file://{html.escape(path)}'>"
            f"{html.escape(path)}</a></li>"
            for job, path in logs
        )
        sections.append(f"<h2>Trainer logs</h2><ul>{links}</ul>")
    if durations:
        rows = [(task, readable_time.duration(seconds)) for task, seconds in durations.items()]
        sections.append("<h2>Steps</h2>" + _table(rows))
    if arguments:
        rows = [(name, json.dumps(value)) for name, value in sorted(arguments.items())]
        sections.append("<h2>Run parameters</h2>" + _table(rows))
    calls = [(call, str(count)) for call, count in sorted(result.calls.items())]
    training = _body(result.outputs.get("train-on-cluster/report")) or _body(
        result.outputs.get("train-custom-job/report")
    )
    teardown = _body(result.outputs.get("decide-teardown/report"))
    style = (
        "body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;padding:2px 6px;"
        "text-align:left}"
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(result.pipeline)} run</title><style>{style}</style></head><body>"
        f"<h1>{html.escape(result.pipeline)}: {state} in "
        f"{readable_time.duration(result.seconds)}</h1>{''.join(sections)}"
        f"{training}{teardown}<h2>Requests to Vertex AI</h2>{_table(calls)}"
        "</body></html>\n"
    )


def write_report(
    result: results.LocalRunResult,
    arguments: dict[str, Any] | None = None,
    durations: dict[str, float] | None = None,
) -> str:
    """Writes the page into the run's output folder; returns its path ('' without a folder)."""
    if not result.run_dir:
        return ""
    path = pathlib.Path(result.run_dir) / REPORT_NAME
    path.write_text(html_report(result, arguments, durations))
    return str(path)


def summary_lines(result: results.LocalRunResult) -> list[str]:
    """The facts as indented lines for the terminal."""
    return [f"  {what}: {value}" for what, value in facts(result)]


def terminal_lines(
    result: results.LocalRunResult,
    *,
    preemptions: int,
    arguments: dict | None = None,
    show_arguments: bool = False,
    durations: dict[str, float] | None = None,
    log_path: str = "",
) -> list[str]:
    """What ``vsp run-local`` prints once a run ends; writes the HTML report on the way.

    Args:
        result: The run.
        preemptions: Spot preemptions the emulator was told to inject.
        arguments: The run's parameters, for the report (and printed with ``show_arguments``).
        show_arguments: List the parameters here too (the verbose view).
        durations: Seconds each task took, for the report.
        log_path: The file holding the run's full output, named when given.
    """
    state = "SUCCEEDED" if result.succeeded else "FAILED"
    mode = "faithful: compiled template" if result.mode == "faithful" else "in-process"
    lines = [f"pipeline {result.pipeline}: {state} in {result.seconds:.1f} s ({mode})"]
    if arguments is not None and show_arguments:
        lines.append(f"  parameters: {json.dumps(arguments, sort_keys=True)}")
    if result.state_dir is None:  # --preemptions configures only the emulator run-local starts
        lines.append("  injected preemptions: the external emulator's own (VERTEX_EMULATOR_HOST)")
    elif preemptions:  # the plan's count: a job that ends first sees fewer (the next line says)
        lines.append(f"  injected preemptions: up to {preemptions}")
    lines += summary_lines(result)
    if result.calls:
        calls = ", ".join(f"{c} {n}" for c, n in sorted(result.calls.items()))
        lines.append(f"  requests: {calls}")
    for name, path in sorted(result.outputs.items()):
        if name.endswith("/metrics"):
            lines.append(f"  {name}: {_metrics_line(path)}")
    report = write_report(result, arguments, durations)
    if report:
        lines.append(f"  report: {report}")
    if result.state_dir:
        lines.append(f"  emulator journal: {result.state_dir}/journal.jsonl")
    if log_path:
        lines.append(f"  full log: {log_path}")
    return lines


def _goodput(metrics: dict) -> str:
    """Goodput to two places, or ``unknown`` when the step could not see the checkpoints."""
    return f"{metrics['goodput']:.2f}" if "goodput" in metrics else "unknown (see the report)"


def _metrics_line(path: str) -> str:
    try:
        with open(path) as handle:
            values = json.load(handle)
    except (OSError, ValueError):
        return f"see {path}"
    shown = (
        "preemptions",
        "resubmissions",
        "goodput",
        "useful_node_seconds",
        "startup_node_seconds",
        "reload_node_seconds",
        "periodic_save_node_seconds",
        "notice_window_node_seconds",
        "finish_node_seconds",
        "work_lost_node_seconds",
        "node_hours_billed",
        "vertex_calls",
        "vertex_calls_per_job_hour",
        "storage_calls",
        "pubsub_calls",
        "api_calls",
        "api_calls_per_job_hour",
        "final_loss",
        "teardown_keep",
        "teardown_shrink",
        "teardown_cost_if_kept",
        "teardown_cost_if_shrunk",
        "teardown_cost_if_deleted",
        "teardown_prewarm",
        "teardown_cost_if_prewarmed",
    )
    return ", ".join(f"{k}={values[k]:g}" for k in shown if isinstance(values.get(k), (int, float)))
