"""Prolog/epilog, accounting enforcement, emulator restarts and cluster deletion."""

from __future__ import annotations

import pathlib
import time

import requests

from vsp.vertex_emulator.slurm.testing import API, DB, SlurmTestClient


def start(factory, body, cluster_id="c1", state_dir=None, **settings):
    server = factory(state_dir, **settings)
    return server, SlurmTestClient.create_cluster(server.base_url, cluster_id, body)


def hook(log: pathlib.Path, label: str, extra: str = "") -> str:
    return (
        f'#!/bin/bash\necho "{label} $SLURM_JOB_ID $SLURM_JOB_USER $SLURM_JOB_PARTITION '
        f'${{SLURM_JOB_NAME:-noname}}" >> {log}\n{extra}'
    )


def process_gone(pid: int) -> bool:
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.03)


def test_prolog_and_epilog_run_in_order_around_every_start(
    slurm_emulator_factory, cluster_body, tmp_path
):
    log = tmp_path / "hooks"
    slurm = cluster_body["orchestrator_spec"]["slurm_spec"]
    slurm["prolog_bash_scripts"] = [hook(log, "prolog1"), hook(log, "prolog2")]
    slurm["epilog_bash_scripts"] = [hook(log, "epilog1"), hook(log, "epilog2")]
    server, client = start(slurm_emulator_factory, cluster_body, slurm_requeue_delay_seconds=0)
    script = (
        f'#!/bin/bash\necho "job ${{SLURM_RESTART_COUNT:-0}}" >> {log}\n'
        'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then sleep 30; fi\n'
    )
    job_id = client.submit(script, name="hooked")
    # Preempted once the first run's script has begun, not in its prologs however slow the
    # machine is.
    deadline = time.monotonic() + 30
    while "job 0" not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline, "the first run's script never started"
        time.sleep(0.05)
    server.app.slurm.preempt_now("c1", job_id)
    done = client.wait_state(job_id, "COMPLETED")
    assert done["restart_cnt"] == 1
    expected_hook = f"{job_id} vsp a4 noname"
    assert log.read_text().splitlines() == [
        f"prolog1 {expected_hook}",
        f"prolog2 {expected_hook}",
        "job 0",
        f"prolog1 {expected_hook}",
        f"prolog2 {expected_hook}",
        "job 1",
        f"epilog1 {expected_hook}",
        f"epilog2 {expected_hook}",
    ]


def test_failing_prolog_drains_node_and_holds_job(slurm_emulator_factory, cluster_body, tmp_path):
    cluster_body["node_pools"][1]["scaling_spec"]["max_node_count"] = 1
    log = tmp_path / "hooks"
    slurm = cluster_body["orchestrator_spec"]["slurm_spec"]
    slurm["prolog_bash_scripts"] = [
        hook(log, "ok"),
        hook(log, "bad", "exit 1\n"),
        hook(log, "never"),
    ]
    _, client = start(slurm_emulator_factory, cluster_body, slurm_node_recovery_seconds=30)
    job_id = client.submit(f"#!/bin/bash\necho ran >> {log}\n")
    held = client.wait_job(job_id, lambda j: "REQUEUE_HOLD" in j["job_state"])
    assert held["job_state"] == ["PENDING", "LAUNCH_FAILED", "REQUEUE_HOLD"]
    assert held["state_reason"] == "launch failed requeued held"
    assert held["restart_cnt"] == 1 and held["priority"]["number"] == 0
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["ok", "bad"]
    (node,) = client.call("GET", f"{API}/nodes").payload["nodes"]
    assert node["state"] == ["IDLE", "DRAIN"] and node["reason"] == "Prolog error"
    listed = client.call("GET", f"{API}/jobs").payload["jobs"]
    assert [j["job_id"] for j in listed] == [job_id]
    time.sleep(0.5)
    assert client.job(job_id)["job_state"] == ["PENDING", "LAUNCH_FAILED", "REQUEUE_HOLD"]
    assert client.cancel(job_id).payload["errors"] == []
    assert client.job(job_id)["job_state"] == ["CANCELLED"]


