"""One model version per run: finding the run's version, and converging when there are two.

Every version ``register_model`` uploads carries ``vsp-pipeline-run=<run>``, and a version is
the run's for one model directory (its ``artifactUri``): two registering tasks of one run that
pass no ``task_id`` and register different directories each get a version, while a retry of
either finds its own. Uploading is not
idempotent (``models.upload`` takes no request id), so two versions for one run can still
appear: two copies of the step racing (a task retry while the lost pod still runs), or an
upload whose answer was lost and that the service applied late. ``converge`` settles it the
same way in every copy: the version with the lowest id wins; the version aliases the run asked
for are moved onto it (``mergeVersionAliases``), then every other version of the run is
deleted (``deleteVersion``; one already deleted by another copy is success). Each copy returns
the winner, so they all report the same version.

Uploads carry no aliases (``registry.client`` explains why): ``converge`` is also what gives
the run's one version its aliases, whenever it lacks one of them, two versions or not.

The versions are listed page by page (``pageToken``), so a run's version is found on a
registry with more versions than one page holds.
"""

from __future__ import annotations

import logging
from typing import Any

from vsp.components.runtime.core import errors, gcp_labels, operations, polling, rest

log = logging.getLogger(__name__)

API_VERSION = "v1"
PAGE_SIZE = 100


def run_versions(
    client: rest.VertexRestClient, model_name: str, run_value: str, artifact_uri: str | None = None
) -> tuple[bool, list[dict[str, Any]]]:
    """The versions of a model that carry ``vsp-pipeline-run=run_value``, lowest id first.

    Args:
        artifact_uri: Only the versions of this model directory (None: any directory).

    Returns:
        (whether the model exists, those versions).
    """
    path = f"{API_VERSION}/{model_name}:listVersions"
    try:
        listed = list(client.list_all(path, "models", {"pageSize": PAGE_SIZE}))
    except errors.NotFoundError:
        return False, []
    mine = [v for v in listed if (v.get("labels") or {}).get(gcp_labels.PIPELINE_RUN) == run_value]
    if artifact_uri is not None:
        mine = [v for v in mine if same_directory(v.get("artifactUri", ""), artifact_uri)]
    return True, sorted(mine, key=lambda v: int(v["versionId"]))


def other_runs_in_directory(
    client: rest.VertexRestClient, model_name: str, run_value: str, artifact_uri: str
) -> list[dict[str, Any]]:
    """The versions of other runs registered from ``artifact_uri``: a run that wrote its model
    there wrote over theirs, which now serve this run's files."""
    path = f"{API_VERSION}/{model_name}:listVersions"
    try:
        listed = list(client.list_all(path, "models", {"pageSize": PAGE_SIZE}))
    except errors.NotFoundError:
        return []
    return [
        v
        for v in listed
        if same_directory(v.get("artifactUri", ""), artifact_uri)
        and (v.get("labels") or {}).get(gcp_labels.PIPELINE_RUN) != run_value
    ]


def same_directory(first: str, second: str) -> bool:
    """Whether two ``artifactUri`` values name one directory (a trailing ``/`` aside)."""
    return first.rstrip("/") == second.rstrip("/")


def converge(
    client: rest.VertexRestClient,
    model_name: str,
    run_value: str,
    aliases: list[str],
    *,
    poll_backoff: polling.Backoff,
    timeout: float,
    artifact_uri: str | None = None,
) -> str | None:
    """Leaves one version of the run (see the module docstring); returns its id.

    Args:
        artifact_uri: The model directory whose versions are converged (None: any).

    Returns:
        The winning version id, or None when the run has no version (yet).
    """
    _exists, versions = run_versions(client, model_name, run_value, artifact_uri)
    if not versions:
        return None
    winner, losers = versions[0], versions[1:]
    missing = set(aliases) - set(winner.get("versionAliases") or [])
    if not losers:
        if missing:
            _merge_aliases(client, model_name, winner["versionId"], aliases)
        return str(winner["versionId"])
    ids = ", ".join(v["versionId"] for v in losers)
    log.warning(
        "run %s has %d versions of %s; keeping @%s, deleting @%s",
        run_value,
        len(versions),
        model_name,
        winner["versionId"],
        ids,
    )
    if aliases:
        _merge_aliases(client, model_name, winner["versionId"], aliases)
    for loser in losers:
        _delete_version(client, f"{model_name}@{loser['versionId']}", poll_backoff, timeout)
    return str(winner["versionId"])


def _merge_aliases(
    client: rest.VertexRestClient, model_name: str, version_id: str, aliases: list[str]
) -> None:
    """Moves ``aliases`` onto ``model_name@version_id`` (off any other version)."""
    client.post(
        f"{API_VERSION}/{model_name}@{version_id}:mergeVersionAliases",
        {"versionAliases": list(aliases)},
        idempotent=True,  # setting the same aliases twice changes nothing
    )


def _delete_version(
    client: rest.VertexRestClient, name: str, poll_backoff: polling.Backoff, timeout: float
) -> None:
    try:
        operation = client.delete(f"{API_VERSION}/{name}:deleteVersion")
    except errors.NotFoundError:
        log.info("%s is already deleted", name)
        return
    if operation.get("name") and not operation.get("done"):
        operations.wait_for_operation(
            client,
            operation["name"],
            api_version=API_VERSION,
            timeout=timeout,
            backoff=poll_backoff,
            what=f"deletion of {name}",
            latest=operation,
        )
    log.info("deleted the duplicate version %s", name)
