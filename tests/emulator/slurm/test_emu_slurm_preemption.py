"""Spot preemption plans, requeue with SLURM_RESTART_COUNT, NODE_FAIL and PriorityTier."""

from __future__ import annotations

import pathlib
import time

import pytest
import requests

from vsp.vertex_emulator.slurm import preemption as slurm_preemption
from vsp.vertex_emulator.slurm.testing import API, SlurmTestClient


def start(factory, body, cluster_id="c1", **settings):
    server = factory(**settings)
    return server, SlurmTestClient.create_cluster(server.base_url, cluster_id, body)


def control(server, method, **kwargs):
    url = f"{server.base_url}/emulator/v1/slurm/preemptions"
    return requests.request(method, url, **kwargs)


def checkpointing_script(log, finish_at_restart: int) -> str:
    """Logs its starts; on SIGTERM logs and keeps running until SIGKILL.

    The start line is written once the SIGTERM trap is set, so a test that waits for it knows
    a preemption from then on is seen by the script.
    """
    return (
        "#!/bin/bash\n"
        "SLURM_RESTART_COUNT=${SLURM_RESTART_COUNT:-0}  # unset on a first run, as in Slurm\n"
        f'trap \'echo "term $SLURM_RESTART_COUNT $(date +%s.%N)" >> {log}; '
        f'while true; do sleep 0.05; echo "alive $SLURM_RESTART_COUNT $(date +%s.%N)" >> {log}; '
        "done' TERM\n"
        f'echo "start $SLURM_RESTART_COUNT $(date +%s.%N)" >> {log}\n'
        f'if [ "$SLURM_RESTART_COUNT" -ge {finish_at_restart} ]; then exit 0; fi\n'
        "while true; do sleep 0.05; done\n"
    )


@pytest.mark.slow
def test_fixed_plan_requeues_with_restart_count_and_notice(
    slurm_emulator_factory, cluster_body, tmp_path
):
    server, client = start(slurm_emulator_factory, cluster_body, slurm_requeue_delay_seconds=0.4)
    plan = control(
        server, "POST", json={"cluster": "c1", "mode": "fixed", "afterSeconds": 0.5, "maxCount": 2}
    )
    assert plan.status_code == 200
    assert plan.json()["plan"]["mode"] == "fixed" and plan.json()["plan"]["max_count"] == 2
    log = tmp_path / "log"
    job_id = client.submit(checkpointing_script(log, 2), name="ckpt", requeue=True)
    requeued = client.wait_job(job_id, lambda j: j["job_state"] == ["PENDING"], timeout=5)
    assert requeued["job_state"] == ["PENDING"]  # Slurm 24.11 shows no REQUEUED flag
    assert requeued["restart_cnt"] == 1 and requeued["state_reason"] == "BeginTime"
    nodes = client.call("GET", f"{API}/nodes").payload["nodes"]
    assert nodes[0]["state"] == ["DOWN"] and nodes[0]["reason"] == "Spot VM preempted"
    done = client.wait_state(job_id, "COMPLETED", timeout=10)
    assert done["restart_cnt"] == 2 and done["requeue"] is True
    lines = [line.split() for line in log.read_text().splitlines()]
    starts = [int(words[1]) for words in lines if words[0] == "start"]
    assert starts == [0, 1, 2]
    for run in (0, 1):
        term = [float(w[2]) for w in lines if w[0] == "term" and w[1] == str(run)]
        alive = [float(w[2]) for w in lines if w[0] == "alive" and w[1] == str(run)]
        assert len(term) == 1 and alive, "SIGTERM came first and the job kept running"
        assert 0.2 < max(alive) - term[0] < 1.5, "SIGKILL came after the notice"
    events = control(server, "GET", params={"cluster": "c1"}).json()
    timeline = events["preemptions"]
    assert [(e["kind"], e["jobId"], e["restartCount"], e["outcome"]) for e in timeline] == [
        ("spot", job_id, 0, "REQUEUE"),
        ("spot", job_id, 1, "REQUEUE"),
    ]
    assert all(0.5 <= e["runSeconds"] < 1.0 and e["nodes"] for e in timeline)
    assert events["plan"]["fired"] == 2
    assert server.app.slurm.preemptions("c1") == timeline
    assert (server.state_dir / "slurm" / "c1" / "preemptions.jsonl").exists()


