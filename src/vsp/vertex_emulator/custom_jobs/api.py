"""CustomJob REST routes (v1 and v1beta1) and their ``/emulator/v1/custom-jobs`` controls.

API: ``POST .../customJobs`` (create -> the CustomJob, JOB_STATE_QUEUED), ``GET
.../customJobs/{id}``, ``GET .../customJobs`` (``pageSize``, ``pageToken``, ``filter`` with
``state=...``, ``display_name="..."`` or ``labels.k=v`` terms joined by AND), ``POST
.../customJobs/{id}:cancel`` -> ``{}``. A create call matching a fault rule with action
``custom_job_no_capacity`` leaves that job PENDING for ever.

Controls (never journaled, never faulted):

* ``POST /emulator/v1/custom-jobs/preemptions`` ``{"mode": "fixed", "afterSeconds": T,
  "maxCount": N}`` or ``{"mode": "poisson", "meanSeconds", "seed", "maxCount"}`` (optional
  ``jobName`` regex on displayName) -> ``{"plan"}``; ``{"mode": "now", "job": id}`` ->
  ``{"preemption": entry}``.
* ``GET /emulator/v1/custom-jobs/preemptions[?job=id]`` -> ``{"plan", "preemptions", "path"}``.
* ``DELETE /emulator/v1/custom-jobs/preemptions`` -> ``{"cleared": bool}``.
* ``GET /emulator/v1/custom-jobs/{id}`` -> ``app.custom_jobs.info`` (logPath, restartCount, ...).
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from vsp.vertex_emulator import clock, control, errors, fault_rules, paging, router
from vsp.vertex_emulator.custom_jobs import preemption
from vsp.vertex_emulator.custom_jobs import runtime as runtime_module
from vsp.vertex_emulator.custom_jobs import spec as spec_module

NO_CAPACITY_FAULT = "custom_job_no_capacity"
_PARENT = r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/customJobs"
CONTROL = f"{control.PREFIX}/custom-jobs"

fault_rules.register_action(NO_CAPACITY_FAULT)


def register(app: Any) -> None:
    """Attaches ``app.custom_jobs``, the CustomJob routes, tick and control routes."""
    app.custom_jobs = runtime_module.CustomJobRuntime(app)
    app.router.add_api("POST", _PARENT, create_custom_job, name="customJobs.create")
    app.router.add_api("GET", _PARENT, list_custom_jobs, name="customJobs.list")
    app.router.add_api("GET", _PARENT + r"/(?P<job>[^/:]+)", get_custom_job, name="customJobs.get")
    app.router.add_api(
        "POST", _PARENT + r"/(?P<job>[^/:]+):cancel", cancel_custom_job, name="customJobs.cancel"
    )
    app.add_tick(app.custom_jobs.tick, name="custom_jobs")
    add = app.control_router.add
    add("POST", rf"{CONTROL}/preemptions", _post_preemptions)
    add("GET", rf"{CONTROL}/preemptions", _get_preemptions)
    add("DELETE", rf"{CONTROL}/preemptions", _delete_preemptions)
    add("GET", rf"{CONTROL}/(?P<job>[^/]+)", _get_info)


def _parent(params: dict[str, str]) -> str:
    return f"projects/{params['project']}/locations/{params['location']}"


def create_custom_job(request: router.Request) -> router.Response:
    """Validates and stores a new CustomJob (QUEUED); the tick runs it."""
    app = request.app
    fields = spec_module.validate(
        request.json_object(), reject_unknown=app.settings.reject_unknown_fields
    )
    job_id = 10**18 + secrets.randbelow(8 * 10**18)
    name = f"{_parent(request.params)}/customJobs/{job_id}"
    now = app.now()
    job: dict[str, Any] = {
        "name": name,
        "displayName": fields["displayName"],
        "jobSpec": fields["jobSpec"],
        "state": "JOB_STATE_QUEUED",
        "createTime": clock.rfc3339(now),
        "updateTime": clock.rfc3339(now),
    }
    if fields["labels"]:
        job["labels"] = fields["labels"]
    work = app.custom_jobs.work_dir(job_id)
    env = spec_module.environment(
        fields["jobSpec"],
        project=request.params["project"],
        job_id=str(job_id),
        gcs_root=str(app.state_dir / "gcs"),
        home=str(work),
    )
    doc = {
        "job": job,
        "id": job_id,
        "strategy": spec_module.strategy(fields["jobSpec"]),
        "env": env,
        "log_path": str(work / "workerpool0-0.log"),
        "due": now + app.settings.scaled(app.settings.custom_job_queue_delay_seconds),
        "restarts": 0,
        "preemptions": 0,
        "pgid": None,
        "no_capacity": request.take_fault(NO_CAPACITY_FAULT) is not None,
    }
    work.mkdir(parents=True, exist_ok=True)
    (app.state_dir / "gcs").mkdir(exist_ok=True)
    app.store.put(runtime_module.COLLECTION, name, doc)
    return router.Response(job)


def get_custom_job(request: router.Request) -> router.Response:
    """Returns one CustomJob."""
    name = f"{_parent(request.params)}/customJobs/{request.params['job']}"
    doc = request.app.store.get(runtime_module.COLLECTION, name)
    if doc is None:
        raise errors.not_found(f'CustomJob "{name}" not found.')
    return router.Response(doc["job"])


def cancel_custom_job(request: router.Request) -> router.Response:
    """Starts cancelling a CustomJob; returns ``{}``."""
    name = f"{_parent(request.params)}/customJobs/{request.params['job']}"
    request.app.custom_jobs.cancel(name)
    return router.Response({})


_FILTER_TERM = re.compile(r'^\s*([\w.-]+)\s*(=|!=)\s*"?([^"]*)"?\s*$')


def _filter(text: str) -> list[tuple[str, str, str]]:
    terms = []
    for part in re.split(r"\s+AND\s+", text.strip()) if text.strip() else []:
        found = _FILTER_TERM.match(part)
        if not found:
            violation = errors.FieldViolation("filter", f"Unsupported filter term {part!r}.")
            raise errors.invalid_argument(violation.description, [violation])
        terms.append(found.groups())
    return terms


def _matches(job: dict[str, Any], terms: list[tuple[str, str, str]]) -> bool:
    for field, op, value in terms:
        if field.startswith("labels."):
            actual = (job.get("labels") or {}).get(field[7:], "")
        else:
            key = {"display_name": "displayName"}.get(field, field)
            actual = str(job.get(key, ""))
        if (actual == value) != (op == "="):
            return False
    return True


def list_custom_jobs(request: router.Request) -> router.Response:
    """Lists the CustomJobs of a location by name, a page at a time."""
    prefix = f"{_parent(request.params)}/customJobs/"
    terms = _filter(request.query_value("filter") or "")
    jobs = [
        doc["job"]
        for key, doc in request.app.store.items(runtime_module.COLLECTION)
        if key.startswith(prefix) and _matches(doc["job"], terms)
    ]
    jobs.sort(key=lambda j: j["name"])
    chosen, body = paging.page(request, jobs, lambda j: j["name"], prefix)
    if chosen:
        body["customJobs"] = chosen
    return router.Response(body)


# --- controls --------------------------------------------------------------------------------


def _post_preemptions(request: router.Request) -> router.Response:
    body = dict(request.json_object())
    app = request.app
    if body.get("mode") == "now":
        job = body.get("job", body.get("jobId"))
        if not job:
            raise errors.invalid_argument('mode=now needs "job" (an id or name).')
        return router.Response({"preemption": app.custom_jobs.preempt_now(job)})
    try:
        plan = app.custom_jobs.set_preemption_plan(**body)
    except (ValueError, TypeError, re.error) as exc:
        raise errors.invalid_argument(f"Invalid preemption plan: {exc}") from exc
    return router.Response({"plan": plan})


def _get_preemptions(request: router.Request) -> router.Response:
    app = request.app
    return router.Response(
        {
            "plan": app.custom_jobs.preemption_plan(),
            "preemptions": app.custom_jobs.preemptions(request.query_value("job")),
            "path": str(preemption.log_path(app.state_dir)),
        }
    )


def _delete_preemptions(request: router.Request) -> router.Response:
    return router.Response({"cleared": request.app.custom_jobs.clear_preemption_plan()})


def _get_info(request: router.Request) -> router.Response:
    return router.Response(request.app.custom_jobs.info(request.params["job"]))
