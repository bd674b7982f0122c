"""What the Slurm scenarios share: a job as the training step submits it, slurmstepd's lines in a
job's log, how multi-node scenarios preempt, and the processes a job left on this machine."""

from __future__ import annotations

import os
import pathlib
import re
import sys
import time

from vsp.components.runtime.slurm import script

# How the scenarios preempt: the emulator reclaims a Spot VM (one of the job's nodes), the real
# Slurm preempts by partition priority (an on-demand job needing a node).
MULTINODE_PREEMPTION = {"emulated": "spot", "real": "partition"}

TRAINER = [sys.executable, "-m", "vsp.examples.trainer", "--seed", "7", "--step-seconds", "0.1"]


def job(backend, name: str, command: list[str], **fields) -> script.JobDescription:
    """A job as the training step submits it, in the backend's work folder."""
    return script.JobDescription(
        run_key=f"conf-{name}-{os.getpid()}-{time.monotonic_ns() % 10**6}",
        partition=fields.pop("partition", "spot"),
        working_directory=str(backend.workdir),
        command=command,
        standard_output=str(backend.workdir / f"{name}-%j.out"),
        warning_signal=fields.pop("warning_signal", None),
        **fields,
    )


def sh(text: str) -> list[str]:
    return ["/bin/bash", "-c", text]


def stepd_lines(log: pathlib.Path, job_id: int) -> list[str]:
    """slurmstepd's ``*** JOB N ON NODE CANCELLED AT T[ DUE TO ...] ***`` lines in a job's log,
    with the node and time replaced by ``NODE`` and ``T``."""
    pattern = re.compile(
        rf"^slurmstepd: error: \*\*\* JOB {job_id} ON \S+ CANCELLED AT "
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?P<why>.*) \*\*\*$"
    )
    found = (pattern.match(line) for line in log.read_text().splitlines())
    return [f"CANCELLED{m.group('why')}" for m in found if m]


def job_processes(run_key: str) -> list[int]:
    """Pids of this machine's processes whose environment carries the job's run key."""
    needle = f"VSP_RUN_KEY={run_key}".encode()
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def assert_no_process_left(run_key: str, within: float = 15.0) -> None:
    """Every process of the job is gone (the process table is read until ``within`` s)."""
    deadline = time.monotonic() + within
    while (left := job_processes(run_key)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == [], f"processes of job {run_key} remain: {left}"
