"""Unannounced Spot preemptions: a plan's ``unannounced_share`` SIGKILLs at once, no notice."""

from __future__ import annotations

import signal
import types

import pytest
import requests

from vsp.vertex_emulator import config
from vsp.vertex_emulator.custom_jobs import preemption as custom_job_preemption
from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import lifecycle as slurm_lifecycle
from vsp.vertex_emulator.slurm import preemption as slurm_preemption
from vsp.vertex_emulator.slurm.testing import SlurmTestClient

NOTICE = 0.5
NOTICE_FREE_REQUEUE_DELAY = config.EmulatorSettings().slurm_requeue_delay_seconds


class FakeProcs:
    """Records the signals sent to each job's process group."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, str]] = []
        self.discarded: set[int] = set()

    def signal(self, key, sig, *, leader_only=False):
        self.sent.append((key[1], signal.Signals(sig).name))
        return True

    def terminate(self, key):
        self.signal(key, signal.SIGCONT)
        return self.signal(key, signal.SIGTERM)

    def finished(self, key):
        return None  # the SIGKILLed process is not reaped yet

    def discard(self, key):
        self.discarded.add(key[1])


class FakeCtx:
    """The parts of a ``ClusterContext`` that the preemption injector uses."""

    def __init__(self, plan: dict) -> None:
        self.now = 100.0
        self.name = "projects/p/locations/l/clusters/c1"
        self.topo = types.SimpleNamespace(spot_nodes={"n1"}, cluster_id="c1")
        self.settings = config.EmulatorSettings(slurm_preempt_notice_seconds=NOTICE)
        self.state = {"plan": slurm_preemption.normalize_plan(plan), "plan_fired": 0}
        self.state.update(plan_runs=0, nodes={})
        self.jobs: dict[int, dict] = {}
        self.events: list[dict] = []
        self.procs = FakeProcs()

    def scaled(self, seconds):
        return seconds

    def key(self, job):
        return (self.name, int(job["job_id"]))

    record_event = slurm_context.ClusterContext.record_event
    take_down = slurm_context.ClusterContext.take_down


def run_plan(plan: dict, runs: int) -> FakeCtx:
    """Starts ``runs`` job runs one after the other, each preempted when its plan time comes."""
    ctx = FakeCtx(plan)
    for job_id in range(1, runs + 1):
        job = {"job_id": job_id, "alloc": ["n1"], "partition": "spot", "requeue": True}
        job.update(phase="script", start_time=ctx.now, name="train")
        ctx.jobs = {job_id: job}
        slurm_preemption.on_run_start(ctx, job)
        ctx.now = job["preempt_at"]
        slurm_preemption.fire_due(ctx)
        ctx.now += 1.0
    return ctx


def test_plan_field_is_validated_in_both_spellings():
    base = {"mode": "poisson", "meanSeconds": 10, "seed": 3}
    assert slurm_preemption.normalize_plan(base)["unannounced_share"] == 0.0
    assert slurm_preemption.normalize_plan({**base, "unannouncedShare": 0.25})[
        "unannounced_share"
    ] == pytest.approx(0.25)
    assert slurm_preemption.normalize_plan({**base, "unannounced_share": 1})[
        "unannounced_share"
    ] == pytest.approx(1.0)
    for bad in (-0.1, 1.5, "half", True):
        with pytest.raises(ValueError, match="unannounced_share"):
            slurm_preemption.normalize_plan({**base, "unannounced_share": bad})
    with pytest.raises(ValueError, match="CustomJob plans have no unannounced_share"):
        custom_job_preemption.normalize({**base, "unannouncedShare": 0.5})


def test_the_settings_plan_carries_the_share():
    settings = config.EmulatorSettings(
        slurm_spot_preempt_mean_seconds=5, slurm_spot_preempt_unannounced_share=0.25
    )
    assert slurm_preemption.settings_plan(settings)["unannounced_share"] == pytest.approx(0.25)
    custom = config.EmulatorSettings(custom_job_spot_preempt_mean_seconds=5)
    assert custom_job_preemption.settings_plan(custom)["unannounced_share"] == 0.0


def test_a_quarter_unannounced_sends_sigkill_alone_and_keeps_the_seeded_times():
    plan = {"mode": "poisson", "mean_seconds": 10.0, "seed": 3, "unannounced_share": 0.25}
    ctx = run_plan(plan, 8)
    draws = slurm_preemption.unannounced_draws(3, 8)
    # seed 3: draws 0.491 0.857 0.909 0.072 0.350 0.031 0.238 0.292 -> runs 4, 6 and 7
    assert [job for job in range(1, 9) if draws[job - 1] < 0.25] == [4, 6, 7]
    expected = []
    for job in range(1, 9):
        expected += [(job, "SIGKILL")] if job in (4, 6, 7) else [(job, "SIGCONT"), (job, "SIGTERM")]
    assert ctx.procs.sent == expected
    assert ctx.procs.discarded == {4, 6, 7}  # the runs lost without notice ended at once
    assert [e["noticeSeconds"] for e in ctx.events] == [
        0.0 if job in (4, 6, 7) else NOTICE for job in range(1, 9)
    ]
    assert ctx.state["plan_fired"] == 8
    announced = run_plan({**plan, "unannounced_share": 0.0}, 8)
    assert [(e["epoch"], e["runSeconds"]) for e in ctx.events] == [
        (e["epoch"], e["runSeconds"]) for e in announced.events
    ]
    assert [e["noticeSeconds"] for e in announced.events] == [NOTICE] * 8
    assert all(sig != "SIGKILL" for _, sig in announced.procs.sent)


def test_an_unannounced_kill_requeues_the_job_at_once_with_its_node_down():
    ctx = FakeCtx({"mode": "fixed", "after_seconds": 2, "unannounced_share": 1})
    job = {"job_id": 1, "alloc": ["n1"], "partition": "spot", "requeue": True, "name": "train"}
    job.update(phase="script", start_time=ctx.now, state="RUNNING", restart_cnt=0)
    ctx.jobs = {1: job}
    slurm_preemption.on_run_start(ctx, job)
    ctx.now = job["preempt_at"]
    slurm_preemption.fire_due(ctx)
    # In the same step: SIGKILL, the node DOWN, the job PENDING again (no step later).
    assert ctx.procs.sent == [(1, "SIGKILL")] and ctx.procs.discarded == {1}
    assert job["state"] == "PENDING" and job["restart_cnt"] == 1
    assert job["kill"] is None and job["alloc"] == [] and job["last_nodes"] == ["n1"]
    assert job["eligible_time"] == 102.0 + NOTICE_FREE_REQUEUE_DELAY
    assert ctx.state["nodes"]["n1"]["state"] == "DOWN"
    assert ctx.state["nodes"]["n1"]["reason"] == "Spot VM preempted"
    assert ctx.events[0]["noticeSeconds"] == 0.0 and ctx.events[0]["runSeconds"] == 2.0
    assert slurm_lifecycle.start_kill.__kwdefaults__["terminate"] is True


def test_rest_plan_with_share_one_kills_without_sigterm(
    slurm_emulator_factory, cluster_body, tmp_path
):
    server = slurm_emulator_factory(slurm_requeue_delay_seconds=0.2, slurm_preempt_notice_seconds=1)
    client = SlurmTestClient.create_cluster(server.base_url, "c1", cluster_body)
    url = f"{server.base_url}/emulator/v1/slurm/preemptions"
    body = {"cluster": "c1", "mode": "fixed", "afterSeconds": 0.5, "maxCount": 1}
    plan = requests.post(url, json={**body, "unannouncedShare": 1}, timeout=5).json()["plan"]
    assert plan["unannounced_share"] == 1.0
    log = tmp_path / "log"
    script = (
        "#!/bin/bash\n"
        f'echo "start ${{SLURM_RESTART_COUNT:-0}}" >> {log}\n'
        f"trap 'echo term >> {log}' TERM\n"
        'if [ "${SLURM_RESTART_COUNT:-0}" -ge 1 ]; then exit 0; fi\n'
        "while true; do sleep 0.05; done\n"
    )
    job_id = client.submit(script, name="ckpt", requeue=True)
    done = client.wait_state(job_id, "COMPLETED", timeout=10)
    assert done["restart_cnt"] == 1
    assert log.read_text().split("\n") == ["start 0", "start 1", ""]
    timeline = requests.get(url, params={"cluster": "c1"}, timeout=5).json()["preemptions"]
    assert [(e["jobId"], e["outcome"], e["noticeSeconds"]) for e in timeline] == [
        (job_id, "REQUEUE", 0.0)
    ]