def test_non_requeue_job_ends_node_fail(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    job_id = client.submit("#!/bin/bash\nsleep 30\n", requeue=False)
    client.wait_state(job_id, "RUNNING")
    event = server.app.slurm.preempt_now("c1", job_id)
    assert event["outcome"] == "NODE_FAIL" and event["source"] == "manual"
    assert client.job(job_id)["job_state"] == ["RUNNING"]
    failed = client.wait_state(job_id, "NODE_FAIL")
    assert failed["state_reason"] == "NodeDown" and failed["restart_cnt"] == 0
    assert server.app.slurm.nodes("c1")["c1-a4-0"]["state"] == "DOWN"
    assert client.db_job(job_id)["state"] == {"current": ["NODE_FAIL"], "reason": "NodeDown"}


def test_higher_priority_tier_partition_preempts_lower(
    slurm_emulator_factory, cluster_body, clock_of, tmp_path
):
    slurm = cluster_body["orchestrator_spec"]["slurm_spec"]
    slurm["partitions"] = [
        {"id": "spot", "node_pool_ids": ["a4"], "config": {"PriorityTier": "1"}},
        {"id": "urgent", "node_pool_ids": ["a4"], "config": {"PriorityTier": "10"}},
    ]
    slurm["config"] = {"PreemptType": "preempt/partition_prio", "PreemptMode": "REQUEUE"}
    server, client = start(slurm_emulator_factory, cluster_body, slurm_requeue_delay_seconds=0)
    # The emulator's clock is held: the preempted jobs' kill wait ends when the test says, not
    # when a busy machine happens to get round to the next check.
    clock = clock_of(server)
    log = tmp_path / "log"
    keeps = client.submit(checkpointing_script(log, 1), partition="spot", requeue=True)
    loses = client.submit("#!/bin/bash\nsleep 30\n", partition="spot", requeue=False)
    client.wait_state(keeps, "RUNNING")
    client.wait_state(loses, "RUNNING")
    wait_for_line(log, "start 0")  # its SIGTERM trap is set
    urgent = client.submit("#!/bin/bash\nsleep 0.3\n", partition="urgent", nodes="2")
    info = client.job(keeps)
    assert info["job_state"] == ["PENDING", "COMPLETING"] and info["restart_cnt"] == 1
    assert client.job(urgent)["state_reason"] == "Resources"
    preempted = client.wait_state(loses, "PREEMPTED")
    assert preempted["restart_cnt"] == 0
    wait_for_line(log, "term 0")
    assert client.job(urgent)["state_reason"] == "Resources"  # the kill wait is not over
    clock.advance(server.settings.scaled(server.settings.slurm_kill_wait_seconds) + 0.01)
    client.wait_state(urgent, "RUNNING")
    done = client.wait_state(keeps, "COMPLETED", timeout=10)
    assert done["restart_cnt"] == 1
    assert client.job(urgent)["job_state"] == ["COMPLETED"]
    words = [line.split()[:2] for line in log.read_text().splitlines()]
    assert words[0] == ["start", "0"] and words[1] == ["term", "0"]
    assert ["start", "1"] in words
    timeline = server.app.slurm.preemptions("c1")
    assert {(e["jobId"], e["outcome"], e["preemptedBy"]) for e in timeline} == {
        (keeps, "REQUEUE", urgent),
        (loses, "PREEMPTED", urgent),
    }
    assert all(e["kind"] == "partition_prio" for e in timeline)


def wait_for_line(log: pathlib.Path, prefix: str, timeout: float = 10.0) -> None:
    """Waits (wall clock) until the script's log has a line starting with ``prefix``."""
    deadline = time.monotonic() + timeout
    while not (log.exists() and any(x.startswith(prefix) for x in log.read_text().splitlines())):
        assert time.monotonic() < deadline, f"no {prefix!r} line in {log}"
        time.sleep(0.02)


@pytest.mark.slow
def test_poisson_plan_is_deterministic_for_a_seed(slurm_emulator_factory, cluster_body):
    assert slurm_preemption.poisson_delays(7, 10.0, 5) == slurm_preemption.poisson_delays(
        7, 10.0, 5
    )
    assert slurm_preemption.poisson_delays(7, 10.0, 5) != slurm_preemption.poisson_delays(
        8, 10.0, 5
    )
    seed = next(
        s
        for s in range(1000)
        if all(0.2 < d < 0.7 for d in slurm_preemption.poisson_delays(s, 0.4, 2))
    )
    draws = slurm_preemption.poisson_delays(seed, 0.4, 2)
    server, client = start(slurm_emulator_factory, cluster_body, slurm_requeue_delay_seconds=0)
    plan = control(
        server,
        "POST",
        json={"cluster": "c1", "mode": "poisson", "meanSeconds": 0.4, "seed": seed, "maxCount": 2},
    ).json()["plan"]
    assert plan["preview"][:2] == draws and plan["source"] == "cluster"
    job_id = client.submit("#!/bin/bash\nsleep 30\n", requeue=True)
    client.wait_job(job_id, lambda j: j["restart_cnt"] == 2 and "RUNNING" in j["job_state"])
    timeline = server.app.slurm.preemptions("c1")
    assert [e["restartCount"] for e in timeline] == [0, 1]
    for event, draw in zip(timeline, draws, strict=True):
        # runSeconds is rounded to the millisecond: a run of exactly the draw may read 0.0005 s
        # less.
        assert draw - 0.0005 <= event["runSeconds"] < draw + 0.2
    client.cancel(job_id)
    bad = control(server, "POST", json={"cluster": "c1", "mode": "poisson"})
    assert bad.status_code == 400
    assert control(server, "DELETE", params={"cluster": "c1"}).json() == {"cleared": True}
    assert control(server, "GET", params={"cluster": "c1"}).json()["plan"] is None


@pytest.mark.slow
def test_settings_plan_and_fault_rule(slurm_emulator_factory, cluster_body):
    server, client = start(
        slurm_emulator_factory,
        cluster_body,
        slurm_spot_preempt_after_seconds=0.3,
        slurm_spot_preempt_max_count=1,
        slurm_requeue_delay_seconds=0,
    )
    assert server.app.slurm.preemption_plan("c1")["source"] == "settings"
    first = client.submit("#!/bin/bash\nsleep 30\n")
    client.wait_job(first, lambda j: j["restart_cnt"] == 1)
    server.add_fault(
        action="slurm_preempt", path=r":callSlurmRestApi$", body="job/submit", seconds=0.2
    )
    second = client.submit("#!/bin/bash\nsleep 30\n", requeue=False)
    client.wait_state(second, "NODE_FAIL")
    sources = [e["source"] for e in server.app.slurm.preemptions("c1")]
    assert sources == ["plan", "fault"]
    client.cancel(first)


def test_a_plan_armed_before_the_cluster_exists_waits_and_applies_at_creation(
    slurm_emulator_factory, cluster_body
):
    server = slurm_emulator_factory(slurm_requeue_delay_seconds=0)
    armed = control(
        server, "POST", json={"cluster": "c1", "mode": "fixed", "afterSeconds": 0.3, "maxCount": 1}
    )
    assert armed.status_code == 200
    assert armed.json()["plan"] == {
        "mode": "fixed",
        "after_seconds": [0.3],
        "mean_seconds": None,
        "seed": 0,
        "max_count": 1,
        "job_name": None,
        "partition": None,
        "unannounced_share": 0.0,
        "source": "pending",
        "fired": 0,
        "runs": 0,
    }
    waiting = control(server, "GET", params={"cluster": "c1"})
    assert waiting.status_code == 200
    assert waiting.json() == {"plan": armed.json()["plan"], "preemptions": []}
    # A plan armed for another id stays out of c1's way, and can be withdrawn.
    other = {"cluster": "c2", "mode": "fixed", "afterSeconds": 5}
    assert control(server, "POST", json=other).json()["plan"]["source"] == "pending"

    client = SlurmTestClient.create_cluster(server.base_url, "c1", cluster_body)
    job_id = client.submit("#!/bin/bash\nsleep 30\n", requeue=True)
    client.wait_job(job_id, lambda j: j["restart_cnt"] == 1, timeout=10)
    shown = control(server, "GET", params={"cluster": "c1"}).json()
    assert (shown["plan"]["source"], shown["plan"]["fired"], shown["plan"]["max_count"]) == (
        "cluster",
        1,
        1,
    )
    assert [(e["kind"], e["jobId"], e["source"]) for e in shown["preemptions"]] == [
        ("spot", job_id, "plan")
    ]
    assert server.app.store.keys("slurm_pending_plans") == ["c2"]
    assert control(server, "DELETE", params={"cluster": "c2"}).json() == {"cleared": True}
    assert server.app.store.keys("slurm_pending_plans") == []
    assert control(server, "GET", params={"cluster": "c2"}).status_code == 404
    client.cancel(job_id)
