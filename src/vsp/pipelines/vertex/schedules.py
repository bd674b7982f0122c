"""Scheduled pipeline runs on Vertex AI Pipelines (``schedules``): validated, never duplicated.

Body of ``POST v1/projects/P/locations/L/schedules``::

    {"displayName", "cron", "maxConcurrentRunCount", ["maxRunCount"], ["startTime"],
     ["endTime"], ["allowQueueing"],
     "createPipelineJobRequest": {"parent": "projects/P/locations/L", "pipelineJob": {...}}}

The pipeline job is the ``PipelineJobRequest`` body (a schedule takes no job id). When the
template declares a root parameter ``schedule_cron`` and the caller did not set it, it is set to
the schedule's cron: the pipeline's keep-or-delete decision for the cluster reads it.

No duplicate schedules: before creating, the schedules with the same display name are listed;
an ``ACTIVE`` or ``PAUSED`` one makes the create fail unless ``replace`` is asked for, which
deletes them once the new one exists. A create whose answer was lost is followed by the same
lookup, not a resend; two creates racing under one name converge on one schedule.

Why REST by hand and not google-cloud-aiplatform's ``PipelineJob``/``PipelineJobSchedule``,
which cover this service: the same requests as the steps' (``core.rest``, one retry policy and
one error taxonomy), a create whose lost answer is followed by a lookup, not a resend (the
SDK's ``submit`` has no such lookup), and no need for the SDK, whose install is 302 MB (46
packages) and whose import takes 8 s. The SDK is checked against the
emulator in ``tests/emulator/test_emu_google_sdk.py``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from vsp.components.runtime.cluster.rules_base import Problems
from vsp.components.runtime.core import errors, operations, polling, rest, run_identity
from vsp.pipelines.vertex import jobs, schedule_times

log = logging.getLogger(__name__)

SCHEDULE_CRON = "schedule_cron"
# The pipeline that deletes clusters kept warm past their expiry.
REAPER_PIPELINE = "reap-expired-clusters"
LIVE_STATES = ("ACTIVE", "PAUSED")


def with_schedule_cron(
    values: Mapping[str, Any],
    definitions: Mapping[str, Any] | None,
    cron: str,
    *,
    warn: bool = True,
) -> dict[str, Any]:
    """``values`` plus ``schedule_cron = cron`` when the pipeline declares it and it is unset;
    a warning (unless ``warn`` is False) when it is set to another cron."""
    out = dict(values)
    if definitions and SCHEDULE_CRON in definitions and SCHEDULE_CRON not in out:
        out[SCHEDULE_CRON] = cron
    elif warn and SCHEDULE_CRON in out and out[SCHEDULE_CRON] != cron:
        log.warning(
            "parameter schedule_cron=%r differs from the schedule's cron %r: the teardown "
            "expects runs at the parameter's times. Fix: drop --param schedule_cron (the "
            "schedule passes its own cron) unless another cadence is meant",
            out[SCHEDULE_CRON],
            cron,
        )
    return out


@dataclasses.dataclass(frozen=True)
class ScheduleRequest:
    """A schedule of pipeline runs, validated on construction.

    Attributes:
        job: The run to start at each tick (its ``job_id`` is not used).
        display_name: The schedule's display name (unique among live schedules here).
        cron: 5-field cron, optionally prefixed ``TZ=Zone `` (UTC otherwise).
        max_concurrent_run_count: Runs allowed at once (>= 1).
        max_run_count: Runs after which the schedule completes; None = no limit.
        start_time: RFC 3339 time of the first possible run; None = now.
        end_time: RFC 3339 time after which no run starts; None = never.
        allow_queueing: Queue a run when ``max_concurrent_run_count`` is reached.

    Raises:
        errors.SpecValidationError: Any field is invalid (all problems listed).
    """

    job: jobs.PipelineJobRequest
    display_name: str
    cron: str
    max_concurrent_run_count: int
    max_run_count: int | None = None
    start_time: str | None = None
    end_time: str | None = None
    allow_queueing: bool | None = None

    def __post_init__(self) -> None:
        problems = Problems()
        name = self.display_name
        if not isinstance(name, str) or not 0 < len(name) <= jobs.MAX_DISPLAY_NAME:
            problems.add(
                "display_name", name or None, "Must be 1-128 characters.",
                "Pass --display-name NAME.",
            )  # fmt: skip
        problems.items += schedule_times.problems(
            self.cron,
            self.max_concurrent_run_count,
            self.max_run_count,
            self.start_time,
            self.end_time,
        )
        problems.raise_if_any("schedule request")
        values = with_schedule_cron(
            self.job.parameter_values, self.job.pipeline_parameters, self.cron
        )
        if values != dict(self.job.parameter_values):
            object.__setattr__(self, "job", dataclasses.replace(self.job, parameter_values=values))

    def body(self) -> dict[str, Any]:
        """The Schedule JSON body."""
        body: dict[str, Any] = {
            "displayName": self.display_name,
            "cron": self.cron,
            "maxConcurrentRunCount": self.max_concurrent_run_count,
        }
        optional = {
            "maxRunCount": self.max_run_count,
            "startTime": self.start_time,
            "endTime": self.end_time,
            "allowQueueing": self.allow_queueing,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        body["createPipelineJobRequest"] = {
            "parent": self.job.parent,
            "pipelineJob": self.job.body(),
        }
        return body


def filter_for(display_name: str) -> str:
    """The list filter ``display_name="..."`` (quotes and backslashes escaped)."""
    escaped = display_name.replace("\\", "\\\\").replace('"', '\\"')
    return f'display_name="{escaped}"'


class SchedulesClient:
    """Creates, lists and deletes pipeline schedules of one location.

    Args:
        client: The REST client.
        clock: Time source for pauses and operation waits.
    """

    def __init__(self, client: rest.VertexRestClient, *, clock: polling.Clock | None = None):
        self.client = client
        self.clock = clock or polling.RealClock()

    def list(self, parent: str, filter_text: str | None = None) -> Iterator[dict[str, Any]]:
        """Every schedule of ``projects/P/locations/L`` matching a list filter."""
        params = {"filter": filter_text} if filter_text else {}
        return self.client.list_all(f"{jobs.API_VERSION}/{parent}/schedules", "schedules", params)

    def live(self, parent: str, display_name: str) -> list[dict[str, Any]]:
        """The ACTIVE or PAUSED schedules with exactly this display name."""
        return [
            schedule
            for schedule in self.list(parent, filter_for(display_name))
            if schedule.get("displayName") == display_name and schedule.get("state") in LIVE_STATES
        ]

    def reaper_parameters(self, parent: str) -> list[dict[str, Any]]:
        """The parameter values of every active schedule of ``reap-expired-clusters`` in
        ``parent`` (``runtimeConfig.parameterValues``; empty dicts when none are set). A paused
        one deletes nothing, so it does not count."""
        found = []
        for schedule in self.list(parent):
            job = (schedule.get("createPipelineJobRequest") or {}).get("pipelineJob") or {}
            name = ((job.get("pipelineSpec") or {}).get("pipelineInfo") or {}).get("name")
            uri = job.get("templateUri") or ""
            if schedule.get("state") == "ACTIVE" and (
                name == REAPER_PIPELINE or f"/{REAPER_PIPELINE}/" in uri
            ):
                found.append(dict((job.get("runtimeConfig") or {}).get("parameterValues") or {}))
        return found

    def reaper_scheduled(self, parent: str) -> bool:
        """Whether an active schedule runs the ``reap-expired-clusters`` pipeline in ``parent``."""
        return bool(self.reaper_parameters(parent))

    def delete(self, name: str) -> None:
        """Deletes a schedule and waits for the delete operation (missing is fine)."""
        try:
            operation = self.client.delete(f"{jobs.API_VERSION}/{name}")
        except errors.NotFoundError:
            return
        if operation.get("name") and not operation.get("done"):
            operations.wait_for_operation(
                self.client,
                operation["name"],
                api_version=jobs.API_VERSION,
                clock=self.clock,
                latest=operation,
            )

    def create(self, request: ScheduleRequest, *, replace: bool = False) -> dict[str, Any]:
        """Creates the schedule unless a live one has the same display name.

        With ``replace`` the live ones are deleted once the new one exists: a create the
        service refuses (a missing permission) leaves the old schedule running, where deleting
        first left none. Two creates racing under one name both land; each then lists the name
        again, and the one created later deletes itself (``_one_per_name``).

        Args:
            request: The schedule.
            replace: Delete live schedules with the same display name after creating this one.

        Raises:
            errors.UserError: A live schedule has the name and ``replace`` is False.
        """
        parent = request.job.parent
        existing = self.live(parent, request.display_name)
        if existing and not replace:
            names = ", ".join(f"{s['name']} ({s.get('state')})" for s in existing)
            raise errors.UserError(
                f"display_name = {request.display_name!r}: a schedule with this name already "
                f"exists: {names}. Fix: pass --replace to delete it and create this one, pick "
                "another --display-name, or delete it in the console."
            )
        replaced = {schedule["name"] for schedule in existing}
        try:
            created = self.client.post(f"{jobs.API_VERSION}/{parent}/schedules", request.body())
        except errors.TransientError as exc:
            log.warning("create of schedule got no usable answer (%s): looking it up", exc)
            self.clock.sleep(next(jobs.CREATE_BACKOFF.delays()))
            found = [
                s for s in self.live(parent, request.display_name) if s["name"] not in replaced
            ]
            if not found:
                raise
            created = found[0]
        for schedule in existing:
            log.info("deleting schedule %s (replaced by %s)", schedule["name"], created["name"])
            self.delete(schedule["name"])
        return self._one_per_name(parent, request, created, replaced)

    def _one_per_name(
        self,
        parent: str,
        request: ScheduleRequest,
        created: dict[str, Any],
        replaced: set[str],
    ) -> dict[str, Any]:
        """The one live schedule of the request's name after a create: when another create of
        the name raced this one, every racer keeps the same one (the earliest created, then
        the lowest name) and deletes its own if it is not that one.

        Raises:
            errors.UserError: This one was deleted for another with a different cron (what
                was asked for is not what runs).
        """
        display_name = request.display_name
        live = [s for s in self.live(parent, display_name) if s["name"] not in replaced]
        if not any(s["name"] == created["name"] for s in live):
            live.append(created)
        if len(live) < 2:
            return created
        kept = min(live, key=lambda s: (str(s.get("createTime") or ""), s["name"]))
        if kept["name"] == created["name"]:
            return created
        log.warning(
            "schedule %s was created at the same time as this one under the name %r: keeping "
            "it and deleting this one (%s), so the pipeline runs once per tick",
            kept["name"],
            display_name,
            created["name"],
        )
        self.delete(created["name"])
        if kept.get("cron", request.cron) != request.cron:
            raise errors.UserError(
                f"display_name = {display_name!r}: schedule {kept['name']} (cron "
                f"{kept.get('cron')!r}) was created at the same time under this name, so this "
                f"one (cron {request.cron!r}) was deleted: one schedule per name. Fix: rerun "
                "with --replace to put this one in its place."
            )
        return kept


def shared_folder_warnings(values: Mapping[str, Any]) -> list[str]:
    """What a schedule's fixed folders do: every run gets the same parameters, so a model or
    output folder without ``{run}`` is written by each run over the one before, under the
    versions registered earlier, and a fixed ``checkpoint_dir`` makes each run resume from the
    run before.

    Args:
        values: The runs' parameter values (option groups as dicts).
    """
    training = values.get("training_options")
    found = {
        "model_dir": values.get("model_dir"),
        "base_output_directory": values.get("base_output_directory"),
        "training_options.checkpoint_dir": (
            training.get("checkpoint_dir") if isinstance(training, Mapping) else None
        ),
    }
    warnings = []
    for name, value in found.items():
        if not isinstance(value, str) or not value or run_identity.RUN_TOKEN in value:
            continue
        what = (
            "each run resumes from the checkpoint the run before left"
            if name.endswith("checkpoint_dir")
            else "each run writes its model over the folder of the versions registered before"
        )
        warnings.append(
            f"{name} = {value!r} has no {run_identity.RUN_TOKEN}, so {what}. Fix: "
            f"{value.rstrip('/')}/{run_identity.RUN_TOKEN} gives every run its own folder."
        )
    return warnings
