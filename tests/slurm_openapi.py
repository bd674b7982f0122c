"""Slurm's own OpenAPI document for REST v0.0.42, and validators built on it, for tests.

The document comes from the environment variable ``VSP_SLURM_OPENAPI`` (a path to a JSON file)
when set, else from ``slurmrestd --generate-openapi-spec -d v0.0.42 -s
openapi/slurmctld,openapi/slurmdbd`` (``slurmrestd`` on PATH, else the one
``../shared/real-slurm/build.sh`` installs under ``/opt/vsp-slurm-24.11.7``), run with a
throwaway two-line ``slurm.conf`` in a temporary folder. It is read once per process; nothing is
written into the repository. Without either, ``spec()`` skips the calling test and says how to
enable it.

``validate_request(method, path, body)`` checks a body against the ``requestBody`` schema of the
operation (``POST /slurm/v0.0.42/job/submit`` -> ``v0.0.42_job_submit_req``);
``validate_response(method, path, status, payload)`` against the response schema of that status
(or ``default``). Concrete paths (``/slurm/v0.0.42/job/7?signal=USR1``) are matched to the
templated ones (``/slurm/v0.0.42/job/{job_id}``), trailing slashes and queries ignored. Both
raise ``ConformanceError`` listing every problem by JSON path (``$.status[0].error.code``).

Slurm's OpenAPI 3.0 schemas are turned into JSON Schema 2020-12 as follows:

* objects with ``properties`` are closed (``additionalProperties: false``, unless the document
  says otherwise): slurmrestd answers with exactly the fields its parsers declare, and a field
  it does not declare in a request is one it does not read;
* ``required`` entries naming nested fields (``error/string``, as Slurm writes them) require the
  parent and, inside it, the child;
* ``nullable: true`` admits ``null`` (Slurm does not write it today), and so does every optional
  field given by reference: Slurm dumps a NULL pointer of an optional field as ``null``
  (``job_resources`` of a pending job);
* ``format`` stays an annotation: Slurm labels unsigned 32-bit fields ``int32`` (a job id or
  ``NO_VAL`` 4294967294 does not fit) and its ``int64`` fields hold unsigned values too.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
import referencing.jsonschema

VERSION = "v0.0.42"
ENV_VAR = "VSP_SLURM_OPENAPI"
INSTALLED_SLURMRESTD = "/opt/vsp-slurm-24.11.7/sbin/slurmrestd"
GENERATE = ["--generate-openapi-spec", "-d", VERSION, "-s", "openapi/slurmctld,openapi/slurmdbd"]
HOW_TO_ENABLE = (
    f"Slurm's OpenAPI {VERSION} document is unavailable: no slurmrestd on PATH or at "
    f"{INSTALLED_SLURMRESTD}, and {ENV_VAR} is not set. Enable these tests by building real "
    f"Slurm (../shared/real-slurm/build.sh) or by setting {ENV_VAR} to a file written by "
    f"`slurmrestd {' '.join(GENERATE)}`."
)
BASE_URI = f"urn:vsp:slurm-openapi:{VERSION}"
SCHEMAS = "/components/schemas/"
_MINIMAL_CONF = "ClusterName=openapi\nSlurmctldHost=localhost\n"


class ConformanceError(AssertionError):
    """A request or an answer does not match Slurm's OpenAPI document."""


def spec() -> dict[str, Any]:
    """The OpenAPI document (as Slurm wrote it); skips the calling test when unavailable.

    Fails the calling test when a source exists but cannot give the document (a bad
    ``VSP_SLURM_OPENAPI`` file, a slurmrestd that cannot produce v0.0.42).
    """
    document, skip, failure = _load()
    if failure:
        pytest.fail(failure)
    if document is None:
        pytest.skip(skip)
    return document


