"""The emulated Slurm API, a job's run: its environment, exit codes, cancel and signals, time
limit with a warning signal, pending reasons, priorities, holds and release."""

from __future__ import annotations

import pathlib
import time

import pytest

from tests.emulator.slurm.emu_slurm_calls import UNSET, num, start, wait_until
from vsp.vertex_emulator.slurm.testing import API


def test_environment_is_only_the_jobs_plus_slurm(
    slurm_emulator_factory, cluster_body, tmp_path, monkeypatch
):
    monkeypatch.setenv("VSP_LEAK_PROBE", "secret")
    server, client = start(slurm_emulator_factory, cluster_body)
    work = tmp_path / "work" / "deep"
    job_id = client.submit(
        "#!/bin/bash\nenv > env.txt\n",
        name="envy",
        current_working_directory=str(work),
        environment=["A=1", "B=two words=3"],
    )
    client.wait_state(job_id, "COMPLETED")
    env = dict(line.split("=", 1) for line in (work / "env.txt").read_text().splitlines())
    slurm = {k: v for k, v in env.items() if k.startswith(("SLURM_", "SLURMD_"))}
    others = set(env) - set(slurm)
    # What Slurm 24.11 gives the same request (slurmrestd v0.0.42): no PATH, HOME or USER.
    assert others == {"A", "B", "ENVIRONMENT", "HOSTNAME", "PWD", "SHLVL", "TMPDIR", "_"}
    assert "VSP_LEAK_PROBE" not in env and "VERTEX_EMULATOR_HOST" not in env
    assert env["A"] == "1" and env["B"] == "two words=3" and env["ENVIRONMENT"] == "BATCH"
    began = int(slurm["SLURM_JOB_START_TIME"])
    limit = client.job(job_id)["time_limit"]["number"]  # the partition's DefaultTime
    # The names Slurm 24.11 sets for this request, less SLURM_CONF, SLURM_MEM_PER_CPU and
    # SLURM_TASK_PID (not modelled); no SLURM_RESTART_COUNT on a first run.
    assert {k: slurm[k] for k in sorted(slurm) if k not in ("SLURM_JOB_UID", "SLURM_JOB_GID")} == {
        "SLURMD_NODENAME": "c1-a4-0",
        "SLURM_CLUSTER_NAME": "c1",
        "SLURM_CPUS_ON_NODE": "1",
        "SLURM_GTIDS": "0",
        "SLURM_JOBID": str(job_id),
        "SLURM_JOB_CPUS_PER_NODE": "1",
        "SLURM_JOB_END_TIME": str(began + limit * 60),
        "SLURM_JOB_ID": str(job_id),
        "SLURM_JOB_NAME": "envy",
        "SLURM_JOB_NODELIST": "c1-a4-0",
        "SLURM_JOB_NUM_NODES": "1",
        "SLURM_JOB_PARTITION": "a4",
        "SLURM_JOB_START_TIME": str(began),
        "SLURM_JOB_USER": "vsp",
        "SLURM_LOCALID": "0",
        "SLURM_NNODES": "1",
        "SLURM_NODEID": "0",
        "SLURM_NODELIST": "c1-a4-0",
        "SLURM_OOM_KILL_STEP": "0",
        "SLURM_PROCID": "0",
        "SLURM_TASKS_PER_NODE": "1",
        "SLURM_TOPOLOGY_ADDR": "c1-a4-0",
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
    }
    assert (work / f"slurm-{job_id}.out").exists()


