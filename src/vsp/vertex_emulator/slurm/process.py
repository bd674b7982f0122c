"""Real local processes for emulated Slurm jobs.

Every prolog, batch script and epilog runs as its own process in a new session
(``start_new_session``), so its process group id is its pid and signals reach everything it
started. A group is only signalled while its leader is not yet reaped (so the id cannot have been
reused); when a leader exits, the rest of its group is killed before it is reaped, as Slurm kills
whatever a job leaves behind. Nothing is ever killed by name. Should the emulator's process end
without a shutdown (SIGKILL), ``orphan_guard`` kills the groups it leaves.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import pathlib
import signal
import subprocess
from typing import Any

from vsp.vertex_emulator.slurm import filesystem as cluster_filesystem
from vsp.vertex_emulator.slurm import orphan_guard

log = logging.getLogger(__name__)

DEFAULT_INTERPRETER = "/bin/bash"


@dataclasses.dataclass
class Proc:
    """One running process.

    Attributes:
        popen: The process.
        kind: ``prolog``, ``script`` or ``epilog``.
        marker: The script file it runs (identifies the process after an emulator restart).
    """

    popen: subprocess.Popen[bytes]
    kind: str
    marker: str

    @property
    def pgid(self) -> int:
        """Process group id (= pid: the process leads its own session)."""
        return self.popen.pid


def interpreter(script: str) -> list[str]:
    """argv prefix from a script's ``#!`` line (``/bin/bash`` without one)."""
    first = script.split("\n", 1)[0]
    if not first.startswith("#!"):
        return [DEFAULT_INTERPRETER]
    parts = first[2:].strip().split(None, 1)
    return parts or [DEFAULT_INTERPRETER]


