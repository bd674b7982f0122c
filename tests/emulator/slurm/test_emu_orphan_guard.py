"""Job processes do not outlive an emulator that is SIGKILLed (``slurm/orphan_guard.py``)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

from vsp.vertex_emulator.slurm import orphan_guard
from vsp.vertex_emulator.slurm import process as slurm_process


def _running(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait_for(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_a_sigkilled_owner_takes_its_job_processes_with_it(tmp_path):
    # The owner (an emulator's process table in a process of its own) starts a job whose
    # script starts a child of its own, says their pids, then waits to be killed.
    owner = textwrap.dedent(
        f"""
        import pathlib, sys, time
        from vsp.vertex_emulator.slurm import process
        table = process.ProcessTable()
        script = pathlib.Path({str(tmp_path)!r}) / "job.sh"
        text = "#!/bin/bash\\nsleep 60 &\\necho $! > {tmp_path}/child\\nwait\\n"
        path = process.write_script(script, text)
        proc = table.start(("c1", 1), "script", path, text, cwd={str(tmp_path)!r},
                           env={{"PATH": "/usr/bin:/bin"}}, stdout={str(tmp_path / "out")!r},
                           stderr={str(tmp_path / "out")!r}, append=False)
        print(proc.pgid, flush=True)
        time.sleep(120)
        """
    )
    popen = subprocess.Popen([sys.executable, "-c", owner], stdout=subprocess.PIPE, text=True)
    try:
        leader = int(popen.stdout.readline())
        _wait_for(lambda: (tmp_path / "child").is_file() and (tmp_path / "child").read_text())
        child = int((tmp_path / "child").read_text())
        assert _running(leader) and _running(child)
        popen.send_signal(signal.SIGKILL)
        popen.wait(timeout=10)
        _wait_for(lambda: not _running(leader) and not _running(child))
    finally:
        popen.kill()
        popen.wait()
        slurm_process.kill_stale_group(locals().get("leader"), str(tmp_path / "job.sh"))


def test_the_guard_spares_a_group_whose_leader_runs_something_else(tmp_path):
    # A recorded pid now leading another program (pid reuse) is never signalled.
    other = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        guard = orphan_guard.OrphanGuard()
        guard.record(other.pid, str(tmp_path / "job.sh"))
        guard.close()
        time.sleep(0.2)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_shutdown_kills_the_jobs_and_ends_the_guard(tmp_path):
    table = slurm_process.ProcessTable()
    text = "#!/bin/bash\nsleep 60\n"
    path = slurm_process.write_script(tmp_path / "job.sh", text)
    proc = table.start(
        ("c1", 1), "script", path, text, cwd=str(tmp_path), env={"PATH": os.environ["PATH"]},
        stdout=str(tmp_path / "out"), stderr=str(tmp_path / "out"), append=False,
    )  # fmt: skip
    guard = table._guard._popen
    assert guard is not None and guard.poll() is None
    assert table.shutdown() == 1
    assert proc.popen.returncode is not None
    assert guard.poll() is not None  # reaped: no guard process is left behind
