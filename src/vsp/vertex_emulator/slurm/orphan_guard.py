"""Job processes do not outlive the emulator that started them, however it ends.

Job processes run in sessions of their own, so a SIGKILLed emulator (or ``vsp run-local``, which
embeds one) would leave its training processes running with no one to stop them. The guard is a
small process of its own (a new session too, so a signal sent to the emulator's group spares it)
that reads one line per job process the emulator starts, ``PGID MARKER``, on a pipe only the
emulator holds. The pipe's end, however the emulator ends, is the signal: the guard then SIGKILLs
each recorded group whose leader still runs its marker (``process.kill_stale_group``'s check,
so a reused pid is never signalled) and exits. A restarted emulator would treat those jobs as
node failures anyway (``lifecycle.lost``); the guard only makes it happen at once.

The guard runs with ``-I -S`` and imports nothing of ``vsp``, so it starts in milliseconds.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading

log = logging.getLogger(__name__)

# Run by the guard process: the standard library only.
_GUARD = """
import os, signal, sys
groups = []
for line in sys.stdin:
    pgid, _, marker = line.rstrip("\\n").partition(" ")
    if pgid.isdigit() and marker:
        groups.append((int(pgid), marker))
for pgid, marker in groups:
    try:
        with open(f"/proc/{pgid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\\0")
        if os.fsencode(marker) in argv and os.getpgid(pgid) == pgid:
            os.killpg(pgid, signal.SIGKILL)
    except (OSError, ProcessLookupError):
        pass
"""


class OrphanGuard:
    """The guard of one process table, started with the first job process it records."""

    def __init__(self) -> None:
        self._popen: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def record(self, pgid: int, marker: str) -> None:
        """Tells the guard of a process group to kill should the emulator end first.

        A guard that cannot be started or written to is logged, never fatal: the job runs on.
        """
        if "\n" in marker:
            return  # not a line; the group is still killed by a restarted emulator
        with self._lock:
            try:
                if self._popen is None or self._popen.poll() is not None:
                    self._popen = subprocess.Popen(
                        [sys.executable, "-I", "-S", "-c", _GUARD],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                        close_fds=True,
                    )
                assert self._popen.stdin is not None
                self._popen.stdin.write(f"{pgid} {marker}\n".encode())
                self._popen.stdin.flush()
            except OSError as exc:
                log.warning(
                    "job process %d is not guarded against the emulator's end: %s", pgid, exc
                )

    def close(self, timeout: float = 2.0) -> None:
        """Ends the guard (it kills whatever recorded group still runs) and reaps it."""
        with self._lock:
            popen, self._popen = self._popen, None
        if popen is None:
            return
        try:
            if popen.stdin is not None:
                popen.stdin.close()
            popen.wait(timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            popen.kill()
