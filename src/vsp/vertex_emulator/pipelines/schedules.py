"""Vertex AI Pipelines ``schedules``: create, get, list, pause, resume and delete. Never fired.

Routes (under ``/v1/`` and ``/v1beta1/``), ``P`` = ``projects/{p}/locations/{l}``:
``POST P/schedules`` -> the Schedule (``ACTIVE``), ``GET P/schedules/{id}``, ``GET P/schedules``
(newest first; ``pageSize``, ``pageToken``, ``filter`` of ``display_name="X"``, ``state="..."``
or ``labels.k="v"`` terms joined by ``AND``), ``POST P/schedules/{id}:pause`` / ``:resume`` ->
``{}`` and ``DELETE P/schedules/{id}`` -> a done operation.

Like pipeline jobs, schedules are stored and never run: no run is ever started from one (its
``nextRunTime`` is computed from the cron for display only, ``startedRunCount`` stays 0). The
request is checked as documented: ``display_name``, a 5-field ``cron`` with an optional
``TZ=``/``CRON_TZ=`` prefix, ``max_concurrent_run_count`` (required, >= 1), optional
``max_run_count`` (>= 1), ``start_time`` < ``end_time`` (RFC 3339), and
``create_pipeline_job_request`` whose ``parent`` is this location, with no ``pipelineJobId`` and
a ``pipelineJob`` valid as for ``pipelineJobs.create``.

Stored in the ``pipeline_schedules`` collection keyed by name (the public JSON).
"""

from __future__ import annotations

import datetime
import secrets
import zoneinfo
from typing import Any

from croniter import croniter

from vsp.vertex_emulator import clock, errors, field_rules, operations, router
from vsp.vertex_emulator.pipelines import jobs

COLLECTION = "pipeline_schedules"
ACTIVE, PAUSED = "ACTIVE", "PAUSED"
_LIST = jobs.PARENT + r"/schedules"
_ONE = _LIST + r"/(?P<schedule>[^/:]+)"


def register(app: Any) -> None:
    """Adds the schedule routes to the app."""
    app.router.add_api("POST", _LIST, create_schedule, name="schedules.create")
    app.router.add_api("GET", _LIST, list_schedules, name="schedules.list")
    app.router.add_api("GET", _ONE, get_schedule, name="schedules.get")
    app.router.add_api("DELETE", _ONE, delete_schedule, name="schedules.delete")
    app.router.add_api("POST", _ONE + ":pause", pause_schedule, name="schedules.pause")
    app.router.add_api("POST", _ONE + ":resume", resume_schedule, name="schedules.resume")


def create_schedule(request: router.Request) -> router.Response:
    """Validates and stores a Schedule (ACTIVE); returns it."""
    app = request.app
    parent = jobs.parent_of(request.params)
    body = jobs.camel_body(request.json_object())
    now = app.now()
    violations, zone = _check(body, parent)
    if violations:
        raise errors.invalid_fields("Invalid CreateScheduleRequest", violations)
    name = f"{parent}/schedules/{secrets.randbelow(9 * 10**18) + 10**18}"
    stamp = clock.rfc3339(now)
    start = clock.parse_rfc3339(body["startTime"]) if body.get("startTime") else now
    schedule: dict[str, Any] = {
        "name": name,
        "displayName": body["displayName"],
        "cron": body["cron"],
        "maxConcurrentRunCount": str(field_rules.integer(body["maxConcurrentRunCount"])),
        "createPipelineJobRequest": body["createPipelineJobRequest"],
        "state": ACTIVE,
        "createTime": stamp,
        "updateTime": stamp,
        "startTime": clock.rfc3339(start),
        "startedRunCount": "0",
        "nextRunTime": _next_run(body["cron"], zone, max(now, start)),
    }
    if body.get("maxRunCount") is not None:
        schedule["maxRunCount"] = str(field_rules.integer(body["maxRunCount"]))
    for key in ("endTime", "allowQueueing"):
        if body.get(key) is not None:
            schedule[key] = body[key]
    app.store.put(COLLECTION, name, schedule)
    return router.Response(schedule)


def get_schedule(request: router.Request) -> router.Response:
    """Returns one Schedule."""
    return router.Response(_load(request))


def list_schedules(request: router.Request) -> router.Response:
    """Lists the schedules of a location, newest first, a page at a time."""
    fields = {"display_name": lambda s: s.get("displayName")}
    return jobs.list_page(request, COLLECTION, "schedules", fields)


