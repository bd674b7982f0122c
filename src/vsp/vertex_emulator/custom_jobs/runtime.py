"""``app.custom_jobs``: the CustomJob state machine, its local processes and its Python API.

Records live in the store collection ``custom_jobs`` (``{"job": <public JSON>, ...internal}``).
The tick moves QUEUED (``custom_job_queue_delay_seconds``) -> PENDING
(``custom_job_pending_delay_seconds``; for ever for SPOT jobs when ``custom_job_spot_no_capacity``
is set or the create call consumed a ``custom_job_no_capacity`` fault) -> RUNNING (process
started) -> SUCCEEDED (exit 0) / FAILED. Outcomes and ``error`` codes:

* non-zero exit: FAILED, ``{"code": 3, "message": "The replica workerpool0-0 exited with a
  non-zero status of N. ..."}`` (3 = INVALID_ARGUMENT: a user-code error, as Vertex reports it).
* cancel: CANCELLING, SIGTERM to the group, SIGKILL after ``custom_job_kill_wait_seconds``;
  CANCELLED with ``{"code": 1, ...}`` (CANCELLED, as the CancelCustomJob docs say).
* ``scheduling.timeout`` exceeded by a run: like cancel, then FAILED with code 4.
* Spot preemption: SIGTERM, SIGKILL after ``custom_job_preempt_notice_seconds``, then the same
  job goes back to PENDING and runs again (a new process, same env) - whatever the exit code
  during the notice. The preemption after ``custom_job_max_spot_restarts`` restarts FAILS the
  job with ``{"code": 8, "message": "... STOCKOUT ..."}`` (RESOURCE_EXHAUSTED).
* FLEX_START waiting with no capacity longer than ``maxWaitDuration``: FAILED, code 8.
* emulator restart: processes do not survive; a job recorded as running is FAILED with code 13
  (INTERNAL) - or CANCELLED / restarted when a cancel / preemption was under way.

Python API (``server.app.custom_jobs``): ``cancel``, ``info``, ``preempt_now``,
``set_preemption_plan``, ``clear_preemption_plan``, ``preemption_plan``, ``preemptions``,
``shutdown``. Jobs are named by numeric id or full resource name.
"""

from __future__ import annotations

import atexit
import pathlib
import shlex
import signal
import weakref
from typing import Any

from vsp.vertex_emulator import clock, errors
from vsp.vertex_emulator.custom_jobs import preemption
from vsp.vertex_emulator.custom_jobs import spec as spec_module
from vsp.vertex_emulator.slurm import process as slurm_process

COLLECTION = "custom_jobs"
ACTIVE = ("JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_CANCELLING")
DEFAULT_TIMEOUT_SECONDS = 7 * 24 * 3600.0


def _shutdown_at_exit(ref: weakref.ReferenceType[CustomJobRuntime]) -> None:
    runtime = ref()
    if runtime is not None:
        runtime.shutdown()