@functools.cache
def _load() -> tuple[dict[str, Any] | None, str, str]:
    """(document, skip reason, failure): read once per process."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        try:
            return _checked(json.loads(Path(configured).read_text())), "", ""
        except (OSError, ValueError) as exc:
            return None, "", f"{ENV_VAR}={configured}: not Slurm's {VERSION} OpenAPI ({exc})."
    candidates = [c for c in (shutil.which("slurmrestd"), INSTALLED_SLURMRESTD) if c]
    candidates = [c for c in dict.fromkeys(candidates) if os.access(c, os.X_OK)]
    if not candidates:
        return None, HOW_TO_ENABLE, ""
    failures = []
    for binary in candidates:
        try:
            return _checked(generate(binary)), "", ""
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            failures.append(f"{binary}: {exc}")
    return None, "", "slurmrestd could not write the OpenAPI document: " + "; ".join(failures)


def generate(slurmrestd: str, timeout: float = 60.0) -> dict[str, Any]:
    """Runs ``slurmrestd --generate-openapi-spec`` for v0.0.42 and returns the document.

    Raises:
        ValueError: slurmrestd failed or printed something other than JSON.
        subprocess.TimeoutExpired: It did not finish in ``timeout`` seconds.
    """
    with tempfile.TemporaryDirectory(prefix="vsp-openapi-") as folder:
        conf = Path(folder, "slurm.conf")
        conf.write_text(_MINIMAL_CONF)
        env = {**os.environ, "SLURM_CONF": str(conf)}
        done = subprocess.run(
            [slurmrestd, *GENERATE], capture_output=True, text=True, env=env, timeout=timeout
        )
    if done.returncode != 0:
        raise ValueError(f"exit status {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def _checked(document: Any) -> dict[str, Any]:
    paths = document.get("paths") if isinstance(document, dict) else None
    if not isinstance(paths, dict) or not any(f"/{VERSION}/" in p for p in paths):
        raise ValueError(f"no /{VERSION}/ paths in the document")
    return document


# ----- OpenAPI 3.0 schemas as JSON Schema ----------------------------------------------------


def _to_json_schema(node: Any) -> Any:
    """A schema (recursively) with the conversions listed in the module docstring."""
    if isinstance(node, list):
        return [_to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    schema = {
        key: (value if key in ("enum", "required", "example") else _to_json_schema(value))
        for key, value in node.items()
    }
    if "properties" in schema:
        schema["properties"] = {k: _to_json_schema(v) for k, v in node["properties"].items()}
        schema.setdefault("additionalProperties", False)
    if schema.pop("nullable", False) is True and isinstance(schema.get("type"), str):
        schema["type"] = [schema["type"], "null"]
    _require_nested(schema)
    if "properties" in schema:
        required = set(schema.get("required") or [])
        schema["properties"] = {
            name: _or_null(value) if name not in required and "$ref" in value else value
            for name, value in schema["properties"].items()
        }
    return schema


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """The field's schema, or ``null`` (an optional field given by reference)."""
    return {"anyOf": [schema, {"type": "null"}]}


def _require_nested(schema: dict[str, Any]) -> None:
    """``required: ["error/string"]`` -> ``required: ["error"]`` and ``string`` inside it."""
    required = schema.get("required")
    if not isinstance(required, list):  # a parameter's ``required: true``
        return
    plain: list[str] = []
    inner: dict[str, list[str]] = {}
    for entry in required:
        parent, nested, rest = entry.partition("/")
        plain.append(parent)
        if nested:
            inner.setdefault(parent, []).append(rest)
    if not inner:
        return
    properties = schema.setdefault("properties", {})
    for parent, children in inner.items():
        child = dict(properties.get(parent) or {})
        child["required"] = list(dict.fromkeys([*(child.get("required") or []), *children]))
        _require_nested(child)
        properties[parent] = child
    schema["required"] = list(dict.fromkeys(plain))


@functools.cache
def _registry() -> referencing.Registry:
    document = spec()
    converted = {
        "components": {"schemas": _to_json_schema(document["components"]["schemas"])},
        "paths": _to_json_schema(document["paths"]),
    }
    resource = referencing.Resource(converted, referencing.jsonschema.DRAFT202012)
    return referencing.Registry().with_resource(BASE_URI, resource)


def _pointer(*parts: str) -> str:
    escaped = "/".join(p.replace("~", "~0").replace("/", "~1") for p in parts)
    return f"{BASE_URI}#/" + urllib.parse.quote(escaped, safe="/~")


# ----- operations ------------------------------------------------------------------------------


