"""The ``gcp_resources`` output: which remote resource a step is driving.

Written as proto-JSON ``{"resources": [{"resourceType": T, "resourceUri": U}]}`` (the convention of
google-cloud-pipeline-components, which the Vertex Pipelines UI reads). A step writes it right
after creating a resource and before polling, and reads it again when it is retried, so that a
retried step re-attaches to the resource instead of creating a second one.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import tempfile

log = logging.getLogger(__name__)

LRO = "VertexLro"
CLUSTER = "ModelDevelopmentCluster"
SLURM_JOB = "SlurmJob"
CUSTOM_JOB = "CustomJob"
MODEL = "VertexModel"


@dataclasses.dataclass(frozen=True)
class Resource:
    """One entry of ``gcp_resources``.

    Attributes:
        resource_type: ``VertexLro``, ``ModelDevelopmentCluster``, ``SlurmJob``, ``CustomJob``...
        uri: Absolute URL of the resource (``https://REGION-aiplatform.googleapis.com/v1/NAME``).
    """

    resource_type: str
    uri: str

    @property
    def name(self) -> str:
        """The resource name: the URI path after the API version (``projects/...``)."""
        path = self.uri.split("://", 1)[-1]
        marker = path.find("/projects/")
        return path[marker + 1 :] if marker >= 0 else path


def write(path: str, resources: list[Resource]) -> None:
    """Replaces the file at ``path`` atomically with ``resources``."""
    if not path:
        return
    body = {
        "resources": [{"resourceType": r.resource_type, "resourceUri": r.uri} for r in resources]
    }
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".gcp_resources.")
    with os.fdopen(fd, "w") as handle:
        json.dump(body, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    log.info("gcp_resources: %s", ", ".join(f"{r.resource_type} {r.uri}" for r in resources))


def read(path: str) -> list[Resource]:
    """The resources recorded at ``path``; empty when the file is missing, empty or unreadable."""
    if not path or not os.path.exists(path):
        return []
    try:
        with open(path) as handle:
            text = handle.read().strip()
        if not text:
            return []
        entries = json.loads(text).get("resources", [])
    except (OSError, ValueError, AttributeError) as exc:
        log.warning("ignoring unreadable gcp_resources file %s: %s", path, exc)
        return []
    return [
        Resource(e.get("resourceType", ""), e.get("resourceUri", ""))
        for e in entries
        if isinstance(e, dict) and e.get("resourceUri")
    ]


def find(resources: list[Resource], resource_type: str) -> Resource | None:
    """The last recorded resource of a type, or None."""
    matches = [r for r in resources if r.resource_type == resource_type]
    return matches[-1] if matches else None
