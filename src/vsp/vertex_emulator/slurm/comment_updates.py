"""Job comment updates that emulated jobs made with ``scontrol update JobId=ID Comment=TEXT``.

The emulated ``scontrol`` (``step_tools``) runs inside a job and cannot reach the emulator's
state, so it leaves each update as a file in the cluster's ``comment-updates`` folder (file name:
nanosecond time, process id, job id; content: the comment). ``apply`` sets them on the jobs, in
order, and removes them; the Slurm API applies them before it answers each call, so a call sees
every update made before it, as a Slurm controller would.
"""

from __future__ import annotations

import contextlib
from typing import Any

from vsp.vertex_emulator.slurm import step_tools

MAX_COMMENT = 4096


def apply(ctx: Any) -> int:
    """Sets the waiting comment updates on ``ctx``'s jobs; returns how many were applied."""
    folder = ctx.directory / step_tools.UPDATES_DIRNAME
    try:
        names = sorted(n for n in (p.name for p in folder.iterdir()) if not n.startswith("."))
    except OSError:
        return 0
    applied = 0
    for name in names:
        path = folder / name
        try:
            text = path.read_text(encoding="utf-8")[:MAX_COMMENT]
        except (OSError, UnicodeDecodeError):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
        job = ctx.jobs.get(int(name.rsplit("-", 1)[-1]))
        if job is not None:
            job["comment"] = text
            applied += 1
    return applied
