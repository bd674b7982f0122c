"""CustomJob Spot preemption: restart in place, STOCKOUT after six restarts, capacity waits."""

from __future__ import annotations

import json
import time

import pytest
import requests

from tests.emulator.custom_jobs.test_emu_custom_jobs import (
    FAST,
    TERMINAL,
    body,
    create,
    get,
    info,
    wait,
)


def plan(server, **fields):
    url = f"{server.base_url}/emulator/v1/custom-jobs/preemptions"
    resp = requests.post(url, json=fields, timeout=5)
    assert resp.status_code == 200, resp.text
    return resp.json()


def logging_script(log, finish_at_start=0):
    """Logs each start; on SIGTERM logs and keeps running (until SIGKILL)."""
    finish = (
        f'[ "$(grep -c start {log})" -ge {finish_at_start} ] && exit 0\n' if finish_at_start else ""
    )
    text = (
        f"echo start $(date +%s.%N) >> {log}\n"
        f"trap 'echo term $(date +%s.%N) >> {log}; while true; do sleep 0.05; done' TERM\n"
        f"{finish}while true; do sleep 0.05; done\n"
    )
    return ["/bin/bash", "-c", text]


@pytest.mark.slow
def test_spot_preemption_restarts_in_place(emulator_factory, tmp_path):
    server = emulator_factory(**FAST)
    shown = plan(server, mode="fixed", afterSeconds=0.3, maxCount=5)["plan"]
    assert shown["mode"] == "fixed" and shown["source"] == "emulator"
    log = tmp_path / "log"
    job = create(server, body(logging_script(log, finish_at_start=3), strategy="SPOT"))
    done = wait(server, job["name"], TERMINAL, timeout=10)
    assert done["state"] == "JOB_STATE_SUCCEEDED"
    facts = info(server, job["name"])
    assert facts["restartCount"] == 2 and facts["preemptionCount"] == 2
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [w[0] for w in lines] == ["start", "term", "start", "term", "start"]
    # SIGKILL came a notice (0.3 s) after SIGTERM: the next start is at least that much later.
    assert float(lines[2][1]) - float(lines[1][1]) > 0.25
    entries = requests.get(
        f"{server.base_url}/emulator/v1/custom-jobs/preemptions", timeout=5
    ).json()
    assert [e["outcome"] for e in entries["preemptions"]] == ["RESTART", "RESTART"]
    assert [e["restartCount"] for e in entries["preemptions"]] == [0, 1]
    on_disk = (server.state_dir / "custom_jobs" / "preemptions.jsonl").read_text().splitlines()
    assert [json.loads(x)["job"] for x in on_disk] == [job["name"]] * 2


@pytest.mark.slow
def test_seventh_preemption_fails_with_stockout(emulator_factory, tmp_path):
    server = emulator_factory(**{**FAST, "custom_job_preempt_notice_seconds": 0.05})
    plan(server, mode="fixed", afterSeconds=0.15)
    log = tmp_path / "log"
    job = create(server, body(logging_script(log), strategy="SPOT"))
    states = set()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        current = get(server, job["name"])
        states.add(current["state"])
        if current["state"] in TERMINAL:
            break
        time.sleep(0.02)
    assert current["state"] == "JOB_STATE_FAILED"
    assert current["error"]["code"] == 8 and "STOCKOUT" in current["error"]["message"]
    assert {"JOB_STATE_PENDING", "JOB_STATE_RUNNING"} <= states
    assert log.read_text().count("start") == 7
    facts = info(server, job["name"])
    assert facts["restartCount"] == 6 and facts["preemptionCount"] == 7
    outcomes = [e["outcome"] for e in server.app.custom_jobs.preemptions(job["name"])]
    assert outcomes == ["RESTART"] * 6 + ["FAILED"]


def test_standard_jobs_are_never_preempted(emulator_factory, tmp_path):
    server = emulator_factory(**FAST, custom_job_spot_preempt_after_seconds=0.05)
    assert server.app.custom_jobs.preemption_plan()["source"] == "settings"
    job = create(server, body(["sleep", "0.6"], strategy="STANDARD"))
    assert wait(server, job["name"], TERMINAL)["state"] == "JOB_STATE_SUCCEEDED"
    assert server.app.custom_jobs.preemptions() == []


@pytest.mark.slow
def test_manual_preemption_and_no_capacity(emulator_factory, tmp_path):
    server = emulator_factory(**FAST)
    log = tmp_path / "log"
    job = create(server, body(logging_script(log, finish_at_start=2), strategy="SPOT"))
    wait(server, job["name"], {"JOB_STATE_RUNNING"})
    while not log.exists() or "start" not in log.read_text():  # The TERM trap is set.
        time.sleep(0.02)
    entry = plan(server, mode="now", job=job["name"].rsplit("/", 1)[-1])["preemption"]
    assert entry["source"] == "manual" and entry["outcome"] == "RESTART"
    assert wait(server, job["name"], TERMINAL)["state"] == "JOB_STATE_SUCCEEDED"
    server.update_settings(custom_job_spot_no_capacity=True)
    stuck = create(server, body(["true"], strategy="SPOT"))
    normal = create(server, body(["true"]))
    assert wait(server, normal["name"], TERMINAL)["state"] == "JOB_STATE_SUCCEEDED"
    time.sleep(0.3)
    assert get(server, stuck["name"])["state"] == "JOB_STATE_PENDING"
    url = f"{server.base_url}/v1/{stuck['name']}:cancel"
    assert requests.post(url, timeout=5).json() == {}
    assert wait(server, stuck["name"], TERMINAL)["state"] == "JOB_STATE_CANCELLED"
