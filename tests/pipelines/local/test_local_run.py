"""`vsp run-local` on the emulator through kfp.local: the cluster lifecycle from the sources
(in-process mode), and the main pipeline as Vertex runs it (compiled template, a venv per step)."""

from __future__ import annotations

import io
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.job_log_files import job_log
from vsp import vertex_emulator
from vsp.components.runtime.core import gcp_labels
from vsp.components.runtime.trainer import history
from vsp.components.runtime.training import goodput
from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import run, step_console, summary

FAST = vertex_emulator.EmulatorSettings(
    provisioning_delay_seconds=0.3, delete_delay_seconds=0.1, tick_interval_seconds=0.05
)


def _run(tmp_path, monkeypatch, console=None, **overrides):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = {
        **catalog.local_arguments("cluster-lifecycle", str(tmp_path / "shared")),
        **overrides,
    }
    return run.run_local(
        "cluster-lifecycle",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=FAST,
        in_process=True,
        console=console,
    )


def _console():
    return step_console.StepConsole(io.StringIO(), io.StringIO(), live=False)


@pytest.mark.slow
def test_cluster_lifecycle_creates_then_deletes_exactly_once(tmp_path, monkeypatch):
    console = _console()
    result = _run(tmp_path, monkeypatch, console)
    assert result.succeeded, result.error
    # The terminal view: each task's start and end, the waits' progress between them.
    shown = console.shown
    tasks = [line for line in shown if not line.startswith("  ")]
    assert tasks == ["create-cluster: started", tasks[1], "delete-cluster: started", shown[-1]]
    assert re.fullmatch(r"create-cluster: succeeded in \d+(\.\d)? s", tasks[1])
    assert re.fullmatch(
        r"  create-cluster: create of cluster vsplocal: .*next check in .*", shown[1]
    )

    assert "Got executor_input" in console.log.getvalue()
    assert not any("executor" in line for line in shown)
    assert result.calls["create cluster"] == 1
    assert result.calls["delete cluster"] == 1
    writes = [
        (e["method"], e["status"], (e.get("body") or {}).get("path", ""))
        for e in result.journal
        if e["method"] != "GET" and not e["path"].endswith(":wait")
    ]
    # create (the run's claim among its labels); the in-use check reads the live Slurm queue
    # right before the delete; delete
    assert writes == [
        ("POST", 200, ""),
        ("POST", 200, "/slurm/v0.0.42/jobs"),
        ("DELETE", 200, ""),
    ]
    create = next(e for e in result.journal if e["method"] == "POST")
    assert create["query"] == {"model_development_cluster_id": "vsplocal"}
    # The run's identity: kfp.local's unique job id (an 8-digit number), not the job name.
    assert re.fullmatch(r"\d{1,8}", create["body"]["labels"]["vsp-pipeline-run"])
    run = create["body"]["labels"]["vsp-pipeline-run"]
    assert gcp_labels.lease_key(run) in create["body"]["labels"]  # the claim, with the create
    assert [p["id"] for p in create["body"]["nodePools"]] == ["login", "spot", "ondemand"]
    # The run leaves no cluster behind.
    assert [e for e in result.journal if e["method"] == "GET"][-1]["status"] == 404


@pytest.mark.slow
def test_exit_handler_deletes_even_when_the_create_step_fails(tmp_path, monkeypatch):
    console = _console()
    result = _run(tmp_path, monkeypatch, console, cluster_id="Bad-Id")
    assert not result.succeeded
    assert "create-cluster" in result.error
    # The root cause: the step, its exit code, each problem with its fix.
    failure = console.failure
    assert (failure.task, failure.exit_code) == ("create-cluster", 2)
    assert failure.error == (
        "cluster spec is invalid (1 problem):\n- cluster_id = 'Bad-Id': Cluster id must be 1-10 "
        "chars: a lowercase letter, then lowercase letters/digits. Fix: Use an id like "
        "'train01' (e.g. 'badid')."
    )  # the display name, which defaults to the id, is not reported again
    # The create step failed validation before any request; the exit task still ran, and
    # refused the id too, before any request: no cluster can have it.
    assert result.journal == []
    assert "delete-cluster: FAILED" in "\n".join(console.shown)


