"""Backends for tests of the training driver that need no emulator."""

from __future__ import annotations

from vsp.components.runtime.core import polling
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training import driver
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.recovery import Attempt, SpotRecovery, Target


class SucceedingBackend(TrainingBackend):
    resource_type = "SlurmJob"

    def find(self, run_key):
        return []

    def submit(self, run_key, index, target):
        return Attempt("100", target)

    def refresh(self, attempt):
        attempt.outcome, attempt.requeues = Outcome.SUCCEEDED, 0

    def cancel(self, attempt):
        raise AssertionError("nothing to cancel")

    def uri(self, attempt):
        return f"https://h/v1/jobs/{attempt.job_id}"

    def log_tail(self, attempt):
        return ""


def supervise_success(folder, run_key="run-1", pages=None):
    """``driver.supervise`` of a run that succeeds at once, its checkpoints and model in
    ``folder`` (``ckpt``, ``model``); the report pages are appended to ``pages``."""
    return driver.supervise(
        SucceedingBackend(),
        SpotRecovery(Target("spot", spot=True)),
        run_key,
        checkpoint_dir=str(folder / "ckpt"),
        model_dir=str(folder / "model"),
        poll_backoff=polling.Backoff(initial=0, maximum=0, jitter=0),
        write_report=(pages if pages is not None else []).append,
    )
