"""Stopping a local run as Vertex AI cancels one: a signal to the run reaches its steps.

Vertex AI cancels a run by sending SIGTERM to the running step, whose runtime cancels its remote
job (``core.step.cancel_on_sigterm``), and then runs the exit handler. A terminal's Ctrl-C
reaches every process of the foreground group, the steps included; but a SIGTERM (``timeout``, a
CI job cancelled, ``kill PID``) or a SIGINT sent to the pid reaches only the process running
the pipeline, and its steps and their Slurm jobs would run on, orphaned, against an emulator
that is gone.

While a run is under way ``forwarded`` catches SIGTERM and SIGINT:

* the first is passed on as SIGTERM to the running step: the processes this one started in its
  own process group (the emulator's job processes have sessions of their own and are left to
  the step's cancel, as on a cluster);
* from then on, the steps that would create or train (``STARTS``) are not started; teardown and
  exit tasks run, as on Vertex;
* a second signal stops at once (``stopped_at_once.StoppedAtOnce``, a ``KeyboardInterrupt``;
  the run's cluster is labelled to expire, as the exit task does not run).

Linux only (``/proc``), like the emulator's jobs; elsewhere, or off the main thread, the run is
left to the signals' default behaviour. The step processes are read from ``/proc`` by hand:
psutil would list them too, but it is not a dependency, and kfp.local keeps its ``Popen``
objects to itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import signal
import sys
import threading
from collections.abc import Iterator

from vsp.pipelines.local import stopped_at_once
from vsp.pipelines.vertex import caching

# The vsp steps that create something or train: not started once the run is cancelled.
STARTS = frozenset(
    {
        "check_run_parameters",
        "create_cluster",
        "ensure_slurm_account",
        "train_on_cluster",
        "train_custom_job",
        "register_model",
    }
)
_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclasses.dataclass
class Interruption:
    """What stopped the run: the first signal received (0: none)."""

    signum: int = 0

    @property
    def exit_code(self) -> int:
        """128 + the signal, as a shell reports a process ended by it (143, 130)."""
        return 128 + self.signum if self.signum else 0

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum else ""


def step_processes() -> list[int]:
    """The live processes this one started in its own process group (the running step, a pip
    building a step's environment), read from ``/proc``."""
    me, group = os.getpid(), os.getpgid(0)
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) "
        if int(fields[1]) == me and int(fields[2]) == group:  # ppid, pgrp
            found.append(int(entry.name))
    return found


def started_step(command: list[str]) -> str:
    """The vsp step a task's command runs ('' for another component)."""
    return caching.vsp_step(" ".join(command or []))


@contextlib.contextmanager
def forwarded() -> Iterator[Interruption]:
    """Catches SIGTERM and SIGINT during a run; see the module docstring."""
    state = Interruption()
    if threading.current_thread() is not threading.main_thread() or not os.path.isdir("/proc"):
        yield state
        return
    from kfp.local import status  # noqa: PLC0415
    from kfp.local import subprocess_task_handler as handler  # noqa: PLC0415

    def on_signal(signum, _frame):
        if state.signum:
            raise stopped_at_once.StoppedAtOnce(128 + signum)
        state.signum = signum
        steps = step_processes()
        with contextlib.suppress(RuntimeError):  # stderr busy in the interrupted frame
            print(
                f"\nrun-local: {signal.Signals(signum).name} received: cancelling the running "
                f"step ({len(steps)} process(es) signalled; its Slurm job is cancelled), steps "
                "that create or train are not started, the exit task runs. Send it again to "
                "stop at once.",
                file=sys.stderr,
                flush=True,
            )
        for pid in steps:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    original_run = handler.SubprocessTaskHandler.run

    def run(self):
        step = started_step(self.full_command)
        if state.signum and step in STARTS:
            print(f"not started: {step} (the run was cancelled)", flush=True)
            return status.Status.FAILURE
        return original_run(self)

    previous = {signum: signal.signal(signum, on_signal) for signum in _SIGNALS}
    handler.SubprocessTaskHandler.run = run
    try:
        yield state
    finally:
        handler.SubprocessTaskHandler.run = original_run
        for signum, action in previous.items():
            signal.signal(signum, action)
