"""Multi-node jobs on both backends: ``srun`` tasks, preemption, a failing rank, no orphans.

A 2-node job with the ``srun`` launcher (``slurm.launcher``) on the emulated cluster (4 Spot
nodes) and on a real Slurm with two slurmd nodes (``$VSP_REAL_SLURM_MULTI``).
"""

from __future__ import annotations

import os
import pathlib
import time

import pytest

from tests.conformance.scenario_jobs import MULTINODE_PREEMPTION, assert_no_process_left
from vsp.components.runtime.slurm import script

pytestmark = [pytest.mark.slurm_conformance, pytest.mark.slow]

# Every task writes one line: its rank variables, Slurm's per-task variables, an extra
# variable, and whether the head node's name resolves.
REPORT = (
    'echo "$RANK $WORLD_SIZE $LOCAL_RANK $NODE_RANK $SLURM_PROCID $SLURM_NODEID '
    "$SLURMD_NODENAME $MASTER_ADDR $MASTER_PORT $LOCAL_WORLD_SIZE "
    '$(getent hosts "$MASTER_ADDR" >/dev/null && echo resolves || echo unresolved)|$EXTRA"'
)


def job(backend, name: str, text: str, **fields) -> script.JobDescription:
    """A 2-node ``srun`` job running bash ``text`` in every task."""
    path = os.environ["PATH"] if backend.kind == "real" else script.DEFAULT_PATH
    environment = {"PATH": path, **fields.pop("environment", {})}
    return script.JobDescription(
        run_key=f"conf-{name}-{os.getpid()}-{time.monotonic_ns() % 10**6}",
        partition="spot",
        working_directory=str(backend.workdir),
        command=["/bin/bash", "-c", text],
        standard_output=str(backend.workdir / f"{name}-%j.out"),
        nodes=2,
        launcher="srun",
        environment=environment,
        **fields,
    )


def wait_for(path: pathlib.Path, count: int, timeout: float) -> list[str]:
    """The lines of ``path`` once it has ``count`` of them."""
    return wait_for_lines(path, lambda lines: len(lines) >= count, f"{count} lines", timeout)


def wait_for_lines(path: pathlib.Path, done, what: str, timeout: float) -> list[str]:
    """The lines of ``path`` once ``done(lines)`` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text().splitlines() if path.exists() else []
        if done(lines):
            return lines
        time.sleep(0.2)
    raise AssertionError(f"{path}: no {what} after {timeout} s: {lines}")


def test_per_task_environment_of_two_node_srun(multinode_backend):
    backend = multinode_backend
    desc = job(backend, "ranks", f"{REPORT} >> ranks.txt", environment={"EXTRA": "a b=c"})
    job_id = backend.client.submit(desc)
    done = backend.finish(job_id)
    assert done.state == ("COMPLETED",), (backend.workdir / f"ranks-{job_id}.out").read_text()
    lines = sorted((backend.workdir / "ranks.txt").read_text().splitlines())
    assert len(lines) == 2
    rows = [line.split("|")[0].split() for line in lines]
    assert [line.split("|")[1] for line in lines] == ["a b=c", "a b=c"]
    # RANK WORLD_SIZE LOCAL_RANK NODE_RANK PROCID NODEID NODENAME MASTER PORT LWS resolves
    assert [r[:6] for r in rows] == [
        ["0", "2", "0", "0", "0", "0"],
        ["1", "2", "0", "1", "1", "1"],
    ]
    assert rows[0][6] != rows[1][6]  # two different nodes
    assert rows[0][7] == rows[1][7] == rows[0][6]  # head = the node of rank 0
    assert rows[0][8] == rows[1][8] and 20000 <= int(rows[0][8]) < 40000
    assert [r[9:] for r in rows] == [["1", "resolves"], ["1", "resolves"]]
    assert_no_process_left(desc.run_key)


def test_preempting_a_two_node_job_requeues_it_whole(multinode_backend):
    backend = multinode_backend
    text = (
        'r=${SLURM_RESTART_COUNT:-0}; trap "echo term $RANK $r >> signals.txt; exit 143" TERM; '
        'echo "start $RANK $r $SLURMD_NODENAME" >> starts.txt; '
        "while :; do sleep 0.2; done"
    )
    desc = job(backend, "preempt", text)
    job_id = backend.client.submit(desc)
    starts = wait_for(backend.workdir / "starts.txt", 2, backend.timeout)
    backend.preempt(job_id, MULTINODE_PREEMPTION[backend.kind])
    # Both ranks get SIGTERM (a task may see it twice, from its step and from srun passing on
    # the batch step's, and run its trap twice: as with real Slurm).
    both = {"term 0 0", "term 1 0"}
    signals = wait_for_lines(
        backend.workdir / "signals.txt", lambda lines: both <= set(lines), "SIGTERM of both ranks",
        backend.timeout,
    )  # fmt: skip
    assert {line for line in signals if line.endswith(" 0")} == both
    starts = wait_for(backend.workdir / "starts.txt", 4, backend.timeout)
    again = backend.client.get_job(job_id)
    assert again.restart_cnt >= 1
    first = sorted(line.rsplit(" ", 1)[0] for line in starts[:2])
    second = sorted(line.rsplit(" ", 1)[0] for line in starts[2:4])
    assert first == ["start 0 0", "start 1 0"] and second == ["start 0 1", "start 1 1"]
    assert len({line.split()[3] for line in starts[2:4]}) == 2  # again on two nodes
    assert backend.client.cancel(job_id) is True
    assert backend.finish(job_id).base_state == "CANCELLED"
    assert_no_process_left(desc.run_key)


def test_a_failing_rank_fails_the_job_and_ends_the_others(multinode_backend):
    backend = multinode_backend
    text = (
        'trap "echo term $RANK >> signals.txt; exit 143" TERM; '
        'if [ "$RANK" = 1 ]; then sleep 1; exit 3; fi; while :; do sleep 0.2; done'
    )
    desc = job(backend, "rankfail", text)
    started = time.monotonic()
    job_id = backend.client.submit(desc)
    failed = backend.finish(job_id, timeout=backend.timeout + 60)
    assert failed.state == ("FAILED",) and failed.return_code == 1  # srun: 143, remapped
    assert failed.outcome().value == "USER_FAILURE"
    assert time.monotonic() - started < 60  # not left running until a time limit
    assert (backend.workdir / "signals.txt").read_text().split("\n")[0] == "term 0"
    log = (backend.workdir / f"rankfail-{job_id}.out").read_text()
    assert "task 1: Exited with exit code 3" in log
    assert_no_process_left(desc.run_key)
