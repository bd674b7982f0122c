"""Drives a training run to success across preemptions: one loop for every backend.

``TrainingSupervisor.run`` submits an attempt through a ``TrainingBackend`` (Slurm job API, or
Vertex CustomJobs), records its id in ``gcp_resources`` before polling, polls it with the shared
poller, and asks a ``RecoveryStrategy`` what to do when it ends. It never submits blindly: the
attempts of a run are found again from ``gcp_resources`` and from the backend itself (every job
carries the run key), so a retried step re-attaches to the running job and keeps the counts of
earlier attempts. SIGTERM (pipeline cancel) cancels the running job before the step exits.

Attempt state machine (drawn in docs/recovery.md)::

    submit -> PENDING -> RUNNING -> SUCCEEDED                       -> done
                ^          |  \\-> PREEMPTED / requeued  -> strategy: resubmit (same checkpoint
                |          |                                        dir) or fall back, or fail
                +- requeue-+   \\-> USER_FAILURE          -> strategy: bounded restarts, or fail
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from vsp.components.runtime.core import errors, gcp_resources, polling, step
from vsp.components.runtime.core.errors import StepCancelled
from vsp.components.runtime.core.outcome import Outcome
from vsp.components.runtime.training import cancel_run, hang, poll_looks, poll_plan
from vsp.components.runtime.training.backends.interface import RunResult, TrainingBackend
from vsp.components.runtime.training.beacon import Beacon
from vsp.components.runtime.training.poll_window import PollWindow
from vsp.components.runtime.training.progress_feed import ProgressFeed
from vsp.components.runtime.training.recovery import Attempt, RecoveryStrategy, Target

log = logging.getLogger(__name__)

DEFAULT_BACKOFF = polling.Backoff(initial=5.0, maximum=60.0)
# The line before the job's log tail in a failed run's error (the local console quotes the
# lines after it whole: a trainer's traceback is the point of the message there).
LOG_TAIL_HEADING = "last lines of the job's log:"


class TrainingSupervisor:
    """Runs one training run to the end; see the module docstring.

    Args:
        backend: Where attempts run.
        strategy: What to do after each attempt.
        run_key: Identifies the run's jobs on the backend (name/comment/label).
        gcp_resources_path: Where job URIs are recorded before polling ('' to skip).
        timeout: Seconds the whole run may take (None: no limit).
        backoff: Poll delays.
        clock: Monotonic time source for waits.
        on_attempt_change: Called with the attempt whenever its state text changes.
        wall: Epoch-seconds source for the event timeline.
        poll_settings: When the backend writes beacons, the ``poll_plan`` intervals that
            decide when a poll calls Vertex (None: every poll calls Vertex, with ``backoff``).
        hang_rule: The stall rule applied to the trainer's progress files (``hang``); None or
            a floor of 0: no hang detection.
        keep_job_on_timeout: When ``timeout`` passes, leave the running job as it is (True)
            instead of cancelling it (False, the default).
        progress_feed: The run's progress messages (opened by the caller): polls wait on its
            pulls (``poll_looks.Pushed``); None: they sleep.
    """

    def __init__(
        self,
        backend: TrainingBackend,
        strategy: RecoveryStrategy,
        run_key: str,
        *,
        gcp_resources_path: str = "",
        timeout: float | None = None,
        backoff: polling.Backoff = DEFAULT_BACKOFF,
        clock: polling.Clock | None = None,
        on_attempt_change: Callable[[Attempt], None] | None = None,
        wall: Callable[[], float] = time.time,
        poll_settings: poll_plan.PlanSettings | None = None,
        hang_rule: hang.HangRule | None = None,
        keep_job_on_timeout: bool = False,
        progress_feed: ProgressFeed | None = None,
    ):
        self.backend = backend
        self.strategy = strategy
        self.run_key = run_key
        self.gcp_resources_path = gcp_resources_path
        self.timeout = timeout
        self.backoff = backoff
        self.clock = clock or polling.RealClock()
        self.on_attempt_change = on_attempt_change
        self.attempts: list[Attempt] = []
        self.events: list[dict] = []
        self.wall = wall
        self.poll_settings = poll_settings
        self.refreshes = 0
        self._seen_requeues: dict[str, int] = {}
        self.hang_watch = hang.HangWatch(hang_rule) if hang_rule and hang_rule.enabled else None
        self.keep_job_on_timeout = keep_job_on_timeout
        self.observations: list[dict] = []
        self.progress_feed = progress_feed

    def storage_calls(self) -> int:
        """Cloud Storage reads so far (``storage_reads``; 0 when the backend reads none)."""
        return self.backend.storage_calls()

    def _observe(self, attempt: Attempt, beacon: Beacon | None, called: bool) -> None:
        """Records what the step knows of the attempt when it changed: wall time, Vertex's
        outcome and requeues, the beacon's (restart, state) and where the beacon came from."""
        seen = {
            "job_id": attempt.job_id,
            "outcome": attempt.outcome.value,
            "requeues": attempt.requeues,
            "beacon": None if beacon is None else [beacon.restart, beacon.state],
            "channel": self.backend.beacon_channel(attempt) or "beacon",
        }
        last = next((o for o in reversed(self.observations) if o["job_id"] == attempt.job_id), {})
        if any(last.get(k) != v for k, v in seen.items()):
            self.observations.append({"time": self.wall(), "called": called, **seen})

    def pubsub_calls(self) -> int:
        """Pub/Sub calls so far for the progress messages (0 without them)."""
        return 0 if self.progress_feed is None else self.progress_feed.calls

    def vertex_calls(self) -> int:
        """Vertex calls so far: requests the backend counted, else state refreshes."""
        counted = self.backend.api_calls()
        return self.refreshes if counted is None else counted

    def _event(self, attempt: Attempt, event: str, when: float | None = None) -> None:
        """Records ``event`` at ``when`` (default now), within [job's last event, now]."""
        now = self.wall()
        at = now if when is None else min(when, now)
        earlier = [e["time"] for e in self.events if e["job_id"] == attempt.job_id]
        self.events.append({"time": max([at, *earlier]), "job_id": attempt.job_id, "event": event})

    def _changes(self, attempt: Attempt, before: Outcome, window: PollWindow) -> None:
        """Events of what a poll saw change, timed in its window. A restart count that rose
        ends the old stretch when the backend says the requeue ended it (``requeued_at``),
        within the window and never after the new run's start; without that time, a job that
        runs (or ran) again ends it at the new run's start, or earlier when the old run's last
        write is known (``PollWindow.last_write``)."""
        ran_again = attempt.outcome is not Outcome.PENDING and attempt.run_started_at is not None
        if attempt.requeues > self._seen_requeues.get(attempt.job_id, attempt.requeues):
            restart = window.when(attempt.run_started_at) if ran_again else None
            if restart is None or attempt.requeued_at is not None:
                end = window.ended(attempt.requeued_at, before=restart)
            elif window.bounded:  # its last write bounds it before the new start
                end = min(window.ended(), restart)
            else:
                end = restart
            self._event(attempt, "requeued", end)
            if ran_again and before is Outcome.RUNNING:
                self._event(attempt, "running", restart)
        self._seen_requeues[attempt.job_id] = attempt.requeues
        if attempt.outcome is not before:
            reported = attempt.ended_at if attempt.outcome.terminal else None
            reported = attempt.run_started_at if attempt.outcome is Outcome.RUNNING else reported
            ended = before is Outcome.RUNNING and attempt.outcome is not Outcome.RUNNING
            timed = window.ended(reported) if ended else window.when(reported)
            self._event(attempt, attempt.outcome.value.lower(), timed)

    def _known_attempts(self) -> list[Attempt]:
        found = {a.job_id: a for a in self.backend.find(self.run_key)}
        recorded = gcp_resources.read(self.gcp_resources_path)
        known_ids = [
            r.name.rsplit("/", 1)[-1]
            for r in recorded
            if r.resource_type == self.backend.resource_type
        ]
        missing = [job_id for job_id in known_ids if job_id not in found]
        if missing:
            log.warning("recorded jobs %s are no longer known to the backend", missing)
        attempts = list(found.values())
        for attempt in attempts:
            self.backend.refresh(attempt)
        return attempts

    def _record(self) -> None:
        resources = [
            gcp_resources.Resource(self.backend.resource_type, self.backend.uri(a))
            for a in self.attempts
        ]
        gcp_resources.write(self.gcp_resources_path, resources)

    def _submit(self, target: Target) -> Attempt:
        attempt = self.backend.submit(self.run_key, len(self.attempts), target)
        attempt.submitted_at = attempt.submitted_at or self.wall()
        self.attempts.append(attempt)
        self._record()
        self._event(attempt, "submitted")
        log.info(
            "submitted attempt %d as job %s on %s", len(self.attempts), attempt.job_id, target.name
        )
        return attempt

    def _wait(self, attempt: Attempt, deadline: float | None) -> None:
        pending_since = self.clock.now()
        seen_requeues = attempt.requeues
        switch = ""
        looks = poll_looks.for_backend(
            self.backend, self.poll_settings, self.clock, self.progress_feed
        )
        self._seen_requeues.setdefault(attempt.job_id, attempt.requeues)
        window = PollWindow(self.wall, self.backend.time_resolution, self.wall())
        stall: hang.Stall | None = None

        def probe() -> Attempt:
            nonlocal pending_since, seen_requeues, switch, stall
            before = attempt.outcome
            beacon, called = looks.before_call(attempt)
            if before is Outcome.RUNNING and beacon is not None:  # of the run Vertex saw
                window.evidence(
                    beacon,
                    attempt.job_id,
                    attempt.requeues,
                    read_at=self.wall() if looks.read_now else None,
                    heartbeat=looks.heartbeat_seconds,
                    cache=looks.cache_seconds,
                )
            if called:
                window.open()
                self.backend.refresh(attempt)
                self.refreshes += 1
                beacon = looks.after_call(attempt, beacon)
            self._observe(attempt, beacon, called)
            changed = attempt.outcome is not before or attempt.requeues > seen_requeues
            if changed or attempt.outcome.terminal or looks.log_due():
                looks.log_read()
                self._log_rest(attempt)
            if attempt.requeues > seen_requeues:
                log.warning(
                    "job %s was preempted and %s (%d time(s) so far)",
                    attempt.job_id,
                    self.backend.preempted_then,
                    attempt.requeues,
                )
                seen_requeues = attempt.requeues
            self._changes(attempt, before, window)
            window.close()
            if attempt.outcome is Outcome.PENDING and (
                before is not Outcome.PENDING or attempt.begin_time_hold
            ):
                pending_since = self.clock.now()  # a requeue hold is not missing capacity
            if not attempt.outcome.terminal:
                switch = self.strategy.switch_now(self.attempts, self.clock.now() - pending_since)
            if (
                self.hang_watch is not None
                and attempt.outcome is Outcome.RUNNING
                and self.hang_watch.due(attempt.job_id, self.clock.now())
            ):
                records = self.backend.progress(attempt)
                stall = self.hang_watch.observe(
                    attempt.job_id, attempt.requeues, records, self.clock.now(), self.wall()
                )
            return attempt

        def describe(a: Attempt) -> str:
            # The backend's detail may repeat the job id ("job 1 RUNNING ..."): said once.
            detail = a.detail.removeprefix(f"job {a.job_id} ")
            text = f"{a.outcome.value}; backend: {detail}" if detail else a.outcome.value
            if self.on_attempt_change is not None:
                self.on_attempt_change(a)
            return text

        remaining = None if deadline is None else max(0.0, deadline - self.clock.now())
        try:
            polling.poll_until(
                probe,
                lambda a: a.outcome.terminal or bool(switch) or stall is not None,
                what=f"job {attempt.job_id}",
                timeout=remaining,
                backoff=self.backoff,
                clock=self.clock,
                describe=describe,
                delay_for=looks.delay_for(),
                wait=looks.waiter(),
            )
        except errors.TimeoutExceededError as exc:
            raise self._timed_out(attempt, exc) from exc
        if stall is not None and not attempt.outcome.terminal:
            self._cancel_hung(attempt, stall, deadline)
            self._log_rest(attempt)
        if switch and not attempt.outcome.terminal:
            log.warning("job %s: %s", attempt.job_id, switch)
            self.backend.cancel(attempt)
            attempt.outcome = Outcome.CANCELLED
            attempt.switched_because = switch
            attempt.detail = f"switch: {switch}"
            self._event(attempt, "cancelled")
            self._log_rest(attempt)

    def _log_rest(self, attempt: Attempt) -> None:
        """Logs what the job wrote since the last read: the lines before a cancel tell why."""
        for line in self.backend.new_log_lines(attempt):
            log.info("[job %s] %s", attempt.job_id, line)

    def _cancel_hung(self, attempt: Attempt, stall: hang.Stall, deadline: float | None) -> None:
        """Cancels a hung attempt; records why and the node time it would have held."""
        text = stall.describe()
        log.warning("job %s: %s: cancelling it", attempt.job_id, text)
        self.backend.cancel(attempt)
        attempt.outcome = Outcome.CANCELLED
        attempt.hung_because = text
        attempt.detail = f"hang: {text}"
        if deadline is not None:
            attempt.hang_saved_seconds = max(0.0, deadline - self.clock.now())
        self._event(attempt, "hung")

    def _timed_out(self, attempt: Attempt, exc: errors.TimeoutExceededError) -> errors.VspError:
        """Cancels the attempt at the run's timeout (unless told to keep it); the error."""
        if self.keep_job_on_timeout:
            return errors.TransientError(
                f"{exc} Job {attempt.job_id} was left running (keep_job_on_timeout): it "
                "holds its nodes until it ends or is cancelled."
            )
        log.warning("timeout: cancelling job %s", attempt.job_id)
        self.backend.cancel(attempt)
        self._event(attempt, "cancelled")
        return errors.TransientError(
            f"{exc} Job {attempt.job_id} was cancelled (set keep_job_on_timeout to leave it "
            "running)."
        )

    def run(self) -> RunResult:
        """Runs until an attempt succeeds; raises when the strategy gives up.

        Raises:
            errors.UserError: The trainer failed beyond its restart budget (message has the
                exit code and the log tail).
            errors.TransientError: Preemption budget or capacity exhausted.
            StepCancelled: SIGTERM arrived; the running job was cancelled first.
            KeyboardInterrupt: SIGINT (Ctrl-C where a step runs in a terminal, as ``vsp
                run-local`` does): the running job was cancelled first too.
        """
        start = self.clock.now()
        deadline = None if self.timeout is None else start + self.timeout
        self.attempts = self._known_attempts()
        reattached = bool(self.attempts)
        if reattached:
            log.info(
                "found %d earlier attempt(s) of run %s: %s",
                len(self.attempts),
                self.run_key,
                ", ".join(f"{a.job_id}={a.outcome.value}" for a in self.attempts),
            )
            self._record()
        with step.cancel_on_sigterm():
            try:
                return self._drive(start, deadline, reattached)
            except (StepCancelled, KeyboardInterrupt):
                cancel_run.cancel_run_jobs(self.backend, self.attempts, self.run_key)
                raise

    def _drive(self, start: float, deadline: float | None, reattached: bool) -> RunResult:
        if not self.attempts:
            self._submit(self.strategy.first_target())
        while True:
            current = self.attempts[-1]
            if not current.outcome.terminal:
                self._wait(current, deadline)
            if current.outcome is Outcome.SUCCEEDED:
                return RunResult(
                    self.attempts,
                    self.clock.now() - start,
                    reattached,
                    list(self.events),
                    self.vertex_calls(),
                    self.storage_calls(),
                    list(self.observations),
                    self.pubsub_calls(),
                )
            decision = self.strategy.after(self.attempts)
            log.info(
                "attempt %s ended %s: %s", current.job_id, current.outcome.value, decision.reason
            )
            if decision.resubmit:
                self._submit(decision.target)
                continue
            tail = self.backend.log_tail(current)
            shown = f"\n{LOG_TAIL_HEADING}\n{tail}" if tail else ""
            if current.outcome is Outcome.USER_FAILURE or current.hung_because:
                raise errors.UserError(f"training failed: {decision.reason}{shown}")
            raise errors.TransientError(f"training did not finish: {decision.reason}{shown}")