class CustomJobRuntime(preemption.PreemptionApi):
    """The CustomJobs of one emulator app."""

    def __init__(self, app: Any):
        """Binds to an app (store, settings, state directory).

        Args:
            app: The ``EmulatorApp``.
        """
        self.app = app
        self.procs = slurm_process.ProcessTable()
        self.root = pathlib.Path(app.state_dir) / "custom_jobs"
        atexit.register(_shutdown_at_exit, weakref.ref(self))

    # --- records -----------------------------------------------------------------------------

    def work_dir(self, job_id: int) -> pathlib.Path:
        """The per-job directory (also the process's cwd and HOME)."""
        return self.root / str(job_id)

    def _set_state(self, doc: dict[str, Any], state: str, now: float) -> None:
        job = doc["job"]
        job["state"] = state
        job["updateTime"] = clock.rfc3339(now)
        if state not in ACTIVE:
            job["endTime"] = clock.rfc3339(now)

    def _finish(self, doc: dict[str, Any], state: str, now: float, code: int, msg: str) -> None:
        doc.update(kill=None, preempt_at=None, due=None, pgid=None)
        self._set_state(doc, state, now)
        if state != "JOB_STATE_SUCCEEDED":
            doc["job"]["error"] = errors.rpc_status(code, msg)

    def find(self, job: str | int) -> dict[str, Any]:
        """A record by numeric id or full name.

        Raises:
            errors.ApiException: NOT_FOUND.
        """
        key = str(job)
        if "/" in key:
            doc = self.app.store.get(COLLECTION, key)
        else:
            found = self.app.store.select(COLLECTION, lambda d: str(d["id"]) == key)
            doc = found[0][1] if found else None
        if doc is None:
            raise errors.not_found(f'CustomJob "{job}" not found.')
        return doc

    def _save(self, doc: dict[str, Any]) -> None:
        self.app.store.put(COLLECTION, doc["job"]["name"], doc)

    # --- the tick ----------------------------------------------------------------------------

    def tick(self, app: Any, now: float) -> None:
        """Advances every active job."""
        self.procs.reap()
        for _, doc in app.store.select(COLLECTION, lambda d: d["job"]["state"] in ACTIVE):
            before = repr(doc)
            self._step(doc, now)
            if repr(doc) != before:
                self._save(doc)

    def _step(self, doc: dict[str, Any], now: float) -> None:
        state, settings = doc["job"]["state"], self.app.settings
        if state == "JOB_STATE_QUEUED" and now >= doc["due"]:
            self._set_state(doc, "JOB_STATE_PENDING", now)
            doc["pending_since"] = now
            doc["due"] = now + settings.scaled(settings.custom_job_pending_delay_seconds)
            state = "JOB_STATE_PENDING"
        if state == "JOB_STATE_PENDING":
            self._step_pending(doc, now)
        elif doc.get("pgid") is not None:
            self._step_running(doc, now)
        elif state == "JOB_STATE_CANCELLING":
            self._finish(doc, "JOB_STATE_CANCELLED", now, 1, "CustomJob was cancelled.")

    def _no_capacity(self, doc: dict[str, Any]) -> bool:
        spot = doc["strategy"] == "SPOT" and self.app.settings.custom_job_spot_no_capacity
        return spot or bool(doc.get("no_capacity"))

    def _step_pending(self, doc: dict[str, Any], now: float) -> None:
        if self._no_capacity(doc):
            wait = clock.duration_seconds(
                (doc["job"]["jobSpec"].get("scheduling") or {}).get("maxWaitDuration")
            )
            limit = self.app.settings.scaled(86400.0 if wait is None else wait)
            if doc["strategy"] == "FLEX_START" and limit and now - doc["pending_since"] > limit:
                message = "Resources are insufficient (STOCKOUT) within maxWaitDuration."
                self._finish(doc, "JOB_STATE_FAILED", now, 8, message)
            return
        if now >= doc["due"]:
            self._start(doc, now)

    def _start(self, doc: dict[str, Any], now: float) -> None:
        job, job_id = doc["job"], doc["id"]
        work = self.work_dir(job_id)
        work.mkdir(parents=True, exist_ok=True)
        argv = spec_module.command(job["jobSpec"])
        if argv:  # The wrapper outlives SIGTERM (deferred no-op trap) so the replica decides.
            text = "#!/bin/bash\ntrap : TERM\n" + shlex.join(argv) + "\n"
        else:
            text = "#!/bin/bash\necho 'vertex emulator: no command; image entrypoints cannot run'\n"
        script = slurm_process.write_script(work / "run.sh", text)
        log = pathlib.Path(doc["log_path"])
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(f"=== vertex emulator: run {doc['restarts']} at {clock.rfc3339(now)}\n")
        try:
            proc = self.procs.start(
                ("customJobs", job_id), "script", script, text, cwd=str(work),
                env=doc["env"], stdout=str(log), stderr=str(log), append=True,
            )  # fmt: skip
        except OSError as exc:
            self._finish(doc, "JOB_STATE_FAILED", now, 13, f"Could not start the replica: {exc}")
            return
        doc.update(pgid=proc.pgid, marker=script, run_started=now, kill=None, preempt_at=None)
        self._set_state(doc, "JOB_STATE_RUNNING", now)
        job.setdefault("startTime", clock.rfc3339(now))
        if doc["strategy"] == "SPOT":
            delay = preemption.delay_for_run(self.app, job["displayName"])
            if delay is not None:
                doc["preempt_at"] = now + self.app.settings.scaled(delay)

    def _step_running(self, doc: dict[str, Any], now: float) -> None:
        key = ("customJobs", doc["id"])
        if self.procs.get(key) is None:  # Started by an earlier emulator: the process is lost.
            slurm_process.kill_stale_group(doc.get("pgid"), doc.get("marker"))
            self._ended(doc, now, None, "lost")
            return
        result = self.procs.finished(key)
        if result is not None:
            code, sig = result
            self._ended(doc, now, 128 + sig if code is None else code, "exit")
            return
        kill = doc.get("kill")
        if kill is not None:
            if not kill["killed"] and now >= kill["sigkill_at"]:
                self.procs.signal(key, signal.SIGKILL)
                kill["killed"] = True
            return
        timeout = clock.duration_seconds(
            (doc["job"]["jobSpec"].get("scheduling") or {}).get("timeout")
        )
        limit = self.app.settings.scaled(timeout or DEFAULT_TIMEOUT_SECONDS)
        if now - doc["run_started"] > limit:
            self._kill(doc, now, "timeout", self.app.settings.custom_job_kill_wait_seconds)
        elif doc.get("preempt_at") is not None and now >= doc["preempt_at"]:
            doc["preempt_at"] = None
            if preemption.take_firing(self.app):
                self.preempt(doc, now, "plan")

    def _kill(self, doc: dict[str, Any], now: float, reason: str, wait: float) -> None:
        self.procs.terminate(("customJobs", doc["id"]))
        sigkill_at = now + self.app.settings.scaled(wait)
        doc["kill"] = {"reason": reason, "sigkill_at": sigkill_at, "killed": False}

    def preempt(self, doc: dict[str, Any], now: float, source: str) -> dict[str, Any]:
        """Reclaims the Spot VM under a running job: SIGTERM now, SIGKILL after the notice."""
        settings = self.app.settings
        count = doc["preemptions"] + 1
        entry = {
            "time": clock.rfc3339(now),
            "epoch": now,
            "job": doc["job"]["name"],
            "jobId": str(doc["id"]),
            "displayName": doc["job"]["displayName"],
            "source": source,
            "preemption": count,
            "restartCount": doc["restarts"],
            "runSeconds": round(now - doc["run_started"], 3),
            "noticeSeconds": settings.scaled(settings.custom_job_preempt_notice_seconds),
            "outcome": "RESTART" if count <= settings.custom_job_max_spot_restarts else "FAILED",
        }
        preemption.record(self.app.state_dir, entry)
        doc["preemptions"] = count
        self._kill(doc, now, "preempt", settings.custom_job_preempt_notice_seconds)
        return entry

    def _ended(self, doc: dict[str, Any], now: float, status: int | None, how: str) -> None:
        reason = (doc.get("kill") or {}).get("reason")
        doc["pgid"] = None
        doc["last_exit"] = status
        if reason == "cancel" or doc["job"]["state"] == "JOB_STATE_CANCELLING":
            self._finish(doc, "JOB_STATE_CANCELLED", now, 1, "CustomJob was cancelled.")
        elif reason == "preempt":
            if doc["preemptions"] > self.app.settings.custom_job_max_spot_restarts:
                message = (
                    f"The replica workerpool0-0 was preempted {doc['preemptions']} times: the "
                    "Spot VM capacity is exhausted (STOCKOUT); no retries left."
                )
                self._finish(doc, "JOB_STATE_FAILED", now, 8, message)
                return
            doc.update(kill=None, restarts=doc["restarts"] + 1, pending_since=now)
            doc["due"] = now + self.app.settings.scaled(
                self.app.settings.custom_job_pending_delay_seconds
            )
            self._set_state(doc, "JOB_STATE_PENDING", now)
        elif reason == "timeout":
            message = "The job exceeded its scheduling.timeout and was stopped."
            self._finish(doc, "JOB_STATE_FAILED", now, 4, message)
        elif how == "lost":
            message = "Internal error: the emulator restarted while replica workerpool0-0 ran."
            self._finish(doc, "JOB_STATE_FAILED", now, 13, message)
        elif status == 0:
            self._finish(doc, "JOB_STATE_SUCCEEDED", now, 0, "")
        else:
            message = (
                f"The replica workerpool0-0 exited with a non-zero status of {status}. "
                f"Termination reason: Error. Logs: {doc['log_path']}"
            )
            self._finish(doc, "JOB_STATE_FAILED", now, 3, message)

    # --- actions and Python API --------------------------------------------------------------

    def cancel(self, job: str | int) -> None:
        """Starts cancelling a job (CANCELLING; SIGTERM, later SIGKILL, then CANCELLED).

        Raises:
            errors.ApiException: NOT_FOUND; FAILED_PRECONDITION when it already ended.
        """
        with self.app.store.transaction():
            doc, now = self.find(job), self.app.now()
            if doc["job"]["state"] not in ACTIVE:
                state = doc["job"]["state"]
                raise errors.failed_precondition(f"CustomJob {job} is in state {state}.")
            if doc["job"]["state"] == "JOB_STATE_CANCELLING":
                return
            if doc.get("pgid") is not None:
                wait = self.app.settings.custom_job_kill_wait_seconds
                self._kill(doc, now, "cancel", wait)
            self._set_state(doc, "JOB_STATE_CANCELLING", now)
            self._save(doc)

    def cancel_unfinished(self) -> list[str]:
        """Starts cancelling every CustomJob not yet ended (a run-local emulator's start: the
        run that created them is gone); returns their names."""
        active = self.app.store.select(COLLECTION, lambda d: d["job"]["state"] in ACTIVE)
        for name, _doc in active:
            self.cancel(name)
        return [name for name, _doc in active]

    def info(self, job: str | int) -> dict[str, Any]:
        """Emulator-side facts: the resource, log and work paths, restarts, env, argv."""
        doc = self.find(job)
        return {
            "job": doc["job"],
            "logPath": doc["log_path"],
            "workDir": str(self.work_dir(doc["id"])),
            "restartCount": doc["restarts"],
            "preemptionCount": doc["preemptions"],
            "pgid": doc.get("pgid"),
            "lastExitStatus": doc.get("last_exit"),
            "command": spec_module.command(doc["job"]["jobSpec"]),
            "env": doc["env"],
        }

    def shutdown(self) -> int:
        """SIGKILLs every job process group this emulator started; returns how many ran."""
        return self.procs.shutdown()