def write_script(path: pathlib.Path, text: str) -> str:
    """Writes a script file (mode 0700) and returns its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(0o700)
    return str(path)


def _alive(popen: subprocess.Popen[bytes]) -> bool:
    return popen.returncode is None


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class ProcessTable:
    """The processes an emulator started, by (cluster name, job id)."""

    def __init__(self) -> None:
        self._procs: dict[tuple[str, int], Proc] = {}
        self._orphans: list[subprocess.Popen[bytes]] = []
        self._guard = orphan_guard.OrphanGuard()

    def get(self, key: tuple[str, int]) -> Proc | None:
        """The process of a job, if one is running (or exited but not yet collected)."""
        return self._procs.get(key)

    def start(
        self,
        key: tuple[str, int],
        kind: str,
        script_path: str,
        script_text: str,
        *,
        cwd: str,
        env: dict[str, str],
        stdout: str,
        stderr: str,
        append: bool,
        filesystem: cluster_filesystem.ClusterFilesystem | None = None,
    ) -> Proc:
        """Starts a script in a new session (killing any process still held under ``key``).

        Args:
            key: (cluster name, job id).
            kind: ``prolog``, ``script`` or ``epilog``.
            script_path: The script file to run.
            script_text: Its text (for the ``#!`` interpreter).
            cwd: Working directory. A batch script whose directory is missing starts in
                ``/tmp`` after an error line in its stderr, as with Slurm 24.11 (which creates
                the output files' folders, so a working directory holding the log exists);
                a prolog's or epilog's directory is created.
            env: The whole environment.
            stdout: File for standard output.
            stderr: File for standard error (may equal ``stdout``).
            append: Append to the output files instead of truncating them.
            filesystem: The cluster's own filesystem: paths above are as its jobs see them,
                and the process starts in a mount namespace that shows them (None = the
                host's paths as they are).

        Raises:
            OSError: The process could not be started.
        """
        self.discard(key)
        host = filesystem.host_path if filesystem else str
        if kind != "script":
            pathlib.Path(host(cwd)).mkdir(parents=True, exist_ok=True)
        argv = [*interpreter(script_text), script_path]
        if filesystem and filesystem.isolated:
            # The wrapper would start and then fail to exec; fail here, as an unwrapped start
            # does, so a missing interpreter reads the same either way.
            if not os.access(argv[0], os.X_OK):
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
        mode = "ab" if append else "wb"
        handles = []
        try:
            for path in dict.fromkeys([host(stdout), host(stderr)]):
                # slurmstepd 24.11 creates the output files' folders.
                pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
                handles.append(open(path, mode))
            if not os.path.isdir(host(cwd)):  # as slurmstepd 24.11 does: say so, use /tmp
                handles[-1].write(
                    f"slurmstepd: error: couldn't chdir to `{cwd}': No such file or "
                    "directory: going to /tmp instead\n".encode()
                )
                handles[-1].flush()
                cwd = "/tmp"
            if filesystem and filesystem.isolated:
                argv = filesystem.wrap(argv, cwd)
            popen = subprocess.Popen(
                argv,
                cwd=host(cwd),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=handles[0],
                stderr=handles[-1],
                start_new_session=True,
                close_fds=True,
            )
        finally:
            for handle in handles:
                handle.close()
        self._guard.record(popen.pid, script_path)
        proc = Proc(popen, kind, script_path)
        self._procs[key] = proc
        return proc

    def signal(self, key: tuple[str, int], sig: int, *, leader_only: bool = False) -> bool:
        """Sends a signal to a job's process group (or only its leader); False if none."""
        proc = self._procs.get(key)
        if proc is None or not _alive(proc.popen):
            return False
        if leader_only:
            try:
                os.kill(proc.popen.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        else:
            _killpg(proc.pgid, sig)
        return True

    def terminate(self, key: tuple[str, int]) -> bool:
        """SIGCONT then SIGTERM to the group, as Slurm does; False if no process."""
        sent = self.signal(key, signal.SIGCONT)
        return self.signal(key, signal.SIGTERM) and sent

    def finished(self, key: tuple[str, int]) -> tuple[int | None, int | None] | None:
        """(exit code, signal) once the leader has exited, else None.

        The rest of the group is killed and the leader reaped; the entry is removed.
        """
        proc = self._procs.get(key)
        if proc is None:
            return None
        popen = proc.popen
        if _alive(popen):
            try:
                state = os.waitid(os.P_PID, popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                state = True
            if state is None:
                return None
            _killpg(proc.pgid, signal.SIGKILL)
            popen.wait()
        del self._procs[key]
        code = popen.returncode
        return (None, -code) if code < 0 else (code, None)

    def discard(self, key: tuple[str, int]) -> None:
        """Kills a job's process group (SIGKILL) and forgets it (reaped later)."""
        proc = self._procs.pop(key, None)
        if proc is not None:
            if _alive(proc.popen):
                _killpg(proc.pgid, signal.SIGKILL)
            self._orphans.append(proc.popen)

    def keys(self) -> list[tuple[str, int]]:
        """Keys of every tracked process."""
        return list(self._procs)

    def reap(self) -> None:
        """Collects processes that were discarded."""
        self._orphans = [p for p in self._orphans if p.poll() is None]

    def shutdown(self) -> int:
        """SIGKILLs every process group; returns how many were alive."""
        alive = 0
        for key in list(self._procs):
            alive += _alive(self._procs[key].popen)
            self.discard(key)
        for popen in self._orphans:
            try:
                popen.wait(timeout=2)
            except subprocess.TimeoutExpired:
                log.warning("slurm job process %d did not exit after SIGKILL", popen.pid)
        self._orphans = []
        self._guard.close()
        return alive


def kill_stale_group(pgid: Any, marker: Any) -> bool:
    """SIGKILLs a group left by an earlier emulator, if its leader still runs ``marker``.

    Checks ``/proc/{pgid}/cmdline`` (and that the process leads group ``pgid``) so that a
    reused pid is never signalled.
    """
    if not isinstance(pgid, int) or pgid <= 1 or not marker:
        return False
    try:
        argv = pathlib.Path(f"/proc/{pgid}/cmdline").read_bytes().split(b"\0")
        if os.fsencode(str(marker)) not in argv or os.getpgid(pgid) != pgid:
            return False
    except (OSError, ProcessLookupError):
        return False
    _killpg(pgid, signal.SIGKILL)
    return True