@pytest.mark.slow
def test_compiled_slurm_spot_training_survives_three_preemptions_bit_identically(
    tmp_path, monkeypatch
):
    """The faithful mode: compiled/pipelines/slurm_spot_training.yaml, each step in a fresh
    venv with only what its YAML installs (no numpy), as on Vertex AI Pipelines, and the
    cluster's home out of the steps' sight (they see only the emulated Cloud Storage)."""
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    console = _console()
    result = run.run_local(
        "slurm-spot-training",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=run.local_settings(0.3, preemptions=3, preempt_after=2.5),
        console=console,
    )
    assert result.succeeded, result.error
    assert result.mode == "faithful"
    # What `vsp run-local` prints for it: under 60 lines, with progress during the waits.
    printed = console.shown + summary.terminal_lines(result, preemptions=3, log_path="x")
    assert len(printed) < 60, "\n".join(printed)
    assert sum(line.startswith("  create-cluster: create of cluster") for line in printed) >= 1
    waits = [line for line in printed if line.startswith("  train-on-cluster: job 1: ")]
    # Each requeue's new run is shown (its PENDING spell too when a look falls inside it: the
    # poll plan may see a short requeue only by the beacon's next run).
    shown = {int(n) for line in waits for n in re.findall(r"restarts=(\d+)", line)}
    assert {1, 2, 3} <= shown, printed
    assert sum("preempted and requeued" in line for line in printed) == 3
    submits = [
        e for e in result.journal if (e.get("body") or {}).get("path", "").endswith("/job/submit")
    ]
    assert len(submits) == 1  # requeued in place three times: no resubmission
    metrics = json.loads(pathlib.Path(result.outputs["train-on-cluster/metrics"]).read_text())
    assert metrics["preemptions"] == 3 and metrics["resubmissions"] == 0
    assert result.calls["create cluster"] == 1 and result.calls["delete cluster"] == 1
    report = pathlib.Path(result.outputs["train-on-cluster/report"]).read_text()
    timeline = re.search(r'<svg[^>]*aria-label="timeline">.*?</svg>', report).group(0)
    assert len(re.findall(r"<title>preemption \d: job 1 requeued at ", timeline)) == 3
    assert timeline.count('<g class="marker resume">') == 3
    # The same trainer, uninterrupted, ends with the same bytes.
    reference = tmp_path / "reference"
    env = {
        **os.environ,
        "VSP_CHECKPOINT_DIR": str(reference / "ckpt"),
        "VSP_MODEL_DIR": str(reference / "model"),
    }
    # Unpaced (--step-seconds only sleeps; the model is the same).
    command = [sys.executable, *arguments["command"][1:], "--step-seconds", "0"]
    subprocess.run(command, env=env, check=True, capture_output=True)
    trained = pathlib.Path(arguments["model_dir"]) / "model.npz"
    assert trained.read_bytes() == (reference / "model" / "model.npz").read_bytes()
    separate_filesystems_still_measure_and_show(
        result, arguments, metrics, report, console.log.getvalue()
    )


def separate_filesystems_still_measure_and_show(result, arguments, metrics, report, shown):
    """Goodput and its figures from Cloud Storage, checked by recomputation, and the log lines."""
    state = pathlib.Path(result.state_dir)
    # The job's folder was on the cluster's own home: the steps (on this host) never saw it.
    work = pathlib.Path(arguments["working_directory"])
    assert str(work).startswith(vertex_emulator.cluster_home(state, "vsplocal"))
    assert not work.exists()
    # Checkpoints defaulted to Cloud Storage beside the model, one folder per run key.
    checkpoints = pathlib.Path(result.parameters["train-on-cluster"]["checkpoint_dir"])
    assert checkpoints.parent == pathlib.Path(arguments["model_dir"]).parent / "checkpoints"
    # vsp-{cluster}-{run id}-{task id}: kfp.local's unique ids, one per run and per task.
    assert re.fullmatch(r"vsp-vsplocal-\d{1,8}-\d{1,8}", checkpoints.name)
    # Every save the trainer made (its log says so) has a history line, pruned or not, and
    # every trainer process a start or resume line.
    log_file = job_log(arguments["training_options"]["log_directory"], 1)
    trainer_log = log_file.read_text()
    saves = trainer_log.count("saved checkpoint at step")
    records = history.read(checkpoints)
    assert len([r for r in records if r.event == "save"]) == saves >= 4
    starts = [r.event for r in records if r.event != "save"]
    assert starts == ["start"] + ["resume"] * (len(starts) - 1)
    # The log kept every attempt (appended across requeues, not truncated).
    assert [f"SLURM_RESTART_COUNT={n}" in trainer_log for n in range(4)] == [True] * 4
    # The figures add up to the billed node time, and goodput is the useful share of it.
    stretches = re.findall(
        r'<tr><td>1</td><td data-epoch="([\d.]+)">[^<]*</td><td data-epoch="([\d.]+)">[^<]*</td>'
        r"<td>[^<]*</td><td>(\w+)</td>",
        report,
    )
    assert [ended for _, _, ended in stretches] == ["requeued"] * 3 + ["succeeded"]
    billed = sum(float(end) - float(start) for start, end, _ in stretches)
    assert abs(metrics["billed_node_seconds"] - billed) <= 0.01
    figures = {name: metrics[f"{name}_node_seconds"] for name in goodput.FIGURES}
    assert abs(sum(figures.values()) - billed) <= 0.01
    assert abs(metrics["goodput"] - figures["useful"] / billed) <= 1e-3
    # Against the emulator's own record of each preemption: the node is held until the notice
    # ends; the step ends the stretch in the middle of the look window that saw the requeue
    # (the poll plan reads the beacon every 5 x poll_seconds = 2.5 s here), a tick later at
    # most, and within the whole second of the requeue time Slurm reports (its middle: up to
    # 0.5 s before the node was gone).
    events = [
        json.loads(line)
        for line in (state / "slurm" / "vsplocal" / "preemptions.jsonl").read_text().splitlines()
    ]
    assert len(events) == 3
    for event, (_, end, _) in zip(events, stretches[:3], strict=True):
        node_gone = event["epoch"] + event["noticeSeconds"]
        assert node_gone - 0.5 - 0.05 <= float(end) <= node_gone + 2.5 / 2 + 0.5
    # The step showed the trainer's own lines while it polled.
    trainer_lines = [line for line in shown.splitlines() if "[job 1]" in line]
    assert any("step 10/100 loss" in line for line in trainer_lines), shown[-3000:]
    assert any("model written to" in line for line in trainer_lines)
