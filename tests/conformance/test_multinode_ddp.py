"""The DDP example (``vsp.examples.ddp_trainer``) on two nodes of both backends.

* Three preemptions of a 2-node job: every attempt's log shows rank 0 and rank 1 on two
  different nodes, the final model is bit-identical to an uninterrupted 2-node run's, and no
  process of the job remains afterwards (the process table is read).
* A 2-node run preempted once, then resumed on one node: it continues from the checkpointed
  step (through torch.distributed.checkpoint's resharding) and its final loss is within
  ``RESUME_TOLERANCE`` (relative) of the uninterrupted 2-node run's.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import pytest

from tests.conformance.scenario_jobs import MULTINODE_PREEMPTION, assert_no_process_left
from vsp.components.runtime.slurm import script
from vsp.components.runtime.trainer import model_files

pytest.importorskip("torch", reason="the DDP example needs the torch extra: pip install .[torch]")

pytestmark = [pytest.mark.slurm_conformance, pytest.mark.slow]

STEPS = 200  # 10 s of steps: three preemptions land well before the end
TRAINER = [
    sys.executable,
    "-m",
    "vsp.examples.ddp_trainer",
    "--steps",
    str(STEPS),
    "--save-every",
    "10",
    "--step-seconds",
    "0.05",
    "--seed",
    "3",
]
# Relative difference of the final loss after a 2 -> 1 node resume (measured: about 2e-7;
# only the order of the gradient sums changes).
RESUME_TOLERANCE = 1e-5
# The uninterrupted reference: the same training without the sleep that paces the steps
# (--step-seconds only sleeps; the model is the same, which the bit-identical checks rely on).
REFERENCE = [*TRAINER, "--step-seconds", "0"]  # the last --step-seconds given counts
RANK_LINE = re.compile(r"rank (\d+)/(\d+) on node (\S+) \(pid \d+, restart (\d+)\)")


def submit(
    backend, name: str, nodes: int = 2, command: list[str] = TRAINER
) -> tuple[int, script.JobDescription]:
    path = os.environ["PATH"] if backend.kind == "real" else script.DEFAULT_PATH
    run = backend.workdir / name
    desc = script.JobDescription(
        run_key=f"conf-{name}-{os.getpid()}-{time.monotonic_ns() % 10**6}",
        partition="spot",
        working_directory=str(backend.workdir),
        command=command,
        standard_output=str(backend.workdir / f"{name}-%j.out"),
        nodes=nodes,
        launcher="srun",
        environment={
            "PATH": path,
            "VSP_CHECKPOINT_DIR": str(run / "checkpoints"),
            "VSP_MODEL_DIR": str(run / "model"),
            "GLOO_SOCKET_IFNAME": "lo",  # every node of this machine's clusters is 127.0.0.1
        },
    )
    return backend.client.submit(desc), desc


def history(backend, name: str) -> list[dict]:
    path = backend.workdir / name / "checkpoints" / "history.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for_progress(backend, name: str, attempt: int) -> None:
    """Until attempt ``attempt`` (0-based) started and committed a checkpoint of its own."""
    deadline = time.monotonic() + backend.timeout + 60
    while time.monotonic() < deadline:
        lines = history(backend, name)
        starts = [i for i, r in enumerate(lines) if r["event"] in ("start", "resume")]
        if len(starts) > attempt and any(
            r["event"] == "saved" for r in lines[starts[attempt] + 1 :]
        ):
            return
        time.sleep(0.2)
    raise AssertionError(
        f"attempt {attempt} of {name} made no checkpoint: {history(backend, name)}"
    )


def attempts_in_log(backend, name: str, job_id: int) -> dict[int, dict[int, str]]:
    """{restart: {rank: node}} from the job's log (appended over every attempt)."""
    seen: dict[int, dict[int, str]] = {}
    for rank, world, node, restart in RANK_LINE.findall(
        (backend.workdir / f"{name}-{job_id}.out").read_text()
    ):
        assert world in ("1", "2")
        seen.setdefault(int(restart), {})[int(rank)] = node
    return seen


def run_uninterrupted(backend, name: str) -> tuple[dict, dict]:
    job_id, desc = submit(backend, name, command=REFERENCE)
    done = backend.finish(job_id, timeout=backend.timeout + 120)
    assert done.state == ("COMPLETED",), (backend.workdir / f"{name}-{job_id}.out").read_text()
    assert_no_process_left(desc.run_key)
    return model_files.read_model_dir(backend.workdir / name / "model")