def test_accounting_enforced_until_association_added(slurm_emulator_factory, cluster_body):
    slurm = cluster_body["orchestrator_spec"]["slurm_spec"]
    slurm["config"] = {"accounting_storage_enforce": "associations,limits,qos"}
    server, client = start(slurm_emulator_factory, cluster_body)
    script = "#!/bin/bash\necho $SLURM_JOB_ACCOUNT\n"
    body = {"job": {"account": "ml", "partition": "a4", "environment": []}, "script": script}
    rejected = client.call("POST", f"{API}/job/submit", body)
    assert rejected.status == 500
    (error,) = rejected.payload["errors"]
    assert error["error_number"] == 2045
    assert error["error"] == "Invalid account or account/partition combination specified"
    assert "job_id" not in rejected.payload
    early = client.call(
        "POST", f"{DB}/associations", {"associations": [{"account": "ml", "user": "vsp"}]}
    )
    assert early.status == 500 and early.payload["errors"][0]["error_number"] == 2045
    account = {"accounts": [{"name": "ml", "description": "ML", "organization": "lab"}]}
    association = {"associations": [{"account": "ml", "user": "vsp", "partition": "a4"}]}
    for _ in range(2):
        assert client.call("POST", f"{DB}/accounts", account).payload["errors"] == []
        added = client.call("POST", f"{DB}/associations", association)
        assert added.status == 200 and added.payload["errors"] == []
    associations = client.call("GET", f"{DB}/associations").payload["associations"]
    mine = [a for a in associations if a["user"] == "vsp"]
    assert [(a["account"], a["partition"], a["cluster"]) for a in mine] == [("ml", "a4", "c1")]
    users = {u["name"]: u for u in client.call("GET", f"{DB}/users").payload["users"]}
    assert users["vsp"]["default"]["account"] == "ml"
    accounts = [a["name"] for a in client.call("GET", f"{DB}/accounts").payload["accounts"]]
    assert accounts == ["root", "ml"]
    accepted = client.call("POST", f"{API}/job/submit", body)
    assert accepted.status == 200 and accepted.payload["errors"] == []
    done = client.wait_state(accepted.payload["job_id"], "COMPLETED")
    assert done["account"] == "ml"
    output = server.app.slurm.host_path("c1", done["standard_output"])
    assert pathlib.Path(output).read_text() == "ml\n"
    defaulted = client.submit("#!/bin/bash\ntrue\n")
    assert client.wait_state(defaulted, "COMPLETED")["account"] == "ml"


def test_legacy_accounting_field_enforces_too(slurm_emulator_factory, cluster_body):
    slurm = cluster_body["orchestrator_spec"]["slurm_spec"]
    del slurm["config"]
    slurm["accounting"] = {"accounting_storage_enforce": "associations"}
    _, client = start(slurm_emulator_factory, cluster_body)
    body = {"job": {"environment": []}, "script": "#!/bin/bash\ntrue\n"}
    rejected = client.call("POST", f"{API}/job/submit", body)
    assert rejected.payload["errors"][0]["error_number"] == 2045


def test_restart_treats_running_jobs_as_node_failures(
    slurm_emulator_factory, cluster_body, tmp_path
):
    state_dir = tmp_path / "state"
    first, client = start(slurm_emulator_factory, cluster_body, state_dir=state_dir)
    log = tmp_path / "log"
    again = client.submit(
        f'#!/bin/bash\necho "start ${{SLURM_RESTART_COUNT:-0}}" >> {log}\n'
        '[ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] && exit 0\nsleep 30\n',
        requeue=True,
    )
    lost = client.submit("#!/bin/bash\nsleep 30\n", requeue=False)
    client.wait_state(again, "RUNNING")
    client.wait_state(lost, "RUNNING")
    pids = [job["pgid"] for job in first.app.slurm.jobs("c1")]
    first.stop()
    assert not any(process_gone(pid) for pid in pids)
    second = slurm_emulator_factory(state_dir, slurm_requeue_delay_seconds=0)
    client = SlurmTestClient(second.base_url, client.cluster_name)
    failed = client.wait_state(lost, "NODE_FAIL")
    assert failed["state_reason"] == "NodeDown"
    done = client.wait_state(again, "COMPLETED")
    assert done["restart_cnt"] == 1
    assert log.read_text().splitlines() == ["start 0", "start 1"]
    wait_until(lambda: all(process_gone(pid) for pid in pids))
    timeline = second.app.slurm.preemptions("c1")
    assert {(e["jobId"], e["kind"], e["outcome"]) for e in timeline} == {
        (again, "node_failure", "REQUEUE"),
        (lost, "node_failure", "NODE_FAIL"),
    }


def test_deleting_the_cluster_kills_its_jobs(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    job_id = client.submit("#!/bin/bash\nsleep 30\n")
    client.wait_state(job_id, "RUNNING")
    (record,) = server.app.slurm.jobs("c1")
    deleted = requests.delete(f"{server.base_url}/v1beta1/{client.cluster_name}")
    assert deleted.status_code == 200
    wait_until(lambda: process_gone(record["pgid"]))
    wait_until(
        lambda: requests.get(f"{server.base_url}/v1beta1/{client.cluster_name}").status_code == 404
    )
    wait_until(lambda: not server.app.store.keys("slurm_jobs"))
    recreated = SlurmTestClient.create_cluster(server.base_url, "c1", cluster_body)
    assert recreated.call("GET", f"{API}/jobs").payload["jobs"] == []
    assert recreated.submit("#!/bin/bash\ntrue\n") == 1
