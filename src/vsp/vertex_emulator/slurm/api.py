"""``POST .../modelDevelopmentClusters/{id}:callSlurmRestApi``: the Slurm Job API.

Request ``{"method": "HTTP_METHOD_GET|POST|DELETE", "path": "/slurm/v0.0.42/...", "body": {}}``
(< 1 MB). Google-level errors: INVALID_ARGUMENT (bad method, path or body, too large),
NOT_FOUND (cluster), FAILED_PRECONDITION (cluster not RUNNING). Otherwise HTTP 200 with
``{"status": <slurmrestd status>, "body": "<Slurm JSON as a string>"}``, or
``{"status", "structuredBody": {...}}`` with the ``slurm_structured_body`` setting. Every Slurm
payload has ``meta``, ``errors`` and ``warnings``.

With the ``slurmrestd`` setting the call goes to a real slurmrestd instead (``slurm.real``): its
HTTP status and body text come back in the same wrapper.

Slurm paths (v0.0.42 only; any other path or method answers slurmrestd's plain-text 404):
``POST /slurm/v0.0.42/job/submit``,
``GET|POST|DELETE /slurm/v0.0.42/job/{id}``, ``GET /slurm/v0.0.42/jobs``, ``GET
/slurm/v0.0.42/{nodes,partitions,ping}``, ``GET|POST /slurm/v0.0.42/node/{name}``,
``GET /slurmdb/v0.0.42/job/{id}``, ``GET /slurmdb/v0.0.42/jobs``,
``GET|POST /slurmdb/v0.0.42/{accounts,users,associations}``.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable
from typing import Any

from vsp.vertex_emulator import errors, router
from vsp.vertex_emulator.clusters import api as clusters
from vsp.vertex_emulator.slurm import accounting as slurm_accounting
from vsp.vertex_emulator.slurm import api_jobs as slurm_api_jobs
from vsp.vertex_emulator.slurm import comment_updates as slurm_comment_updates
from vsp.vertex_emulator.slurm import control as slurm_control
from vsp.vertex_emulator.slurm import jobdesc as slurm_jobdesc
from vsp.vertex_emulator.slurm import real as slurm_real
from vsp.vertex_emulator.slurm import runtime as slurm_runtime
from vsp.vertex_emulator.slurm import shapes as slurm_shapes

MAX_REQUEST_BYTES = 1_000_000
# slurmrestd 24.11.7's answer (text/plain, status 404) to a path it does not serve.
NO_PATH_TEXT = "Unable find requested URL. Please view /openapi/v3 for API reference."
METHODS = {"HTTP_METHOD_GET": "GET", "HTTP_METHOD_POST": "POST", "HTTP_METHOD_DELETE": "DELETE"}
REQUEST_FIELDS = frozenset({"method", "path", "body"})
_ROUTE = (
    r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
    r"/modelDevelopmentClusters/(?P<cluster>[^/:]+):callSlurmRestApi"
)
_JOB = r"/job/(?P<job_id>\d+)/?"

Handler = Callable[[slurm_api_jobs.Call], tuple[int, dict[str, Any]]]


def _accounting(
    function: Callable[..., tuple[int, dict[str, Any]]], with_body: bool = False
) -> Handler:
    if with_body:
        return lambda call: function(call.ctx, call.body)
    return lambda call: function(call.ctx)


# (method, path regex after /slurm or /slurmdb and the version, handler)
SLURM_ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", r"/job/submit/?", slurm_api_jobs.submit),
    ("GET", _JOB, slurm_api_jobs.get_job),
    ("POST", _JOB, slurm_api_jobs.update_job),
    ("DELETE", _JOB, slurm_api_jobs.cancel_job),
    ("GET", r"/jobs/?", slurm_api_jobs.list_jobs),
    ("GET", r"/nodes/?", slurm_api_jobs.nodes),
    ("GET", r"/node/(?P<node>[^/]+)/?", slurm_api_jobs.node),
    ("POST", r"/node/(?P<node>[^/]+)/?", slurm_api_jobs.update_node),
    ("GET", r"/partitions/?", slurm_api_jobs.partitions),
    ("GET", r"/ping/?", slurm_api_jobs.ping),
]
SLURMDB_ROUTES: list[tuple[str, str, Handler]] = [
    ("GET", _JOB, slurm_api_jobs.db_job),
    ("GET", r"/jobs/?", slurm_api_jobs.db_jobs),
    ("GET", r"/accounts/?", _accounting(slurm_accounting.get_accounts)),
    ("POST", r"/accounts/?", _accounting(slurm_accounting.post_accounts, True)),
    ("GET", r"/users/?", _accounting(slurm_accounting.get_users)),
    ("POST", r"/users/?", _accounting(slurm_accounting.post_users, True)),
    ("GET", r"/associations/?", _accounting(slurm_accounting.get_associations)),
    ("POST", r"/associations/?", _accounting(slurm_accounting.post_associations, True)),
]
_PREFIX = re.compile(r"^/(?P<api>slurm|slurmdb)/(?P<version>v\d+\.\d+\.\d+)(?P<rest>/.*)$")


def register(app: Any) -> None:
    """Attaches ``app.slurm``, the callSlurmRestApi route, the Slurm tick and control routes."""
    app.slurm = slurm_runtime.SlurmRuntime(app)
    app.router.add_api("POST", _ROUTE, call_slurm_rest_api, name="clusters.callSlurmRestApi")
    app.add_tick(app.slurm.tick, name="slurm")
    slurm_control.install(app)


def _invalid(field: str, description: str) -> errors.ApiException:
    return errors.invalid_argument(description, [errors.FieldViolation(field, description)])


def _parse_request(request: router.Request) -> tuple[str, str, Any]:
    size = len(request.body_text.encode("utf-8"))
    if size >= MAX_REQUEST_BYTES:
        raise _invalid(
            "", f"Request payload size {size} bytes exceeds the limit of {MAX_REQUEST_BYTES}."
        )
    body = request.json_object()
    unknown = sorted(set(body) - REQUEST_FIELDS)
    if unknown and request.app.settings.reject_unknown_fields:
        raise _invalid(
            unknown[0],
            f'Invalid JSON payload received. Unknown name "{unknown[0]}": Cannot find field.',
        )
    method = METHODS.get(str(body.get("method")))
    if method is None:
        raise _invalid(
            "method", f"Invalid method {body.get('method')!r}; use one of {', '.join(METHODS)}."
        )
    path = body.get("path")
    if not isinstance(path, str) or not _PREFIX.match(urllib.parse.urlsplit(path).path):
        raise _invalid(
            "path", f"Invalid path {path!r}: expected /slurm/vX.Y.Z/... or /slurmdb/vX.Y.Z/..."
        )
    slurm_body = body.get("body")
    if slurm_body is not None and not isinstance(slurm_body, dict):
        raise _invalid("body", "body must be a JSON object.")
    return method, path, slurm_body


def call_slurm_rest_api(request: router.Request) -> router.Response:
    """Serves ``:callSlurmRestApi``."""
    app = request.app
    method, path, slurm_body = _parse_request(request)
    name = clusters.cluster_name(request.params)
    record = app.store.get(clusters.COLLECTION, name)
    if record is None:
        raise errors.not_found(f'ModelDevelopmentCluster "{name}" not found.')
    state = record["cluster"]["clusterStatus"]["state"]
    if state != "RUNNING":
        raise errors.failed_precondition(
            f'ModelDevelopmentCluster "{name}" is {state}; the Slurm API needs a RUNNING cluster.'
        )
    if app.slurm.real is not None:
        return _forward(app, method, path, slurm_body)
    ctx = app.slurm.context(record["cluster"])
    slurm_comment_updates.apply(ctx)
    answer = dispatch(ctx, request, method, path, slurm_body)
    ctx.save()
    if answer is None:  # no such path: slurmrestd's plain-text 404, also in structured mode
        return router.Response({"status": 404, "body": NO_PATH_TEXT})
    status, payload = answer
    if app.settings.slurm_structured_body:
        return router.Response({"status": status, "structuredBody": payload})
    return router.Response({"status": status, "body": json.dumps(payload, allow_nan=False)})


def _forward(app: Any, method: str, path: str, body: Any) -> router.Response:
    """Sends the call to the real slurmrestd (``slurm.real``) and wraps its answer."""
    try:
        status, text = app.slurm.real.slurmrestd.call(method, path, body)
    except slurm_real.SlurmrestdUnavailable as exc:
        message = f"The cluster's Slurm did not answer: {exc}"
        raise errors.ApiException("UNAVAILABLE", message) from exc
    if app.settings.slurm_structured_body:
        try:
            structured = json.loads(text)
        except ValueError:
            return router.Response({"status": status, "body": text})
        return router.Response({"status": status, "structuredBody": structured})
    return router.Response({"status": status, "body": text})


def dispatch(
    ctx: Any, request: router.Request, method: str, path: str, body: Any
) -> tuple[int, dict[str, Any]] | None:
    """Runs one Slurm REST call; returns (slurmrestd status, Slurm payload), or None when
    slurmrestd has no such path for that method (another version, a method the path does not
    take, or ``/slurmdb/`` without accounting: ``slurm_accounting`` off), which it answers
    with a plain-text 404 (``NO_PATH_TEXT``)."""
    split = urllib.parse.urlsplit(path)
    query = dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True))
    found = _PREFIX.match(split.path)
    assert found is not None  # checked by _parse_request
    api, version, rest = found.group("api"), found.group("version"), found.group("rest")
    plugin = "openapi/slurmdbd" if api == "slurmdb" else "openapi/slurmctld"
    if version != "v0.0.42" or (api == "slurmdb" and not ctx.settings.slurm_accounting):
        return None
    routes = SLURMDB_ROUTES if api == "slurmdb" else SLURM_ROUTES
    chosen = [
        (h, r) for m, pattern, h in routes if m == method and (r := re.fullmatch(pattern, rest))
    ]
    if not chosen:
        return None
    handler, params = chosen[0]
    call = slurm_api_jobs.Call(ctx, params.groupdict(), query, body, request)
    try:
        status, payload = handler(call)
    except slurm_jobdesc.SlurmError as exc:
        status, payload = exc.status, {"errors": exc.errors}
    user = ctx.settings.slurm_user_name
    return status, {
        **payload,
        "meta": slurm_shapes.meta(ctx.topo.cluster_id, user, plugin),
        "errors": payload.get("errors", []),
        "warnings": payload.get("warnings", []),
    }
