"""What the Slurm conformance scenarios share: a job as the training step submits it, and
slurmstepd's lines in a job's log."""

from __future__ import annotations

import os
import pathlib
import re
import sys
import time

from vsp.components.runtime.slurm import script

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
