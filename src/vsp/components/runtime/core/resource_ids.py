"""Google Cloud project ids and Vertex AI locations, checked before any URL is built from them.

The location becomes part of the host name (``https://{location}-aiplatform.googleapis.com``)
and the project part of every path, so a value such as ``evil.example/#`` would send requests,
with the bearer token, to another host. Both are checked against Google's formats first:

* location: a region name, e.g. ``us-central1``, ``europe-west4``,
  ``northamerica-northeast1`` (lowercase words joined by ``-``, ending in digits). ``global`` is
  refused: training clusters, Model Registry, CustomJobs and Pipelines are regional. A name of
  that shape outside ``vertex_locations`` (a typo, or a region newer than the list) is logged
  as a warning with the listed regions that look like it, and used;
* project: a project id (6-30 characters: a lowercase letter first, then lowercase letters,
  digits or ``-``, not ending in ``-``), optionally ``domain:``-scoped as older projects are
  (``example.com:my-project``), or a project number (digits).

https://cloud.google.com/resource-manager/docs/creating-managing-projects#before_you_begin
https://cloud.google.com/vertex-ai/docs/general/locations
"""

from __future__ import annotations

import logging
import re

from vsp.components.runtime.core import errors, vertex_locations

log = logging.getLogger(__name__)

LOCATION = re.compile(r"^[a-z]+(?:-[a-z]+)+[0-9]+\Z")
PROJECT = re.compile(
    r"^(?:[a-z0-9][a-z0-9.-]{0,61}[a-z0-9]:)?(?:[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})\Z"
)
_PROJECT_IN_PATH = re.compile(r"(?:^|/)projects/([^/]*)")


def check_location(location: object) -> str:
    """The location if it is a Vertex AI region name (a warning when it is not a listed one).

    Raises:
        errors.UserError: It is not (the message names the value and the fix).
    """
    if location == "global":
        raise errors.UserError(
            "location 'global': training clusters, Model Registry and Vertex AI Pipelines are "
            "regional. Fix: pass the region the cluster and the model live in, e.g. us-central1."
        )
    if not isinstance(location, str) or not LOCATION.match(location):
        raise errors.UserError(
            f"location {errors.shown(location)} is not a Vertex AI region. Fix: pass a region name "
            "such as us-central1 or europe-west4 (lowercase, as `gcloud ai locations` lists)."
        )
    if not vertex_locations.is_location(location):
        log.warning(
            "location %r is not among the Vertex AI regions known to this version (%s); "
            "regions that look like it: %s. If it is a typo, requests will find nothing there.",
            location, vertex_locations.SOURCE, ", ".join(vertex_locations.nearest(location)),
        )  # fmt: skip
    return location


def check_project(project: object) -> str:
    """The project if it is a Google Cloud project id or number.

    Raises:
        errors.UserError: It is not (the message names the value and the fix).
    """
    if not isinstance(project, str) or not PROJECT.match(project):
        raise errors.UserError(
            f"project {errors.shown(project)} is not a Google Cloud project id. Fix: pass the "
            "project id (6-30 lowercase letters, digits or hyphens, starting with a letter), "
            "or the project number."
        )
    return project


def check_path(path: str) -> str:
    """The API path if every ``projects/{id}`` segment in it names a valid project.

    Raises:
        errors.UserError: A project segment is invalid, or the path climbs with ``..``.
    """
    if any(part in (".", "..") for part in path.split("/")):
        raise errors.UserError(
            f"API path {errors.shown(path)} has a '.' or '..' segment. Fix: pass project, location "
            "and resource ids without '/' or dots as whole path segments."
        )
    for project in _PROJECT_IN_PATH.findall(path.split("?", 1)[0]):
        check_project(project)
    return path
