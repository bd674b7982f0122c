"""Pipeline templates for Vertex AI Pipelines: compiled YAML files and Artifact Registry URIs.

A template is either a local file compiled by KFP (its PipelineSpec is sent inline as the job's
``pipelineSpec``) or an Artifact Registry KFP template URI
``https://REGION-kfp.pkg.dev/PROJECT/REPO/PACKAGE/REF`` (sent as ``templateUri``), where REF is a
tag or a version ``sha256:DIGEST``. A tag is resolved here, client side, to its version before
anything is submitted: a version pins exactly what runs, and tag resolution by the service has
failed with 500 and permission errors.

No kfp import: registry calls go through injected callables (``TagResolver``, ``Uploader``); the
command line builds them from kfp's ``RegistryClient``.
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import os
import pathlib
import re
from collections.abc import Callable
from typing import Any

import yaml

from vsp.components.runtime.cluster.rules_base import Problems
from vsp.components.runtime.core import errors

# libyaml's safe loader when PyYAML has it (the same documents, about ten times faster: a
# compiled pipeline of ~1 MB took 1 s to parse in pure Python before every local run).
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
HOST_FORM = "https://REGION-kfp.pkg.dev/PROJECT/REPO"
URI_FORM = f"{HOST_FORM}/PACKAGE/TAG (or .../PACKAGE/sha256:DIGEST)"
_HOST = (
    r"https://(?P<region>[a-z][a-z0-9-]*[0-9])-kfp\.pkg\.dev"
    r"/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])/(?P<repo>[a-z][a-z0-9-]{0,62})"
)
REGISTRY_HOST = re.compile(rf"^{_HOST}\Z")
TEMPLATE_URI = re.compile(rf"^(?P<host>{_HOST})/(?P<package>[A-Za-z0-9._-]+)/(?P<ref>[^/\s]+)\Z")
TAG = re.compile(r"^[A-Za-z0-9._-]{1,128}\Z")
VERSION = re.compile(r"^sha256:[0-9a-f]{64}\Z")
# (registry host, package, tag) -> the tag's version: "sha256:..." or a full AR version name.
TagResolver = Callable[[str, str, str], str]
# (compiled YAML path, tags) -> (package name, "sha256:..."), like RegistryClient.upload_pipeline.
Uploader = Callable[[str, list[str]], tuple[str, str]]


@dataclasses.dataclass(frozen=True)
class RegistryTemplate:
    """A template in an Artifact Registry KFP repository.

    Attributes:
        host: ``https://REGION-kfp.pkg.dev/PROJECT/REPO``.
        package: Package name (the pipeline's name when uploaded by kfp).
        ref: A tag, or a version ``sha256:DIGEST``.
    """

    host: str
    package: str
    ref: str

    @property
    def uri(self) -> str:
        """The ``templateUri``."""
        return f"{self.host}/{self.package}/{self.ref}"

    @property
    def is_version(self) -> bool:
        """Whether ``ref`` is a ``sha256:`` version rather than a tag."""
        return self.ref.startswith("sha256:")


def packaged_template(name: str) -> str:
    """The path of a pipeline template shipped in the package, from its name.

    Args:
        name: A pipeline's name, e.g. ``slurm-spot-training`` (``_`` or ``-``).

    Raises:
        errors.UserError: No template of that name ships (names the ones that do).
    """
    folder = pathlib.Path(str(importlib.resources.files("vsp.compiled") / "pipelines"))
    path = folder / f"{name.replace('-', '_')}.yaml"
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem.replace("_", "-") for p in folder.glob("*.yaml")))
        raise errors.UserError(
            f"template {name!r} is neither a file nor a pipeline shipped with vsp. Fix: pass a "
            f"compiled YAML's path or one of {shipped}."
        )
    return str(path)


def template_path(template: str) -> str:
    """A ``--template`` value as a path or URI: a bare pipeline name is a shipped template."""
    bare = "/" not in template and not template.endswith((".yaml", ".yml", ".json"))
    if bare and not is_registry_uri(template) and not pathlib.Path(template).exists():
        return packaged_template(template)
    return template


def is_registry_uri(template: str) -> bool:
    """Whether a template argument is a URI rather than a local path."""
    return "://" in template


def parse_template_uri(uri: str, field: str = "template") -> RegistryTemplate:
    """Splits and checks an Artifact Registry template URI.

    Raises:
        errors.SpecValidationError: The URI does not have the documented form.
    """
    problems = Problems()
    found = TEMPLATE_URI.fullmatch(uri.strip())
    if not found:
        problems.add(
            field, uri, "Is not an Artifact Registry KFP template URI (Vertex accepts no other).",
            f"Use {URI_FORM}, or the path of a compiled pipeline YAML.",
        )  # fmt: skip
    else:
        ref = found["ref"]
        if ref.startswith("sha256:") and not VERSION.fullmatch(ref):
            problems.add(
                field, uri, "The version is not sha256: followed by 64 lowercase hex digits.",
                "Copy the version from `vsp publish` or the Artifact Registry page.",
            )  # fmt: skip
        elif not ref.startswith("sha256:") and not TAG.fullmatch(ref):
            problems.add(
                field,
                uri,
                f"Tag {ref!r} has characters other than letters, digits, '.', '_' or '-'.",
                "Use an existing tag such as 'latest', or a version sha256:DIGEST.",
            )
    problems.raise_if_any("pipeline template")
    assert found is not None
    return RegistryTemplate(found["host"], found["package"], found["ref"])


def version_from_tag(value: str) -> str:
    """``sha256:...`` from a resolver answer (a bare version or ``.../versions/sha256:...``).

    Raises:
        errors.InternalError: The answer holds no ``sha256:`` version.
    """
    version = str(value or "").rsplit("/versions/", 1)[-1]
    if not VERSION.fullmatch(version):
        raise errors.InternalError(f"tag lookup returned no sha256 version: {value!r:.200}")
    return version


def resolve_template_uri(uri: str, resolver: TagResolver) -> str:
    """The URI pinned to a version: a tag is replaced by the ``sha256:`` version it points to.

    Args:
        uri: An Artifact Registry template URI (tag or version).
        resolver: Looks a tag up; not called when ``uri`` already names a version.

    Returns:
        ``HOST/PACKAGE/sha256:DIGEST``.
    """
    template = parse_template_uri(uri)
    if template.is_version:
        return template.uri
    version = version_from_tag(resolver(template.host, template.package, template.ref))
    return dataclasses.replace(template, ref=version).uri


def load_pipeline_spec(path: str, field: str = "template") -> dict[str, Any]:
    """Reads the PipelineSpec of a compiled pipeline YAML (the first YAML document).

    Raises:
        errors.SpecValidationError: Missing, unreadable, or not a compiled KFP pipeline.
    """
    problems = Problems()
    spec: Any = None
    fix = "Pass a pipeline YAML written by `vsp compile` (compiled/pipelines/*.yaml)."
    try:
        with open(path, encoding="utf-8") as handle:
            spec = next(iter(yaml.load_all(handle, Loader=SAFE_LOADER)), None)
    except FileNotFoundError:
        problems.add(field, path, "The file does not exist.", fix)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        problems.add(field, path, f"Cannot read it as YAML ({type(exc).__name__}).", fix)
    else:
        if isinstance(spec, dict) and isinstance(spec.get("pipelineSpec"), dict):
            spec = spec["pipelineSpec"]
        name = (spec.get("pipelineInfo") or {}).get("name") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or "root" not in spec or not name:
            problems.add(
                field, path, "Is not a compiled pipeline (no root or pipelineInfo.name).", fix
            )
    problems.raise_if_any("pipeline template")
    return spec


def check_host(host: str, field: str = "host") -> str:
    """Checks an Artifact Registry KFP repository URL; returns it without a trailing slash."""
    cleaned = (host or "").strip().rstrip("/")
    problems = Problems()
    if not REGISTRY_HOST.fullmatch(cleaned):
        problems.add(
            field, host, "Is not an Artifact Registry KFP repository URL.",
            f"Use {HOST_FORM} (a repository of format KFP).",
        )  # fmt: skip
    problems.raise_if_any("registry host")
    return cleaned


def check_tags(tags: list[str], field: str = "tags") -> None:
    """Checks tags to attach to an upload (not ``sha256:``-like, letters/digits/``._-``)."""
    problems = Problems()
    for index, tag in enumerate(tags):
        if tag.startswith("sha256:") or not TAG.fullmatch(tag):
            problems.add(
                f"{field}[{index}]", tag, "Is not a valid tag (letters, digits, '.', '_', '-'; "
                "1-128 chars; not starting with 'sha256:').", "Use a tag such as 'latest' or 'v1'.",
            )  # fmt: skip
    problems.raise_if_any("tags")


@dataclasses.dataclass(frozen=True)
class Published:
    """A pipeline uploaded to Artifact Registry.

    Attributes:
        package: Package name.
        version: ``sha256:DIGEST``.
        template_uri: The version's URI (what to submit or schedule).
        tag_uris: One URI per tag attached.
    """

    package: str
    version: str
    template_uri: str
    tag_uris: list[str]


def publish(path: str, host: str, tags: list[str], upload: Uploader) -> Published:
    """Validates, then uploads a compiled pipeline to an Artifact Registry KFP repository.

    Args:
        path: Compiled pipeline YAML.
        host: ``https://REGION-kfp.pkg.dev/PROJECT/REPO``.
        tags: Tags to attach (an existing tag moves to the new version).
        upload: Does the upload (``RegistryClient(host).upload_pipeline``).

    Returns:
        What was uploaded and the URIs to use.
    """
    host = check_host(host)
    check_tags(tags)
    load_pipeline_spec(os.fspath(path), field="file")
    package, version = upload(os.fspath(path), list(tags))
    version = version_from_tag(version)
    return Published(
        package=package,
        version=version,
        template_uri=f"{host}/{package}/{version}",
        tag_uris=[f"{host}/{package}/{tag}" for tag in tags],
    )


# The shipped components after which a cluster may stay up with a vsp-expires-at label that
# only the reaper acts on (a keep, a shrink, a retry window, another run's use found at delete).
KEEPING_COMPONENTS = ("keep-cluster", "shrink-cluster", "finalize-cluster", "delete-cluster")


def keeps_clusters(template: str) -> bool:
    """Whether a local template runs a component of ``KEEPING_COMPONENTS`` (by its name in the
    template's ``components``, e.g. ``comp-keep-cluster`` or ``comp-keep-cluster-2``); False for
    a registry template or one that cannot be read (its problems are reported elsewhere)."""
    if is_registry_uri(template):
        return False
    try:
        spec = load_pipeline_spec(template)
    except errors.UserError:
        return False
    names = (
        re.sub(r"-\d+$", "", name.removeprefix("comp-")) for name in spec.get("components", {})
    )
    return any(name in KEEPING_COMPONENTS for name in names)
