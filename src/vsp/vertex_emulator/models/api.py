"""The ``models`` resource (Vertex AI Model Registry): upload, versions and aliases.

Routes (under ``/v1beta1/`` and ``/v1/``), ``P`` = ``projects/{p}/locations/{l}``:
``POST P/models:upload`` (-> LRO), ``GET P/models`` (the ``default`` version of each model),
``GET P/models/{id}[@{versionId|alias}]``, ``GET P/models/{id}:listVersions`` (paged),
``POST P/models/{id}[@{ver}]:mergeVersionAliases`` and
``DELETE P/models/{id}@{versionId}:deleteVersion`` (-> LRO).

An upload's operation is created already done (the registry entry exists as soon as the upload
request is accepted), so a client polls it once. Version ids are decimal strings counting from
1; the first version gets the ``default`` alias and exactly one version holds it. Lists
(``models``, ``listVersions``) are paged. Storage: ``models.records`` (a document per model and
one per version).
"""

from __future__ import annotations

import re
import secrets
from typing import Any

from vsp.vertex_emulator import casing, clock, errors, field_rules, operations, paging, router
from vsp.vertex_emulator.models import evaluations as model_evaluations
from vsp.vertex_emulator.models import records

MODEL_ID = re.compile(r"^[a-z][a-z0-9_-]{0,62}\Z")
ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]\Z")

_PARENT = r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
_LIST = _PARENT + r"/models"
_MODEL = _LIST + r"/(?P<model>[^/:@]+)"
_VERSION = _MODEL + r"(?:@(?P<version>[^/:@]+))?"


def register(app: Any) -> None:
    """Adds the model registry routes to the app (converting models stored the earlier way)."""
    records.migrate(app.store)
    app.router.add_api("POST", _LIST + ":upload", upload_model, name="models.upload")
    app.router.add_api("GET", _LIST, list_models, name="models.list")
    app.router.add_api("GET", _MODEL + ":listVersions", list_versions, name="models.listVersions")
    app.router.add_api(
        "POST", _VERSION + ":mergeVersionAliases", merge_aliases, name="models.mergeVersionAliases"
    )
    app.router.add_api("GET", _VERSION, get_model, name="models.get")
    app.router.add_api(
        "POST", _VERSION + "/evaluations:import", model_evaluations.import_evaluation,
        name="models.evaluations.import",
    )  # fmt: skip
    app.router.add_api(
        "GET", _VERSION + "/evaluations", model_evaluations.list_evaluations,
        name="models.evaluations.list",
    )  # fmt: skip
    app.router.add_api(
        "DELETE", _MODEL + r"@(?P<version>[^/:@]+):deleteVersion", delete_version,
        name="models.deleteVersion",
    )  # fmt: skip


def upload_model(request: router.Request) -> router.Response:
    """Registers a new model (``modelId``) or version (``parentModel``); returns a done LRO."""
    app = request.app
    body = _camel(request.json_object())
    parent = _parent(request.params)
    model = body.get("model")
    model_id, parent_model = body.get("modelId") or "", body.get("parentModel") or ""
    violations: list[errors.FieldViolation] = []
    if model_id and parent_model:
        violations.append(
            errors.FieldViolation("model_id", "Set model_id or parent_model, not both.")
        )
    if model_id and (not isinstance(model_id, str) or not MODEL_ID.match(model_id)):
        violations.append(
            errors.FieldViolation(
                "model_id", f"Invalid model id {model_id!r}; it must match {MODEL_ID.pattern}."
            )
        )
    if parent_model and (
        not isinstance(parent_model, str)
        or not re.fullmatch(re.escape(parent) + r"/models/[^/:@]+", parent_model)
    ):
        violations.append(
            errors.FieldViolation(
                "parent_model", f"parent_model must be {parent}/models/MODEL_ID (no @version)."
            )
        )
    if not isinstance(model, dict):
        violations.append(errors.FieldViolation("model", "model is required."))
    else:
        violations += _check_model(model)
    if violations:
        raise errors.invalid_fields("Invalid UploadModelRequest", violations)
    assert isinstance(model, dict)
    now = app.now()
    stamp = clock.rfc3339(now)
    if parent_model:
        name = parent_model
        record = records.load(app.store, name)
        if record is None:
            raise errors.not_found(f'Model "{name}" not found.')
    else:
        model_id = model_id or str(secrets.randbelow(9 * 10**18) + 10**18)
        name = f"{parent}/models/{model_id}"
        if app.store.contains(records.MODELS, name):
            raise errors.already_exists(f'Model "{name}" already exists.')
        record = records.new_model(stamp)
    version_id = str(record["next"])
    record["next"] += 1
    aliases = list(dict.fromkeys(model.get("versionAliases") or []))
    if records.DEFAULT_ALIAS not in record["aliases"] and records.DEFAULT_ALIAS not in aliases:
        aliases.insert(0, records.DEFAULT_ALIAS)
    version = {
        "name": name,
        "versionId": version_id,
        "versionAliases": [],
        "displayName": model["displayName"],
        "description": model.get("description", ""),
        "versionDescription": model.get("versionDescription", ""),
        "artifactUri": model.get("artifactUri", ""),
        "containerSpec": model.get("containerSpec") or {},
        "labels": dict(model.get("labels") or {}),
        "createTime": record["createTime"],
        "updateTime": stamp,
        "versionCreateTime": stamp,
        "versionUpdateTime": stamp,
    }
    records.give_aliases(app.store, record, version, aliases, stamp)
    records.put_version(app.store, version)
    app.store.put(records.MODELS, name, record)
    operation = app.operations.create(
        parent=parent,
        kind="model.upload",
        metadata={"@type": operations.type_url("UploadModelOperationMetadata")},
        due=None,
        target=name,
        now=now,
    )
    response = {
        "@type": operations.type_url("UploadModelResponse"),
        "model": name,
        "modelVersionId": version_id,
    }
    done = app.operations.finish(operation["name"], at=now, response=response)
    return router.Response(done)


