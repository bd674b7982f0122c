"""Finding a Slurm job's stdout file as the training step names it.

The step's jobs write ``slurm-JOBID-RUNKEY.out`` (``job_logs.FILE_PATTERN``). A test that knows
the job's id but not the run key the step derived takes the one file of that id in the folder,
and fails when there is not exactly one.
"""

from __future__ import annotations

import pathlib

from vsp.components.runtime.training import job_logs


def job_log(folder: str | pathlib.Path, job_id: str | int) -> pathlib.Path:
    """The stdout file of job ``job_id`` in ``folder``."""
    pattern = job_logs.file_path(job_logs.FILE_PATTERN, str(job_id), "*")
    found = sorted(pathlib.Path(folder).glob(pattern))
    assert len(found) == 1, f"{len(found)} files match {pattern} in {folder}: {found}"
    return found[0]