@functools.cache
def _templates() -> list[tuple[re.Pattern[str], str]]:
    compiled = []
    for template in spec()["paths"]:
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template.rstrip("/")))
        compiled.append((re.compile(pattern + "/?"), template))
    return compiled


def operation(method: str, path: str) -> tuple[str, dict[str, Any]]:
    """(templated path, OpenAPI operation) for a concrete ``method`` and ``path``.

    Raises:
        ConformanceError: No path of the document matches, or it has no such method.
    """
    concrete = urllib.parse.urlsplit(path).path
    matches = [t for pattern, t in _templates() if pattern.fullmatch(concrete)]
    # A literal segment beats a template (``/job/submit`` over ``/job/{job_id}``).
    matches.sort(key=lambda t: t.count("{"))
    if not matches:
        raise ConformanceError(f"{path}: no path of Slurm's {VERSION} OpenAPI matches it.")
    template = matches[0]
    operations = spec()["paths"][template]
    found = operations.get(method.lower())
    if not isinstance(found, dict):
        allowed = sorted(m.upper() for m in operations if m in ("get", "post", "delete", "put"))
        raise ConformanceError(f"{method} {template}: not in the document (it has {allowed}).")
    return template, found


def validate_request(method: str, path: str, body: Any) -> None:
    """Checks ``body`` against the operation's ``requestBody`` schema.

    Raises:
        ConformanceError: Every problem, each named by JSON path.
    """
    template, found = operation(method, path)
    if "requestBody" not in found:
        raise ConformanceError(f"{method} {template}: takes no request body.")
    where = ("paths", template, method.lower(), "requestBody", "content", "application/json")
    _validate(_pointer(*where, "schema"), body, f"request {method} {path}")


def validate_response(method: str, path: str, status: int, payload: Any) -> None:
    """Checks ``payload`` against the operation's response schema for ``status`` or default.

    Raises:
        ConformanceError: Every problem, each named by JSON path.
    """
    template, found = operation(method, path)
    responses = found.get("responses") or {}
    code = str(status) if str(status) in responses else "default"
    if code not in responses:
        raise ConformanceError(f"{method} {template}: no response {status} nor default.")
    where = ("paths", template, method.lower(), "responses", code, "content", "application/json")
    _validate(_pointer(*where, "schema"), payload, f"answer {status} to {method} {path}")


def validate_schema(name: str, instance: Any) -> None:
    """Checks ``instance`` against ``#/components/schemas/{name}`` (e.g. ``v0.0.42_openapi_resp``).

    Raises:
        ConformanceError: Every problem, each named by JSON path.
    """
    if name not in spec()["components"]["schemas"]:
        raise ConformanceError(f"no schema {name!r} in Slurm's {VERSION} OpenAPI.")
    _validate(_pointer("components", "schemas", name), instance, name)


def schema_properties(name: str) -> set[str]:
    """The property names of ``#/components/schemas/{name}`` (e.g. ``v0.0.42_job_desc_msg``)."""
    return set(spec()["components"]["schemas"][name].get("properties") or {})


def _validate(ref: str, instance: Any, what: str) -> None:
    validator = jsonschema.Draft202012Validator({"$ref": ref}, registry=_registry())
    problems = sorted({p for e in validator.iter_errors(instance) for p in _describe(e)})
    if problems:
        listed = "\n  ".join(problems)
        raise ConformanceError(f"{what} does not match Slurm's {VERSION} OpenAPI:\n  {listed}")


def _describe(error: jsonschema.ValidationError) -> list[str]:
    """``$.path.to.value: problem`` lines; an undeclared or missing field is named in the path."""
    where = error.json_path
    if error.validator == "anyOf" and error.context:  # a field that may also be null
        real = [e for e in error.context if e.schema != {"type": "null"}]
        return [line for e in real or error.context for line in _describe(e)]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        declared = error.schema.get("properties") or {}
        return [
            f"{where}.{k}: not a field of this schema" for k in error.instance if k not in declared
        ]
    if error.validator == "required":
        missing = re.match(r"'(.+)' is a required property", error.message)
        if missing:
            return [f"{where}.{missing.group(1)}: required but missing"]
    return [f"{where}: {error.message}"]