def delete_schedule(request: router.Request) -> router.Response:
    """Deletes a schedule; returns a done delete operation."""
    schedule = _load(request)
    app = request.app
    app.store.delete(COLLECTION, schedule["name"])
    now = app.now()
    operation = app.operations.create(
        parent=jobs.parent_of(request.params),
        kind="schedule.delete",
        metadata={"@type": operations.type_url("DeleteOperationMetadata")},
        due=None,
        target=schedule["name"],
        now=now,
    )
    return router.Response(app.operations.finish(operation["name"], at=now))


def pause_schedule(request: router.Request) -> router.Response:
    """ACTIVE -> PAUSED."""
    return _move(request, ACTIVE, PAUSED)


def resume_schedule(request: router.Request) -> router.Response:
    """PAUSED -> ACTIVE."""
    return _move(request, PAUSED, ACTIVE)


def _move(request: router.Request, source: str, target: str) -> router.Response:
    schedule = _load(request)
    if schedule["state"] != source:
        raise errors.failed_precondition(
            f'Schedule "{schedule["name"]}" is {schedule["state"]}, not {source}.'
        )
    schedule.update(state=target, updateTime=clock.rfc3339(request.app.now()))
    request.app.store.put(COLLECTION, schedule["name"], schedule)
    return router.Response({})


def _check(body: dict[str, Any], parent: str) -> tuple[list[errors.FieldViolation], Any]:
    found: list[errors.FieldViolation] = []

    def bad(field: str, description: str) -> None:
        found.append(errors.FieldViolation(field, description))

    name = body.get("displayName")
    if not isinstance(name, str) or not 0 < len(name) <= 128:
        bad("display_name", "Required: 1-128 characters.")
    zone = _check_cron(body.get("cron"), bad)
    for key, required in (("maxConcurrentRunCount", True), ("maxRunCount", False)):
        field = "max_concurrent_run_count" if required else "max_run_count"
        value = body.get(key)
        if value is None:
            if required:
                bad(field, "Required: an integer >= 1.")
        elif not _positive_int(value):
            bad(field, f"Must be an integer >= 1, not {value!r}.")
    times = {}
    for key, field in (("startTime", "start_time"), ("endTime", "end_time")):
        if body.get(key) is not None:
            try:
                times[key] = clock.parse_rfc3339(str(body[key]))
            except ValueError:
                bad(field, f"Invalid RFC 3339 timestamp {body[key]!r}.")
    if len(times) == 2 and times["endTime"] <= times["startTime"]:
        bad("end_time", "Must be after start_time.")
    if body.get("allowQueueing") is not None and not isinstance(body["allowQueueing"], bool):
        bad("allow_queueing", "Must be a boolean.")
    create = body.get("createPipelineJobRequest")
    if not isinstance(create, dict):
        bad("create_pipeline_job_request", "Required (the only request type emulated).")
        return found, zone
    if create.get("parent") != parent:
        bad("create_pipeline_job_request.parent", f"Must be {parent!r}.")
    if "pipelineJobId" in create:
        bad("create_pipeline_job_request.pipeline_job_id", "Not allowed in a schedule.")
    job = create.get("pipelineJob")
    if isinstance(job, dict) and "pipelineJobId" in job:
        bad(
            "create_pipeline_job_request.pipeline_job.pipeline_job_id", "Not allowed in a schedule."
        )
    found += jobs.check_pipeline_job(job, "create_pipeline_job_request.pipeline_job.")
    return found, zone


def _check_cron(cron: Any, bad: Any) -> Any:
    text = cron.strip() if isinstance(cron, str) else ""
    zone: Any = datetime.timezone.utc
    if text.startswith(("TZ=", "CRON_TZ=")):
        prefix, _, text = text.partition(" ")
        try:
            zone = zoneinfo.ZoneInfo(prefix.split("=", 1)[1])
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            bad("cron", f"Unknown time zone in {cron!r}.")
            return zone
    if len(text.split()) != 5 or not croniter.is_valid(text):
        bad("cron", f"Invalid cron {cron!r}: use 5 fields, optionally prefixed TZ=Zone.")
    return zone


def _positive_int(value: Any) -> bool:
    return field_rules.integer(value, minimum=1) is not None


def _next_run(cron: str, zone: Any, after: float) -> str:
    text = cron.split(" ", 1)[1] if cron.startswith(("TZ=", "CRON_TZ=")) else cron
    moment = datetime.datetime.fromtimestamp(after, tz=zone)
    return clock.rfc3339(croniter(text.strip(), moment).get_next(float))


def _load(request: router.Request) -> dict[str, Any]:
    name = f"{jobs.parent_of(request.params)}/schedules/{request.params['schedule']}"
    schedule = request.app.store.get(COLLECTION, name)
    if schedule is None:
        raise errors.not_found(f'Schedule "{name}" not found.')
    return schedule
