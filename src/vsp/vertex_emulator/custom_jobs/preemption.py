"""Spot preemption plan of CustomJobs (one per emulator) and the preemption log.

The plan is a ``slurm_preemption`` plan (``fixed`` with ``after_seconds``, or ``poisson`` with
``mean_seconds`` and ``seed``; ``max_count`` preemptions at most, None = no limit; optional
``job_name`` regex searched in the job's ``displayName``). It applies only to jobs whose
``scheduling.strategy`` is SPOT. Each time such a job's process starts, the plan picks its
preemption time (fixed: the delay of the n-th preemption; poisson: the n-th draw of
``random.Random(seed)``). Without a plan of their own, the ``custom_job_spot_preempt_*``
settings apply. Every preemption is appended to ``{state_dir}/custom_jobs/preemptions.jsonl``.
"""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

from vsp.vertex_emulator import errors
from vsp.vertex_emulator.slurm import preemption as slurm_preemption

STATE_COLLECTION = "custom_job_state"
PLAN_KEY = "plan"
LOG_NAME = "preemptions.jsonl"


def normalize(raw: dict[str, Any]) -> dict[str, Any]:
    """A validated plan (snake_case or camelCase fields; no ``partition``; every preemption
    comes with the notice, so no ``unannounced_share``).

    Raises:
        ValueError: Invalid fields.
    """
    if raw.get("partition") is not None:
        raise ValueError("CustomJob plans have no partition")
    plan = slurm_preemption.normalize_plan(raw)
    if plan["unannounced_share"]:
        raise ValueError("CustomJob plans have no unannounced_share (Slurm clusters only)")
    return plan


def settings_plan(settings: Any) -> dict[str, Any] | None:
    """The default plan the ``custom_job_spot_preempt_*`` settings describe, or None."""
    return slurm_preemption.plan_from_settings(
        settings, "custom_job_spot_preempt", zero_count_is_unlimited=True
    )


def load_state(app: Any) -> dict[str, Any]:
    """The stored plan state ``{"plan", "fired", "runs"}``."""
    return app.store.get(STATE_COLLECTION, PLAN_KEY) or {"plan": None, "fired": 0, "runs": 0}


def save_state(app: Any, state: dict[str, Any]) -> None:
    """Stores the plan state."""
    app.store.put(STATE_COLLECTION, PLAN_KEY, state)


def effective(app: Any, state: dict[str, Any]) -> dict[str, Any] | None:
    """The emulator's own plan, else the settings' plan."""
    return state.get("plan") or settings_plan(app.settings)


def describe(app: Any) -> dict[str, Any] | None:
    """The effective plan with ``source``, ``fired``, ``runs`` (and a poisson ``preview``)."""
    state = load_state(app)
    plan = effective(app, state)
    if plan is None:
        return None
    shown = {
        **plan,
        "source": "emulator" if state.get("plan") else "settings",
        "fired": state["fired"],
        "runs": state["runs"],
    }
    if plan["mode"] == "poisson":
        shown["preview"] = slurm_preemption.poisson_delays(plan["seed"], plan["mean_seconds"], 5)
    return shown


def _exhausted(plan: dict[str, Any], state: dict[str, Any]) -> bool:
    return plan["max_count"] is not None and state["fired"] >= plan["max_count"]


def delay_for_run(app: Any, display_name: str) -> float | None:
    """Emulated seconds until a SPOT run that starts now is preempted, or None (never)."""
    state = load_state(app)
    plan = effective(app, state)
    if plan is None or _exhausted(plan, state):
        return None
    if plan["job_name"] is not None and not re.search(plan["job_name"], display_name):
        return None
    runs = state["runs"]
    state["runs"] = runs + 1
    save_state(app, state)
    if plan["mode"] == "fixed":
        delays = plan["after_seconds"]
        return delays[min(state["fired"], len(delays) - 1)]
    return slurm_preemption.poisson_delays(plan["seed"], plan["mean_seconds"], runs + 1)[runs]


def take_firing(app: Any) -> bool:
    """Counts one planned preemption; False when the plan is gone or used up."""
    state = load_state(app)
    plan = effective(app, state)
    if plan is None or _exhausted(plan, state):
        return False
    state["fired"] += 1
    save_state(app, state)
    return True


def log_path(state_dir: pathlib.Path) -> pathlib.Path:
    """``{state_dir}/custom_jobs/preemptions.jsonl``."""
    return pathlib.Path(state_dir) / "custom_jobs" / LOG_NAME


def record(state_dir: pathlib.Path, entry: dict[str, Any]) -> None:
    """Appends one preemption to the log."""
    path = log_path(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")


def read(state_dir: pathlib.Path, job_name: str | None = None) -> list[dict[str, Any]]:
    """Every logged preemption (of one job when ``job_name`` is given), oldest first."""
    path = log_path(state_dir)
    if not path.exists():
        return []
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in entries if job_name is None or e["job"] == job_name]


class PreemptionApi:
    """The preemption part of ``app.custom_jobs`` (mixed into ``CustomJobRuntime``)."""

    app: Any

    def find(self, job: str | int) -> dict[str, Any]:
        """A job record by id or name."""
        raise NotImplementedError

    def preempt(self, doc: dict[str, Any], now: float, source: str) -> dict[str, Any]:
        """Preempts a running job (overridden by the runtime)."""
        raise NotImplementedError  # pragma: no cover

    def _save(self, doc: dict[str, Any]) -> None:
        raise NotImplementedError  # pragma: no cover

    def preempt_now(self, job: str | int) -> dict[str, Any]:
        """Preempts a running SPOT job at once (not counted by the plan); the log entry.

        Raises:
            errors.ApiException: NOT_FOUND; FAILED_PRECONDITION when not a running SPOT job.
        """
        with self.app.store.transaction():
            doc = self.find(job)
            running = doc["job"]["state"] == "JOB_STATE_RUNNING" and not doc.get("kill")
            if doc["strategy"] != "SPOT" or not running:
                raise errors.failed_precondition(f"CustomJob {job} is not a running SPOT job.")
            entry = self.preempt(doc, self.app.now(), "manual")
            self._save(doc)
            return entry

    def set_preemption_plan(self, **plan: Any) -> dict[str, Any]:
        """Sets the emulator's Spot plan, e.g. ``mode="fixed", after_seconds=2, max_count=3``.

        Raises:
            ValueError: An invalid plan (see ``normalize``).
        """
        normalized = normalize(plan)
        with self.app.store.transaction():
            save_state(self.app, {"plan": normalized, "fired": 0, "runs": 0})
            return describe(self.app)

    def clear_preemption_plan(self) -> bool:
        """Removes the emulator's own plan (the settings' plan, if any, applies again)."""
        with self.app.store.transaction():
            had = load_state(self.app).get("plan") is not None
            save_state(self.app, {"plan": None, "fired": 0, "runs": 0})
            return had

    def preemption_plan(self) -> dict[str, Any] | None:
        """The effective plan with ``source``, ``fired`` and ``runs``."""
        return describe(self.app)

    def preemptions(self, job: str | int | None = None) -> list[dict[str, Any]]:
        """Logged preemptions (of one job by id or name), oldest first."""
        name = None if job is None else self.find(job)["job"]["name"]
        return read(self.app.state_dir, name)