def get_model(request: router.Request) -> router.Response:
    """Returns one version: ``@versionId``, ``@alias``, or the ``default`` one."""
    record, name = _load(request)
    version_id = _resolve(request.app.store, record, name, request.params)
    return router.Response(records.version(request.app.store, name, version_id))


def list_versions(request: router.Request) -> router.Response:
    """Lists the versions of a model, oldest first, a page at a time (``pageSize``)."""
    _record, name = _load(request)
    store = request.app.store
    keys = records.version_keys(store, name)
    chosen, body = paging.page(request, keys, str, f"{name}@")
    if chosen:
        body["models"] = [store.get(records.VERSIONS, key) for key in chosen]
    return router.Response(body)


def list_models(request: router.Request) -> router.Response:
    """Lists the models of a location (each as its ``default`` version), by name, paged."""
    store = request.app.store
    prefix = f"{_parent(request.params)}/models/"
    names = sorted(store.keys(records.MODELS, prefix=prefix))
    chosen, body = paging.page(request, names, str, prefix)
    found = []
    for name in chosen:
        record = records.load(store, name)
        found.append(records.version(store, name, record["aliases"][records.DEFAULT_ALIAS]))
    if found:
        body["models"] = found
    return router.Response(body)


def delete_version(request: router.Request) -> router.Response:
    """Deletes one version (``@versionId``, explicitly); returns a done LRO.

    As documented for ``models.deleteVersion``, the only version of a model cannot be deleted
    (``models.delete`` does that). The docs say nothing about the ``default`` version; the
    emulator refuses to delete the version holding it (the caller moves the alias first), the
    stricter reading, so a client that works here works under either.
    """
    app = request.app
    record, name = _load(request)
    version_id = request.params["version"]
    version = records.version(app.store, name, version_id)
    if version is None:
        raise errors.not_found(f'Model version "{name}@{version_id}" not found.')
    if len(records.version_keys(app.store, name)) == 1:
        raise errors.failed_precondition(
            f'Model version "{name}@{version_id}" is the only version of the model; delete the '
            "model instead."
        )
    if records.DEFAULT_ALIAS in version["versionAliases"]:
        raise errors.failed_precondition(
            f'Model version "{name}@{version_id}" is the default version; move the default alias '
            "to another version first."
        )
    records.take_aliases(record, version, list(version["versionAliases"]))
    app.store.delete(records.VERSIONS, records.version_key(name, version_id))
    app.store.put(records.MODELS, name, record)
    now = app.now()
    operation = app.operations.create(
        parent=_parent(request.params),
        kind="model.deleteVersion",
        metadata={"@type": operations.type_url("DeleteOperationMetadata")},
        due=None,
        target=f"{name}@{version_id}",
        now=now,
    )
    done = app.operations.finish(operation["name"], at=now, response=operations.empty_response())
    return router.Response(done)


