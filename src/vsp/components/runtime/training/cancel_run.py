"""A cancelled training step's last act: cancel every unfinished job of its run, in bounded time.

The step was told to stop (SIGTERM from Vertex AI's cancel, or its local run gone): it looks its
run's jobs up again (one whose submit was in flight included), cancels each that has not ended,
and ends as cancelled whatever the service answers. Signals are ignored meanwhile (a second
Ctrl-C included), so every request, retries included, is bounded by ``CANCEL_SECONDS``: a service
that did not answer made a cancelled step retry for minutes, deaf to signals.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Sequence

from vsp.components.runtime.core import errors
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.recovery import Attempt

log = logging.getLogger(__name__)

# How long the cleanup may take, requests and retries included, s: under Kubernetes' default
# 30 s between a pod's SIGTERM and its SIGKILL.
CANCEL_SECONDS = 20.0


def cancel_run_jobs(backend: TrainingBackend, attempts: Sequence[Attempt], run_key: str) -> None:
    """Cancels the unfinished jobs among ``attempts`` and those ``backend.find`` names.

    Args:
        backend: The run's backend.
        attempts: The attempts the step knows.
        run_key: The run's key (what ``find`` looks for).
    """
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    for sig in previous:  # finish the cleanup first (a second Ctrl-C included)
        with contextlib.suppress(ValueError):
            signal.signal(sig, signal.SIG_IGN)
    backend.limit_requests(CANCEL_SECONDS)
    try:
        known = {a.job_id: a for a in attempts}
        try:
            for attempt in backend.find(run_key):
                known.setdefault(attempt.job_id, attempt)
        except errors.VspError as exc:
            log.warning("could not list the run's jobs while cancelling: %s", exc)
        for attempt in known.values():
            with contextlib.suppress(errors.VspError):
                backend.refresh(attempt)
            if attempt.outcome.terminal:
                continue
            log.warning("step cancelled: cancelling job %s", attempt.job_id)
            try:
                backend.cancel(attempt)
            except errors.VspError as exc:  # the step still ends as cancelled
                log.error(
                    "could not cancel job %s (%s): it may still run; cancel it at %s",
                    attempt.job_id,
                    exc,
                    backend.uri(attempt),
                )
    finally:
        for sig, handler in previous.items():
            with contextlib.suppress(ValueError):
                signal.signal(sig, handler)
