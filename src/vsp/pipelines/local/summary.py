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

from vsp.components.runtime.core import gcp_labels, readable_time
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
                f"goodput {_goodput(train)}, cost {train.get('cost', 0):.4f})",
            )
        )
    register = params.get("register-model")
    if register:
        again = " (already registered by this run)" if register.get("reused") else ""
        rows.append(("model version", f"{register.get('model_resource_name', '')}{again}"))
    decide = params.get("decide-teardown")
    if decide:
        rows.append(("teardown", f"{decide.get('action', '')}: {decide.get('reason', '')}"))
        labels = decide.get("labels") or {}
        if labels.get(gcp_labels.EXPIRES_AT):
            what = "shrunk until" if decide.get("action") == "shrink" else "kept until"
            expires = gcp_labels.parse_timestamp(labels[gcp_labels.EXPIRES_AT]).timestamp()
            rows.append((what, f"{readable_time.utc(expires)}, then reaped"))
    shrink = params.get("shrink-cluster")
    if shrink:
        rows.append(("gpu pools", f"{shrink.get('Output', '')}"))
    reap = params.get("reap-expired-clusters")
    if reap:
        reaped = reap.get("Output") or []
        rows.append(("clusters reaped", ", ".join(reaped) if reaped else "none expired"))
    finalize = params.get("finalize-cluster")
    if finalize and finalize.get("Output") not in (None, "none"):
        rows.append(("exit handler", str(finalize.get("Output"))))
    return rows


def _body(path: str | None) -> str:
    if not path:
        return ""
    try:
        text = pathlib.Path(path).read_text()
    except OSError:
        return ""
    match = _BODY.search(text)
    return match.group(1) if match else ""


def html_report(result: results.LocalRunResult) -> str:
    """One self-contained page: the summary, the training report and the teardown decision."""
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts(result)
    )
    state = "SUCCEEDED" if result.succeeded else "FAILED"
    calls = "".join(
        f"<tr><th>{html.escape(call)}</th><td>{count}</td></tr>"
        for call, count in sorted(result.calls.items())
    )
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
        f"{readable_time.duration(result.seconds)}</h1><table>{rows}</table>"
        f"{training}{teardown}<h2>Requests to Vertex AI</h2><table>{calls}</table>"
        "</body></html>\n"
    )


def write_report(result: results.LocalRunResult) -> str:
    """Writes the page into the run's output folder; returns its path ('' without a folder)."""
    if not result.run_dir:
        return ""
    path = pathlib.Path(result.run_dir) / REPORT_NAME
    path.write_text(html_report(result))
    return str(path)


def summary_lines(result: results.LocalRunResult) -> list[str]:
    """The facts as indented lines for the terminal."""
    return [f"  {what}: {value}" for what, value in facts(result)]


def terminal_lines(
    result: results.LocalRunResult,
    *,
    preemptions: int,
    arguments: dict | None = None,
    log_path: str = "",
) -> list[str]:
    """What ``vsp run-local`` prints once a run ends; writes the HTML report on the way.

    Args:
        result: The run.
        preemptions: Spot preemptions the emulator was told to inject.
        arguments: The run's parameters, listed when given (the verbose view).
        log_path: The file holding the run's full output, named when given.
    """
    state = "SUCCEEDED" if result.succeeded else "FAILED"
    mode = "faithful: compiled template" if result.mode == "faithful" else "in-process"
    lines = [f"pipeline {result.pipeline}: {state} in {result.seconds:.1f} s ({mode})"]
    if arguments is not None:
        lines.append(f"  parameters: {json.dumps(arguments, sort_keys=True)}")
    lines.append(f"  injected preemptions: {preemptions}")
    lines += summary_lines(result)
    lines.append("  requests: " + ", ".join(f"{c} {n}" for c, n in sorted(result.calls.items())))
    for name, path in sorted(result.outputs.items()):
        if name.endswith("/metrics"):
            lines.append(f"  {name}: {_metrics_line(path)}")
    report = write_report(result)
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
        "teardown_keep",
        "teardown_shrink",
        "teardown_cost_if_kept",
        "teardown_cost_if_shrunk",
        "teardown_cost_if_deleted",
    )
    return ", ".join(f"{k}={values[k]:g}" for k in shown if isinstance(values.get(k), (int, float)))