def test_ddp_survives_three_preemptions_bit_identical(multinode_backend):
    backend = multinode_backend
    job_id, desc = submit(backend, "ddp")
    for attempt in range(3):
        wait_for_progress(backend, "ddp", attempt)
        backend.preempt(job_id, MULTINODE_PREEMPTION[backend.kind])
    done = backend.finish(job_id, timeout=backend.timeout * 4 + 120)
    log = (backend.workdir / f"ddp-{job_id}.out").read_text()
    assert done.state == ("COMPLETED",) and done.restart_cnt == 3, log
    assert_no_process_left(desc.run_key)
    attempts = attempts_in_log(backend, "ddp", job_id)
    assert sorted(attempts) == [0, 1, 2, 3]
    for restart, ranks in attempts.items():
        assert sorted(ranks) == [0, 1] and ranks[0] != ranks[1], (restart, ranks)
    records = history(backend, "ddp")
    notices = [r for r in records if r["event"] == "save" and r.get("reason") == "notice"]
    # Every run resumed from the last checkpoint its predecessor committed: nothing committed
    # was lost.
    runs: list[list[dict]] = []
    for record in records:
        if record["event"] in ("start", "resume"):
            runs.append([record])
        else:
            runs[-1].append(record)
    assert len(runs) == 4, records
    for before, after in zip(runs, runs[1:], strict=False):
        committed = [r["step"] for r in before if r["event"] == "saved"]
        assert committed and after[0]["step"] == committed[-1], (before, after[0])
    # Notice saves: a real Slurm signals the batch step's srun too, and srun answers SIGTERM by
    # killing every task at once (src/srun/srun_job.c), so a 2-node notice save races that
    # kill; a run that lost it resumed from its last periodic save (checked above). On the
    # emulator one preemption in three lost its notice save in two loaded CI runs, cause not
    # yet found (no trace of the ranks handling the signal): at least one must land here.
    assert notices, (records, log[-3000:])
    arrays, meta = model_files.read_model_dir(backend.workdir / "ddp" / "model")
    assert meta["step"] == STEPS and meta["world_size"] == 2
    reference, reference_meta = run_uninterrupted(backend, "ddp-reference")
    assert sorted(arrays) == sorted(reference)
    for key in arrays:
        assert arrays[key].tobytes() == reference[key].tobytes(), key
    assert meta["final_loss"] == reference_meta["final_loss"]


def test_ddp_resumes_from_two_nodes_on_one(multinode_backend):
    backend = multinode_backend
    job_id, _ = submit(backend, "shrink")
    wait_for_progress(backend, "shrink", 0)
    backend.preempt(job_id, MULTINODE_PREEMPTION[backend.kind])
    # Requeued: stop it there, as a step giving up the second node would.
    backend.wait(job_id, lambda j: j.restart_cnt >= 1)
    backend.client.cancel(job_id)
    backend.finish(job_id)
    saved = max(r["step"] for r in history(backend, "shrink") if r["event"] == "saved")
    assert 0 < saved < STEPS // 2  # most of the run is left for the single node
    one_id, desc = submit(backend, "shrink", nodes=1)
    done = backend.finish(one_id, timeout=backend.timeout + 120)
    log = (backend.workdir / f"shrink-{one_id}.out").read_text()
    assert done.state == ("COMPLETED",), log
    assert f"resumed from step {saved} (1 rank(s) now)" in log
    assert_no_process_left(desc.run_key)
    _, meta = model_files.read_model_dir(backend.workdir / "shrink" / "model")
    _, reference = run_uninterrupted(backend, "shrink-reference")
    assert meta["step"] == STEPS and meta["world_size"] == 1
    difference = abs(meta["final_loss"] - reference["final_loss"]) / reference["final_loss"]
    print(
        f"2 -> 1 node resume from step {saved}: final loss {meta['final_loss']!r}, "
        f"uninterrupted 2-node {reference['final_loss']!r}"
    )
    assert difference <= RESUME_TOLERANCE


def test_ddp_under_torchrun_two_nodes_two_workers_each(multinode_backend):
    """``launcher="torchrun"``: one torchrun per node, c10d rendezvous at the head, 4 ranks."""
    backend = multinode_backend
    bin_dir = os.path.dirname(sys.executable)  # torchrun is installed beside this Python
    path = os.environ["PATH"] if backend.kind == "real" else script.DEFAULT_PATH
    run = backend.workdir / "torchrun"
    desc = script.JobDescription(
        run_key=f"conf-torchrun-{os.getpid()}-{time.monotonic_ns() % 10**6}",
        partition="spot",
        working_directory=str(backend.workdir),
        command=[sys.executable, "-m", "vsp.examples.ddp_trainer", "--steps", "30", "--seed", "3"],
        standard_output=str(backend.workdir / "torchrun-%j.out"),
        nodes=2,
        tasks_per_node=2,
        launcher="torchrun",
        environment={
            "PATH": f"{bin_dir}:{path}",
            "VSP_CHECKPOINT_DIR": str(run / "checkpoints"),
            "VSP_MODEL_DIR": str(run / "model"),
            "GLOO_SOCKET_IFNAME": "lo",
        },
    )
    job_id = backend.client.submit(desc)
    done = backend.finish(job_id, timeout=backend.timeout + 120)
    log = (backend.workdir / f"torchrun-{job_id}.out").read_text()
    assert done.state == ("COMPLETED",), log
    ranks = {int(r): node for r, w, node, _ in RANK_LINE.findall(log) if w == "4"}
    assert sorted(ranks) == [0, 1, 2, 3]
    assert len(set(ranks.values())) == 2  # two nodes, two workers on each
    assert "rendezvous " in log and "--rdzv" not in log  # the script's line, no argv echo
    _, meta = model_files.read_model_dir(run / "model")
    assert meta["world_size"] == 4 and meta["step"] == 30
    assert_no_process_left(desc.run_key)
