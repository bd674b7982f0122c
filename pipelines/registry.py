"""The pipelines this project ships, by name, and their defaults for local runs."""

from __future__ import annotations

from pipelines import cluster_lifecycle

PIPELINES = {
    cluster_lifecycle.NAME: cluster_lifecycle.build,
}

LOCAL_DEFAULTS = {
    cluster_lifecycle.NAME: {"project": "local-project", "location": "us-central1"},
}