def merge_aliases(request: router.Request) -> router.Response:
    """Adds (``alias``) or removes (``-alias``) aliases of one version; returns the version."""
    store = request.app.store
    record, name = _load(request)
    version_id = _resolve(store, record, name, request.params)
    body = _camel(request.json_object())
    wanted = body.get("versionAliases")
    violations: list[errors.FieldViolation] = []
    if not isinstance(wanted, list) or not wanted:
        violations.append(errors.FieldViolation("version_aliases", "version_aliases is empty."))
        wanted = []
    adds, removes = [], []
    for index, entry in enumerate(wanted):
        field = f"version_aliases[{index}]"
        text = entry if isinstance(entry, str) else ""
        alias = text.removeprefix("-")
        if not ALIAS.match(alias):
            violations.append(errors.FieldViolation(field, f"Invalid alias {entry!r}."))
        elif text.startswith("-"):
            if alias == records.DEFAULT_ALIAS:
                violations.append(
                    errors.FieldViolation(
                        field, "The default alias cannot be removed; move it to another version."
                    )
                )
            removes.append(alias)
        else:
            adds.append(alias)
    for alias in set(adds) & set(removes):
        violations.append(
            errors.FieldViolation("version_aliases", f"Alias {alias!r} is both added and removed.")
        )
    if violations:
        raise errors.invalid_fields("Invalid MergeVersionAliasesRequest", violations)
    stamp = clock.rfc3339(request.app.now())
    version = records.version(store, name, version_id)
    records.take_aliases(record, version, removes)
    records.give_aliases(store, record, version, adds, stamp)
    version["versionUpdateTime"] = version["updateTime"] = stamp
    records.put_version(store, version)
    store.put(records.MODELS, name, record)
    return router.Response(version)


def _check_model(model: dict[str, Any]) -> list[errors.FieldViolation]:
    violations = []
    if not isinstance(model.get("displayName"), str) or not model["displayName"].strip():
        violations.append(errors.FieldViolation("model.display_name", "display_name is required."))
    for key in ("description", "versionDescription", "artifactUri"):
        if not isinstance(model.get(key, ""), str):
            field = f"model.{casing.camel_to_snake(key)}"
            violations.append(errors.FieldViolation(field, "Must be a string."))
    name = model.get("displayName")
    if isinstance(name, str) and (
        name_violation := field_rules.display_name_violation(name, "model.display_name")
    ):
        violations.append(name_violation)
    spec = model.get("containerSpec")
    if spec is not None and (not isinstance(spec, dict) or not spec.get("imageUri")):
        violations.append(
            errors.FieldViolation("model.container_spec.image_uri", "image_uri is required.")
        )
    elif spec is not None and (
        uri_violation := field_rules.image_uri_violation(
            spec["imageUri"], "model.container_spec.image_uri"
        )
    ):
        violations.append(uri_violation)
    aliases = model.get("versionAliases") or []
    if not isinstance(aliases, list):
        aliases = [aliases]
    for index, alias in enumerate(aliases):
        if not isinstance(alias, str) or not ALIAS.match(alias):
            violations.append(
                errors.FieldViolation(
                    f"model.version_aliases[{index}]",
                    f"Invalid alias {alias!r}; it must match {ALIAS.pattern}.",
                )
            )
    violations += field_rules.label_violations(model.get("labels"), "model.labels")
    return violations


def _camel(body: dict[str, Any]) -> dict[str, Any]:
    try:
        return casing.to_camel(body)
    except casing.CaseConflictError as exc:
        raise errors.invalid_argument(
            str(exc), [errors.FieldViolation(exc.path, str(exc))]
        ) from exc


def _parent(params: dict[str, str]) -> str:
    return f"projects/{params['project']}/locations/{params['location']}"


def _load(request: router.Request) -> tuple[dict[str, Any], str]:
    name = f"{_parent(request.params)}/models/{request.params['model']}"
    record = records.load(request.app.store, name)
    if record is None:
        raise errors.not_found(f'Model "{name}" not found.')
    return record, name


def _resolve(store: Any, record: dict[str, Any], name: str, params: dict[str, str]) -> str:
    wanted = params.get("version") or records.DEFAULT_ALIAS
    found = records.resolve(store, record, name, wanted)
    if found is None:
        raise errors.not_found(f'Model version "{name}@{wanted}" not found.')
    return found
