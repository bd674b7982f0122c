"""Registering a trained model in the Vertex AI Model Registry (``models:upload``), retry-safe.

``register_model`` refuses a model directory whose manifest does not verify, before any request.
Every version it uploads carries the label ``vsp-pipeline-run=<run label>``; before uploading,
and again right before every resend after a transient failure of the upload POST (which is
never retried blindly), it lists the model's versions and returns the one carrying the run's
label and the same model directory (``artifactUri``) instead of uploading a second copy. When
two versions of the run exist anyway (copies of the step racing, or a POST the service applied
late), ``registry.versions.converge`` keeps the lowest one in every copy. A new model is
uploaded with ``modelId``, a new version with ``parentModel``.

Late uploads. An upload POST that timed out or lost its connection may still be applied
seconds later, after this step converged and reported its version. Two rules keep such a late
version harmless:

* the upload carries no ``versionAliases``: the aliases are moved onto the run's one version
  by ``converge`` (``mergeVersionAliases``) once it is known, so a version landing late can
  never take an alias from the version the run reports (a late upload that carried the aliases
  would move them onto itself, since an alias names one version of a model);
* after any upload attempt whose outcome is unknown, the run's versions are looked at again
  for ``settle_seconds`` (``polling.poll_until``; its clock is injectable), and every late
  version that shows up is converged away (the lowest id, the one reported, stays).

A POST applied later still than ``settle_seconds`` leaves a second version without aliases;
the next look of any copy of the step deletes it. Waiting only after an unknown outcome keeps
the common path as fast as before.

Why REST by hand and not google-cloud-aiplatform, which covers this service: the step would have
to install it at start on a stock image, 56 s and 302 MB more (46 packages, with grpcio and
google-cloud-storage/-bigquery) and 8 s to import, measured on 2 cores; the few calls made here
need only ``core.rest`` (requests + google-auth). The SDK is checked against the emulator in
``tests/emulator/test_emu_google_sdk.py``.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from vsp.components.runtime.core import (
    errors,
    gcp_labels,
    gcp_resources,
    gcs_paths,
    operations,
    polling,
    rest,
)
from vsp.components.runtime.registry import versions as model_versions
from vsp.components.runtime.trainer import manifests

log = logging.getLogger(__name__)

API_VERSION = "v1"
MODEL_ID = re.compile(r"^[a-z][a-z0-9_-]{0,62}\Z")
ALIAS = re.compile(r"^[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]\Z")
ALIAS_RULE = (
    "2-128 characters: a lowercase letter first, then letters, digits or hyphens, ending in a "
    "lowercase letter or a digit"
)
FAST_POLL = polling.Backoff(initial=0.5, maximum=10.0, multiplier=1.5)
SETTLE_SECONDS = 60.0


@dataclasses.dataclass(frozen=True)
class RegisteredModel:
    """A model version in the registry.

    Attributes:
        name: ``projects/P/locations/L/models/ID``.
        version_id: Decimal version id, e.g. ``"2"``.
        resource_name: ``projects/P/locations/L/models/ID@N``.
        reused: True when a version uploaded earlier by the same run was returned (this call
            uploaded nothing).
    """

    name: str
    version_id: str
    resource_name: str
    reused: bool


def build_labels(
    labels: Mapping[str, str] | None, provenance: Mapping[str, str] | None, run_label: str
) -> dict[str, str]:
    """User labels, then provenance labels, then ``vsp-pipeline-run``, checked and sanitized.

    Args:
        labels: User labels.
        provenance: Provenance labels from the caller (pipeline, commit, ...).
        run_label: The pipeline run's identity.

    Returns:
        The labels; values pass through ``step.label_value``.

    Raises:
        errors.UserError: A key breaks the GCP label rules, or there are too many labels.
    """
    merged: dict[str, str] = {}
    for key, value in [*(labels or {}).items(), *(provenance or {}).items()]:
        if not isinstance(key, str) or not gcp_labels.KEY.match(key):
            raise errors.UserError(
                f"label key {key!r} is invalid. Fix: use lowercase letters, digits, _ and -, "
                "starting with a letter, at most 63 characters."
            )
        merged[key] = gcp_labels.value(str(value))
    run_value = gcp_labels.run_value(run_label or "")
    if not run_value:
        raise errors.UserError("run_label is empty. Fix: pass the pipeline run's id.")
    merged[gcp_labels.PIPELINE_RUN] = run_value
    if len(merged) > gcp_labels.MAX_LABELS:
        raise errors.UserError(f"{len(merged)} labels; GCP allows at most {gcp_labels.MAX_LABELS}.")
    return merged


def find_run_version(
    client: rest.VertexRestClient, model_name: str, run_value: str, artifact_uri: str | None = None
) -> tuple[bool, dict[str, Any] | None]:
    """Looks for the version of a model carrying ``vsp-pipeline-run=run_value``.

    Args:
        artifact_uri: Only a version of this model directory (None: any directory).

    Returns:
        (whether the model exists, the run's version with the lowest id, or None).
    """
    exists, versions = model_versions.run_versions(client, model_name, run_value, artifact_uri)
    return exists, versions[0] if versions else None


def register_model(
    client: rest.VertexRestClient,
    *,
    project: str,
    location: str,
    model_id: str,
    display_name: str,
    artifact_uri: str,
    serving_image: str,
    labels: Mapping[str, str] | None = None,
    version_aliases: Iterable[str] = (),
    description: str = "",
    run_label: str,
    provenance: Mapping[str, str] | None = None,
    gcp_resources_path: str = "",
    upload_attempts: int = 5,
    retry_delay: float = 2.0,
    poll_backoff: polling.Backoff = FAST_POLL,
    timeout: float = 1800.0,
    settle_seconds: float = SETTLE_SECONDS,
    clock: polling.Clock | None = None,
) -> RegisteredModel:
    """Uploads a model directory as a new model or a new version, at most once per run label.

    Args:
        client: The REST client.
        project: GCP project.
        location: Vertex region.
        model_id: Registry model id (``[a-z][a-z0-9_-]{0,62}``).
        display_name: Display name of the version.
        artifact_uri: ``gs://`` (or local) model directory; its manifest must verify.
        serving_image: Serving container image URI.
        labels: User labels.
        version_aliases: Aliases for the new version (``default`` moves the default).
        description: Description of the model and the version.
        run_label: The pipeline run's identity, stored as label ``vsp-pipeline-run``.
        provenance: Provenance labels added to the user labels.
        gcp_resources_path: Where to record the LRO then the model version (skipped when empty).
        upload_attempts: Upload tries when the POST fails transiently and left no version.
        retry_delay: Seconds between those tries (doubled each time).
        poll_backoff: Poll schedule of the upload operation.
        timeout: Seconds to wait for the upload operation.
        settle_seconds: After an upload attempt whose outcome is unknown, how long to keep
            looking for a version it may still create (see the module docstring).
        clock: Time source of that look (``RealClock`` when None).

    Returns:
        The registered version.

    Raises:
        errors.UserError: The model directory does not verify or an argument is invalid.
        errors.TransientError: The upload kept failing transiently.
    """
    manifests.verify_model_dir(gcs_paths.to_local_path(artifact_uri))
    aliases = list(version_aliases)
    _check_args(model_id, display_name, serving_image, aliases)
    all_labels = build_labels(labels, provenance, run_label)
    run_value = all_labels[gcp_labels.PIPELINE_RUN]
    name = f"projects/{project}/locations/{location}/models/{model_id}"

    unknown = []  # upload attempts whose outcome is not known: they may land late

    def done(version_id: str, reused: bool, recorded=()) -> RegisteredModel:
        settle = settle_seconds if unknown else 0.0
        return _converged(
            client, name, (run_value, artifact_uri), aliases, version_id, reused,
            gcp_resources_path, list(recorded), poll_backoff, timeout, settle,
            clock or polling.RealClock(),
        )  # fmt: skip

    exists, found = find_run_version(client, name, run_value, artifact_uri)
    if found is not None:
        log.info(
            "run %s already registered %s@%s from %s",
            run_value, name, found["versionId"], artifact_uri,
        )  # fmt: skip
        return done(found["versionId"], True)
    if exists:
        overwritten = model_versions.other_runs_in_directory(client, name, run_value, artifact_uri)
        if overwritten:
            log.warning(
                "%s is also the model directory of version(s) %s of %s, registered by other "
                "runs: this run wrote its model over theirs, so they now serve this run's "
                "files. Fix: give model_dir a {run} (a folder per run)",
                artifact_uri,
                ", ".join(v["versionId"] for v in overwritten),
                name,
            )
    model = {
        "displayName": display_name,
        "description": description,
        "versionDescription": description,
        "artifactUri": artifact_uri,
        "containerSpec": {"imageUri": serving_image},
        "labels": all_labels,
    }
    parent = f"projects/{project}/locations/{location}"
    delay = retry_delay
    for attempt in range(1, upload_attempts + 1):
        if attempt > 1:
            # Look again right before every resend: an earlier POST may have been applied late.
            exists, found = find_run_version(client, name, run_value, artifact_uri)
            if found is not None:
                return done(found["versionId"], False)
        body: dict[str, Any] = {"model": model}
        body.update({"parentModel": name} if exists else {"modelId": model_id})
        try:
            operation = client.post(f"{API_VERSION}/{parent}/models:upload", body)
        except (errors.TransientError, errors.AlreadyExistsError) as exc:
            log.warning("upload attempt %d of %s failed: %s", attempt, name, exc)
            if isinstance(exc, errors.TransientError):
                unknown.append(attempt)
            if attempt == upload_attempts:
                exists, found = find_run_version(client, name, run_value, artifact_uri)
                if found is not None:
                    return done(found["versionId"], False)
                raise
            time.sleep(delay)
            delay *= 2
            continue
        lro = _resource(client, gcp_resources.LRO, operation["name"])
        _record(gcp_resources_path, [lro])
        response = operations.wait_for_operation(
            client,
            operation["name"],
            api_version=API_VERSION,
            timeout=timeout,
            backoff=poll_backoff,
            what=f"upload of {name}",
            latest=operation,
        )
        return done(str(response["modelVersionId"]), False, [lro])
    raise errors.InternalError("unreachable: no upload attempt was made")


def _converged(
    client: rest.VertexRestClient,
    name: str,
    identity: tuple[str, str],
    aliases: list[str],
    version_id: str,
    reused: bool,
    path: str,
    recorded: list[gcp_resources.Resource],
    poll_backoff: polling.Backoff,
    timeout: float,
    settle: float,
    clock: polling.Clock,
) -> RegisteredModel:
    """The run's one version after ``model_versions.converge``, recorded and returned.

    With ``settle`` > 0, the run's versions are watched that long and converged again whenever
    a late one shows up. ``identity`` is the run label's value and the model directory.
    """
    run_value, artifact_uri = identity
    winner = model_versions.converge(
        client, name, run_value, aliases, poll_backoff=poll_backoff, timeout=timeout,
        artifact_uri=artifact_uri,
    )  # fmt: skip
    end = clock.now() + settle
    while clock.now() < end:
        try:
            polling.poll_until(
                lambda: model_versions.run_versions(client, name, run_value, artifact_uri)[1],
                lambda found: len(found) > 1,
                what=f"a late upload of run {run_value} to {name}",
                timeout=end - clock.now(),
                backoff=poll_backoff,
                clock=clock,
                describe=lambda found: f"{len(found)} version(s)",
                heartbeat=None,
            )
        except errors.TimeoutExceededError:
            break
        log.warning("a late upload of run %s landed: converging again", run_value)
        winner = model_versions.converge(
            client, name, run_value, aliases, poll_backoff=poll_backoff, timeout=timeout,
            artifact_uri=artifact_uri,
        )  # fmt: skip
    if winner is not None and winner != version_id:
        log.info("run %s keeps %s@%s, not @%s", run_value, name, winner, version_id)
        version_id, reused = winner, True
    return _finish(client, name, version_id, reused, path, recorded)


def _finish(
    client: rest.VertexRestClient,
    name: str,
    version_id: str,
    reused: bool,
    path: str,
    recorded: list[gcp_resources.Resource],
) -> RegisteredModel:
    resource_name = f"{name}@{version_id}"
    _record(path, [*recorded, _resource(client, gcp_resources.MODEL, resource_name)])
    log.info("model version %s (reused=%s)", resource_name, reused)
    return RegisteredModel(name, version_id, resource_name, reused)


def _check_args(model_id: str, display_name: str, image: str, aliases: list[str]) -> None:
    if not MODEL_ID.match(model_id or ""):
        raise errors.UserError(
            f"model_id {model_id!r} is invalid. Fix: use [a-z][a-z0-9_-], at most 63 characters."
        )
    if not (display_name or "").strip():
        raise errors.UserError("display_name is empty. Fix: give the model a display name.")
    if not (image or "").strip():
        raise errors.UserError("serving_image is empty. Fix: pass a serving container image.")
    for alias in aliases:
        if not ALIAS.match(alias):
            raise errors.UserError(f"version alias {alias!r} is invalid. Fix: use {ALIAS_RULE}.")


def _resource(client: rest.VertexRestClient, kind: str, name: str) -> gcp_resources.Resource:
    return gcp_resources.Resource(kind, client.url(f"{API_VERSION}/{name}"))


def _record(path: str, resources: list[gcp_resources.Resource]) -> None:
    if path:
        gcp_resources.write(path, resources)
