"""Backends for tests of the training driver that need no emulator."""

from __future__ import annotations

from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training.backends.interface import TrainingBackend
from vsp.components.runtime.training.recovery import Attempt


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
