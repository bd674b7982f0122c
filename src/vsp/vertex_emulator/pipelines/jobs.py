"""Vertex AI Pipelines ``pipelineJobs``: create, get, list and cancel. Jobs are stored, never run.

Routes (under ``/v1/`` and ``/v1beta1/``), ``P`` = ``projects/{p}/locations/{l}``:
``POST P/pipelineJobs[?pipelineJobId=ID]``, ``GET P/pipelineJobs/{id}``,
``GET P/pipelineJobs`` (newest first; ``pageSize``, ``pageToken``, ``filter`` of
``display_name="X"``, ``pipeline_name="X"`` (the spec's ``pipelineInfo.name``), ``state="..."``
or ``labels.k="v"`` terms joined by ``AND``) and ``POST P/pipelineJobs/{id}:cancel`` -> ``{}``.

**The emulator does not run pipeline jobs.** A created job stays ``PIPELINE_STATE_PENDING``
until it is cancelled (then ``PIPELINE_STATE_CANCELLED``); run a pipeline on one machine with
``vsp run-local`` (kfp.local) instead. What is checked is the request, as documented: exactly
one of ``pipelineSpec`` and ``templateUri`` (an Artifact Registry KFP URI, not fetched; a
``sha256:`` version is reported in ``templateMetadata.version``), ``runtimeConfig`` with a
``gs://`` ``gcsOutputDirectory``, parameters against the spec's root ``inputDefinitions``,
``pipelineJobId`` of ``[a-z0-9-]`` under 128 chars, labels; a duplicate id is 409 ALREADY_EXISTS.

Stored in the ``pipeline_jobs`` collection keyed by name (the public JSON).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any

from vsp.vertex_emulator import casing, clock, errors, field_rules, paging, router

COLLECTION = "pipeline_jobs"
PENDING, CANCELLED = "PIPELINE_STATE_PENDING", "PIPELINE_STATE_CANCELLED"
FINAL_STATES = ("PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", CANCELLED)
JOB_ID = re.compile(r"^[a-z0-9-]{1,127}$")
TEMPLATE_URI = re.compile(
    r"^https://[a-z][a-z0-9-]*-kfp\.pkg\.dev/[^/\s]+/[^/\s]+/[^/\s]+/(?P<ref>[^/\s]+)$"
)
SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")
GCS = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/\S*)?$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[a-z]{2,}$")
VERBATIM = frozenset({"labels", "parameter_values", "pipeline_spec", "input_artifacts"})

PARENT = r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_LIST = PARENT + r"/pipelineJobs"
_JOB = _LIST + r"/(?P<job>[^/:]+)"
_FILTER_TERM = re.compile(r'^\s*([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))\s*$')


def register(app: Any) -> None:
    """Adds the pipeline job routes to the app."""
    app.router.add_api("POST", _LIST, create_job, name="pipelineJobs.create")
    app.router.add_api("GET", _LIST, list_jobs, name="pipelineJobs.list")
    app.router.add_api("GET", _JOB, get_job, name="pipelineJobs.get")
    app.router.add_api("POST", _JOB + ":cancel", cancel_job, name="pipelineJobs.cancel")


def create_job(request: router.Request) -> router.Response:
    """Validates and stores a PipelineJob (PENDING); returns it."""
    app = request.app
    parent = parent_of(request.params)
    body = camel_body(request.json_object())
    job_id = request.query_value("pipelineJobId", "pipeline_job_id") or ""
    violations = check_pipeline_job(body)
    if job_id and not JOB_ID.fullmatch(job_id):
        description = f"Invalid pipeline_job_id {job_id!r}: use [a-z0-9-], under 128 chars."
        violations.insert(0, errors.FieldViolation("pipeline_job_id", description))
    if violations:
        raise errors.invalid_fields("Invalid CreatePipelineJobRequest", violations)
    job = new_job(app, parent, body, job_id or str(secrets.randbelow(9 * 10**18) + 10**18))
    if app.store.contains(COLLECTION, job["name"]):
        raise errors.already_exists(f'PipelineJob "{job["name"]}" already exists.')
    app.store.put(COLLECTION, job["name"], job)
    return router.Response(job)


def new_job(app: Any, parent: str, body: dict[str, Any], job_id: str) -> dict[str, Any]:
    """The public JSON of a new PENDING job from a checked (camelCase) body."""
    stamp = clock.rfc3339(app.now())
    job: dict[str, Any] = {
        "name": f"{parent}/pipelineJobs/{job_id}",
        "displayName": body.get("displayName") or pipeline_name(body) or job_id,
        "createTime": stamp,
        "updateTime": stamp,
        "state": PENDING,
        "runtimeConfig": body["runtimeConfig"],
        "labels": dict(body.get("labels") or {}),
    }
    if "pipelineSpec" in body:
        job["pipelineSpec"] = body["pipelineSpec"]
    else:
        job["templateUri"] = body["templateUri"]
        ref = TEMPLATE_URI.fullmatch(body["templateUri"])["ref"]
        if SHA256.fullmatch(ref):
            job["templateMetadata"] = {"version": ref}
    if body.get("serviceAccount"):
        job["serviceAccount"] = body["serviceAccount"]
    return job


def get_job(request: router.Request) -> router.Response:
    """Returns one PipelineJob."""
    return router.Response(_load(request))


def cancel_job(request: router.Request) -> router.Response:
    """Cancels a job that has not ended (nothing runs, so it is CANCELLED at once)."""
    job = _load(request)
    if job["state"] in FINAL_STATES:
        raise errors.failed_precondition(
            f'PipelineJob "{job["name"]}" is in state {job["state"]} and cannot be cancelled.'
        )
    stamp = clock.rfc3339(request.app.now())
    job.update(state=CANCELLED, updateTime=stamp, endTime=stamp)
    request.app.store.put(COLLECTION, job["name"], job)
    return router.Response({})


def list_jobs(request: router.Request) -> router.Response:
    """Lists the jobs of a location, newest first, a page at a time."""
    fields = {"display_name": lambda j: j.get("displayName"), "pipeline_name": pipeline_name}
    return list_page(request, COLLECTION, "pipelineJobs", fields)


def check_pipeline_job(job: Any, prefix: str = "") -> list[errors.FieldViolation]:
    """The problems of a (camelCase) PipelineJob body; ``prefix`` is prepended to fields."""

    def bad(field: str, description: str) -> None:
        found.append(errors.FieldViolation(f"{prefix}{field}", description))

    found: list[errors.FieldViolation] = []
    if not isinstance(job, dict):
        bad("pipeline_job" if not prefix else "", "Must be a PipelineJob object.")
        return found
    name = job.get("displayName")
    if name is not None and (not isinstance(name, str) or len(name) > 128):
        bad("display_name", "Must be a string of at most 128 characters.")
    spec, uri = job.get("pipelineSpec"), job.get("templateUri")
    if (spec is None) == (uri is None):
        bad("pipeline_spec", "Set exactly one of pipeline_spec and template_uri.")
    elif uri is not None and (not isinstance(uri, str) or not TEMPLATE_URI.fullmatch(uri)):
        bad("template_uri", "Must be https://REGION-kfp.pkg.dev/PROJECT/REPO/PACKAGE/TAG|sha256:.")
    elif spec is not None and not pipeline_name(job):
        bad("pipeline_spec", "Is not a compiled PipelineSpec (no pipelineInfo.name or root).")
    config = job.get("runtimeConfig")
    if not isinstance(config, dict):
        bad("runtime_config", "runtime_config is required.")
        config = {}
    output = config.get("gcsOutputDirectory")
    if not isinstance(output, str) or not GCS.fullmatch(output):
        bad("runtime_config.gcs_output_directory", "Required: a gs://BUCKET[/PATH] directory.")
    values = config.get("parameterValues") or {}
    if not isinstance(values, dict):
        bad("runtime_config.parameter_values", "Must be an object.")
    elif isinstance(spec, dict) and pipeline_name(job):
        root = (spec["root"].get("inputDefinitions") or {}).get("parameters") or {}
        for key in sorted(set(values) - set(root)):
            bad(f"runtime_config.parameter_values[{key}]", "The pipeline has no such parameter.")
        for key, definition in sorted(root.items()):
            required = "defaultValue" not in definition and not definition.get("isOptional")
            if required and key not in values:
                bad(f"runtime_config.parameter_values[{key}]", "Required parameter is missing.")
    account = job.get("serviceAccount")
    if account is not None and (not isinstance(account, str) or not EMAIL.fullmatch(account)):
        bad("service_account", "Must be a service account email.")
    for violation in field_rules.label_violations(job.get("labels"), "labels"):
        bad(violation.field, violation.description)
    return found


def pipeline_name(job: dict[str, Any]) -> str:
    """``pipelineSpec.pipelineInfo.name`` of a job ("" without an inline spec with a root)."""
    spec = job.get("pipelineSpec")
    if not isinstance(spec, dict) or not isinstance(spec.get("root"), dict):
        return ""
    info = spec.get("pipelineInfo")
    return str(info.get("name") or "") if isinstance(info, dict) else ""


def list_page(
    request: router.Request,
    collection: str,
    plural: str,
    fields: dict[str, Callable[[dict[str, Any]], Any]],
) -> router.Response:
    """A page of a collection under the request's location, newest first, filtered.

    Args:
        request: The list request (``filter``, ``pageSize``, ``pageToken``).
        collection: Store collection holding public JSON documents keyed by name.
        plural: Resource collection id in names and the answer's key (``pipelineJobs``).
        fields: Filter field -> getter; ``state`` and ``labels.KEY`` are always available.
    """
    terms = parse_filter(request.query_value("filter") or "", {"state", *fields})
    prefix = f"{parent_of(request.params)}/{plural}/"
    found = [
        doc
        for key, doc in reversed(request.app.store.items(collection))
        if key.startswith(prefix) and all(_value(doc, f, fields) == v for f, v in terms)
    ]
    chosen, body = paging.page(request, found, lambda doc: doc["name"], prefix)
    if chosen:
        body[plural] = chosen
    return router.Response(body)


def parse_filter(text: str, allowed: set[str]) -> list[tuple[str, str]]:
    """``field="value"`` terms joined by ``AND`` -> [(field, value)].

    Raises:
        errors.ApiException: INVALID_ARGUMENT for any other syntax or an unknown field.
    """
    terms = []
    for part in re.split(r"\s+AND\s+", text.strip()) if text.strip() else []:
        found = _FILTER_TERM.match(part)
        field = found.group(1) if found else ""
        if not found or (field not in allowed and not field.startswith("labels.")):
            known = ", ".join(sorted(allowed | {"labels.KEY"}))
            violation = errors.FieldViolation(
                "filter", f'Unsupported filter term {part!r}; use field="value" with {known}.'
            )
            raise errors.invalid_argument(violation.description, [violation])
        quoted, bare = found.group(2), found.group(3)
        value = re.sub(r"\\(.)", r"\1", quoted) if quoted is not None else bare
        terms.append((field, value))
    return terms


def _value(doc: dict[str, Any], field: str, fields: dict[str, Callable]) -> str:
    if field.startswith("labels."):
        return str((doc.get("labels") or {}).get(field[7:], ""))
    getter = fields.get(field) or (lambda d: d.get(casing.snake_to_camel(field)))
    return str(getter(doc) or "")


def camel_body(body: dict[str, Any]) -> dict[str, Any]:
    """The body with camelCase field names (user-keyed maps and the spec kept verbatim)."""
    try:
        return casing.to_camel(body, verbatim=VERBATIM)
    except casing.CaseConflictError as exc:
        raise errors.invalid_argument(
            str(exc), [errors.FieldViolation(exc.path, str(exc))]
        ) from exc


def parent_of(params: dict[str, str]) -> str:
    """``projects/{p}/locations/{l}`` of a matched route."""
    return f"projects/{params['project']}/locations/{params['location']}"


def _load(request: router.Request) -> dict[str, Any]:
    name = f"{parent_of(request.params)}/pipelineJobs/{request.params['job']}"
    job = request.app.store.get(COLLECTION, name)
    if job is None:
        raise errors.not_found(f'PipelineJob "{name}" not found.')
    return job