def test_failed_exit_codes(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    code = client.submit("#!/bin/bash\nexit 3\n")
    signalled = client.submit("#!/bin/bash\nkill -USR1 $$\n")
    failed = client.wait_state(code, "FAILED")
    assert failed["exit_code"] == {
        "status": ["ERROR"],
        "return_code": num(3),
        "signal": {"id": UNSET, "name": ""},
    }
    assert failed["state_reason"] == "NonZeroExitCode"
    killed = client.wait_state(signalled, "FAILED")
    assert killed["exit_code"]["status"] == ["SIGNALED"]
    assert killed["exit_code"]["signal"] == {"id": num(10), "name": "USR1"}
    assert killed["state_reason"] == "RaisedSignal:10(USR1)"
    no_shell = client.wait_state(client.submit("#!/nonexistent/shell\ntrue\n"), "FAILED")
    assert no_shell["exit_code"]["return_code"] == num(1)
    assert "could not start" in no_shell["state_description"]
    stderr = server.app.slurm.host_path("c1", no_shell["standard_error"])
    assert "execve()" in pathlib.Path(stderr).read_text()
    db = client.db_job(code)
    assert db["state"] == {"current": ["FAILED"], "reason": "NonZeroExitCode"}
    assert db["exit_code"]["return_code"] == num(3)


def test_cancel_sigterm_killwait_sigkill(slurm_emulator_factory, cluster_body, tmp_path):
    _, client = start(slurm_emulator_factory, cluster_body)
    marker = tmp_path / "marker"
    script = (
        f"#!/bin/bash\ntrap 'echo term >> {marker}; sleep 5' TERM\n"
        f"echo up >> {marker}\nwhile true; do sleep 0.05; done\n"
    )
    job_id = client.submit(script)
    client.wait_job(job_id, lambda j: marker.exists())
    assert client.cancel(job_id).payload["errors"] == []
    completing = client.job(job_id)
    assert completing["job_state"] == ["CANCELLED", "COMPLETING"]
    done = client.wait_state(job_id, "CANCELLED")
    assert done["exit_code"]["signal"]["name"] == "KILL"
    assert marker.read_text() == "up\nterm\n"
    again = client.cancel(job_id)
    assert again.status == 200 and again.payload["errors"] == []
    (entry,) = again.payload["status"]  # as Slurm 24.11: per job, not in errors
    assert entry["error"]["code"] == 2021 and entry["job_id"]["number"] == job_id
    assert entry["error"]["message"] == "Job/step already completing or completed"
    pending = client.submit("#!/bin/bash\ntrue\n", hold=True)
    assert client.cancel(pending).status == 200
    assert client.job(pending)["job_state"] == ["CANCELLED"]
    unknown = client.cancel(12345)
    assert unknown.status == 200 and unknown.payload["status"][0]["error"]["code"] == 2017


def test_timeout_with_warning_signal(slurm_emulator_factory, cluster_body, clock_of, tmp_path):
    # time_scale 0.01: a 1-minute limit lasts 0.6 s of emulated time, USR1@30 comes 0.3 s before
    # it. The emulator's clock is held and moved by the test, so the signals come at those
    # emulated times whatever the machine's load, after the script has set its traps.
    server, client = start(slurm_emulator_factory, cluster_body, time_scale=0.01)
    clock = clock_of(server)
    log, ready = tmp_path / "log", tmp_path / "ready"
    script = (
        f"#!/bin/bash\ntrap 'echo usr1 >> {log}' USR1\ntrap 'echo term >> {log}; exit 0' TERM\n"
        f"touch {ready}\nwhile true; do sleep 0.05; done\n"
    )
    job_id = client.submit(script, time_limit=1, signal="USR1@30")
    client.wait_state(job_id, "RUNNING")
    wait_until(ready.exists)
    clock.advance(0.29)  # 10 ms before the warning: nothing yet
    time.sleep(0.3)  # six of the emulator's ticks
    assert not log.exists() and client.job(job_id)["job_state"] == ["RUNNING"]
    clock.advance(0.02)  # past the warning, before the limit
    wait_until(lambda: log.exists() and log.read_text() == "usr1\n")
    assert client.job(job_id)["job_state"] == ["RUNNING"]
    clock.advance(0.6)  # past the limit and slurmctld's next check (every 30 s, 0.3 s here)
    done = client.wait_state(job_id, "TIMEOUT")
    assert done["state_reason"] == "TimeLimit" and done["time_limit"] == num(1)
    assert log.read_text() == "usr1\nterm\n"


@pytest.mark.parametrize("release_field", ["job", "flat"])
def test_pending_reasons_priorities_hold_and_release(
    slurm_emulator_factory, cluster_body, release_field
):
    cluster_body["node_pools"][1]["scaling_spec"]["max_node_count"] = 1
    _, client = start(slurm_emulator_factory, cluster_body)
    sleeper = "#!/bin/bash\nsleep 30\n"
    running = client.submit(sleeper)
    client.wait_state(running, "RUNNING")
    first = client.submit(sleeper)
    second = client.submit(sleeper)
    held = client.call(
        "POST", f"{API}/job/submit", {"job": {"hold": True, "environment": []}, "script": sleeper}
    )
    assert held.status == 200 and held.payload["errors"] == []
    assert held.payload["warnings"][-1]["description"] == (
        "Job is in held state, pending scheduler release"
    )
    held_id = held.payload["job_id"]
    infos = {j: client.job(j) for j in (first, second, held_id)}
    assert infos[first]["state_reason"] == "Resources"
    assert infos[second]["state_reason"] == "Priority"
    assert infos[first]["priority"]["number"] > infos[second]["priority"]["number"] > 0
    assert infos[held_id]["state_reason"] == "JobHeldUser"
    assert infos[held_id]["priority"] == num(0) and infos[held_id]["hold"] is True
    if release_field == "job":  # Slurm 24.11.7 reads a job update's fields at the top only
        ignored = client.call("POST", f"{API}/job/{held_id}", {"job": {"hold": False}})
        assert ignored.status == 200 and ignored.payload["errors"] == []
        assert ignored.payload["warnings"] == [
            {
                "description": 'Ignoring unknown field "hold" of type boolean in '
                "DATA_PARSER_JOB_DESC_MSG",
                "source": "#/job/hold/",
            }
        ]
        assert client.job(held_id)["state_reason"] == "JobHeldUser"
    assert client.call("POST", f"{API}/job/{held_id}", {"hold": False}).status == 200
    assert client.job(held_id)["state_reason"] == "Priority"
    # A hold set by a job update is the administrator's (the API calls as root).
    assert client.call("POST", f"{API}/job/{second}", {"hold": True}).status == 200
    assert client.job(second)["state_reason"] == "JobHeldAdmin"
    client.cancel(running)
    client.wait_state(first, "RUNNING")
    for job_id in (first, second, held_id):
        client.cancel(job_id)


def test_signal_without_cancelling(slurm_emulator_factory, cluster_body, tmp_path):
    _, client = start(slurm_emulator_factory, cluster_body)
    marker = tmp_path / "usr1"
    script = f"#!/bin/bash\ntrap 'echo usr1 >> {marker}' USR1\nwhile true; do sleep 0.05; done\n"
    job_id = client.submit(script)
    client.wait_state(job_id, "RUNNING")
    time.sleep(0.2)
    assert client.call("DELETE", f"{API}/job/{job_id}?signal=USR1").status == 200
    client.wait_job(job_id, lambda j: marker.exists())
    assert client.job(job_id)["job_state"] == ["RUNNING"]
    held = client.submit("#!/bin/bash\ntrue\n", hold=True)
    pending = client.call("DELETE", f"{API}/job/{held}?signal=USR1")
    assert pending.status == 200 and pending.payload["errors"] == []
    assert pending.payload["status"][0]["error"]["code"] == 2020
    client.cancel(job_id)
    client.cancel(held)
