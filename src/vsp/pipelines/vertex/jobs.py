"""Submitting runs to Vertex AI Pipelines (``pipelineJobs``): validated requests, retry-safe create.

``PipelineJobRequest`` checks every field before any request is sent and reports all problems at
once (each names the field, the value and the fix). With a local template the parameters are also
checked against the pipeline's root ``inputDefinitions``. Body::

    {"displayName", "pipelineSpec" | "templateUri",
     "runtimeConfig": {"gcsOutputDirectory", "parameterValues"},
     "serviceAccount" (only when given), "labels"}

POSTed to ``v1/projects/P/locations/L/pipelineJobs?pipelineJobId=ID``. ``PipelineJobsClient``
never re-sends a create blindly: after a transient failure or a lost answer it reads
``pipelineJobs/ID`` first and returns the job when it exists.

Why REST by hand and not google-cloud-aiplatform's ``PipelineJob``/``PipelineJobSchedule``,
which cover this service: the same requests as the steps' (``core.rest``, one retry policy and
one error taxonomy), a create whose lost answer is followed by a lookup, not a resend (the
SDK's ``submit`` has no such lookup), and no need for the SDK, whose install is 302 MB (46
packages) and whose import takes 8 s. The SDK is checked against the
emulator in ``tests/emulator/test_emu_google_sdk.py``.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import re
import secrets
from collections.abc import Iterator, Mapping
from typing import Any

from vsp.components.runtime.cluster.rules_base import EMAIL, Problems, check_labels
from vsp.components.runtime.core import errors, polling, rest, vertex_locations
from vsp.pipelines.vertex import caching, template_parameters, templates

log = logging.getLogger(__name__)

API_VERSION = "v1"
JOB_ID = re.compile(r"^[a-z0-9-]{1,127}\Z")
PROJECT = re.compile(r"^([a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})\Z")
# The run's project and region, which the pipeline's parameters of these names must match.
RUN_PLACE = {"project": "--project", "location": "--location"}
GCS_URI = re.compile(r"^gs://[a-z0-9][a-z0-9._-]{1,220}[a-z0-9](/\S*)?\Z")
MAX_DISPLAY_NAME = 128
CREATE_ATTEMPTS = 4
CREATE_BACKOFF = polling.Backoff(initial=1.0, maximum=16.0, multiplier=2.0)


def generate_job_id(pipeline_name: str, now: datetime.datetime | None = None) -> str:
    """``<pipeline-name>-<UTC YYYYmmddHHMMSS>-<4 hex digits>``, the name cut so the id stays
    < 128 chars. The random part keeps apart two submits in one second (the second was refused
    as a taken id, with a fix that told it to do what it had done: omit --job-id)."""
    moment = now or datetime.datetime.now(datetime.timezone.utc)
    stamp = moment.astimezone(datetime.timezone.utc).strftime("%Y%m%d%H%M%S")
    stamp += f"-{secrets.token_hex(2)}"
    base = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", pipeline_name.lower())).strip("-")
    base = (base or "pipeline")[: 127 - len(stamp) - 1].rstrip("-")
    return f"{base}-{stamp}"


def with_run_place(
    values: Mapping[str, Any],
    definitions: Mapping[str, Any] | None,
    project: str,
    location: str,
) -> dict[str, Any]:
    """``values`` with the pipeline's ``project`` and ``location`` parameters filled from the
    run's ``--project`` and ``--location`` where they are not given.

    A given value is kept as is (the request refuses one that differs). With ``definitions``
    None (a registry template, whose parameters are unknown here) nothing is filled: the
    service refuses a parameter the pipeline does not have.
    """
    filled = dict(values)
    for name, value in (("project", project), ("location", location)):
        if name not in filled and definitions is not None and name in definitions:
            filled[name] = value
    return filled


def console_url(project: str, location: str, job_id: str) -> str:
    """The Google Cloud console page of a pipeline run."""
    return (
        f"https://console.cloud.google.com/vertex-ai/locations/{location}"
        f"/pipelines/runs/{job_id}?project={project}"
    )


@dataclasses.dataclass(frozen=True)
class PipelineJobRequest:
    """One pipeline run to submit, validated on construction.

    Attributes:
        project: Google Cloud project id (or number).
        location: Vertex region, e.g. ``us-central1``.
        template: A compiled pipeline YAML path, or an Artifact Registry template URI.
        pipeline_root: ``gs://`` directory for the run's outputs (``gcsOutputDirectory``).
        parameter_values: Pipeline parameters (name -> JSON value).
        service_account: Service account email the run uses; None = the project default.
        labels: Labels of the run.
        display_name: Display name; default: the pipeline's name (or the package name).
        job_id: ``pipelineJobId``; default: ``<pipeline-name>-<UTC timestamp>-<4 hex>``.
        enable_caching: True or False sets execution caching of every task (as the Vertex AI
            SDK's ``enable_caching`` does); None keeps the template's own per-task settings.
            Only a local template can be rewritten.

    Raises:
        errors.SpecValidationError: Any field is invalid (all problems listed).
    """

    project: str
    location: str
    template: str
    pipeline_root: str
    parameter_values: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    service_account: str | None = None
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    display_name: str | None = None
    job_id: str | None = None
    enable_caching: bool | None = None
    _spec: dict[str, Any] | None = dataclasses.field(
        default=None, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        problems = Problems()
        spec, pipeline_name = self._check_template(problems)
        object.__setattr__(self, "_spec", spec)
        self._check_location(problems)
        if not isinstance(self.pipeline_root, str) or not GCS_URI.fullmatch(self.pipeline_root):
            problems.add(
                "pipeline_root", self.pipeline_root or None,
                "Must be a gs://BUCKET[/PATH] directory (bucket names: 3-222 lowercase letters, "
                "digits, '-', '_' or '.').",
                "Pass --pipeline-root gs://BUCKET/PATH (a bucket the run's service account "
                "can write).",
            )  # fmt: skip
        if self.service_account is not None and not EMAIL.fullmatch(self.service_account):
            problems.add(
                "service_account", self.service_account, "Is not a service account email.",
                "Use NAME@PROJECT.iam.gserviceaccount.com, or leave it unset.",
            )  # fmt: skip
        check_labels(problems, "labels", dict(self.labels))
        self._check_parameters(problems, spec)
        if self.enable_caching is not None and spec is None and self.template:
            problems.add(
                "enable_caching", self.enable_caching,
                "Caching can be overridden only for a local template (its tasks' settings are "
                "rewritten before sending); a registry template is sent by URI.",
                "Submit the compiled YAML file instead, or omit --enable-caching/"
                "--no-enable-caching to keep the template's per-task settings.",
            )  # fmt: skip
        if self.display_name is None and pipeline_name:
            object.__setattr__(self, "display_name", pipeline_name)
        if (self.display_name is not None or pipeline_name) and (
            not self.display_name or len(self.display_name) > MAX_DISPLAY_NAME
        ):
            problems.add(
                "display_name", self.display_name, f"Must be 1-{MAX_DISPLAY_NAME} characters.",
                "Pass a shorter --display-name.",
            )  # fmt: skip
        if self.job_id is None and pipeline_name:
            object.__setattr__(self, "job_id", generate_job_id(pipeline_name))
        if self.job_id is not None and not JOB_ID.fullmatch(self.job_id):
            problems.add(
                "job_id", self.job_id, "Must be 1-127 lowercase letters, digits or '-'.",
                "Pass a --job-id like 'train-2025-01-31', or omit it to get a generated one.",
            )  # fmt: skip
        problems.raise_if_any("pipeline job request")

    def _check_template(self, problems: Problems) -> tuple[dict[str, Any] | None, str]:
        if not isinstance(self.template, str) or not self.template.strip():
            problems.missing("template", "Pass --template PATH.yaml or an Artifact Registry URI.")
            return None, ""
        try:
            if templates.is_registry_uri(self.template):
                return None, templates.parse_template_uri(self.template).package
            spec = templates.load_pipeline_spec(self.template)
        except errors.SpecValidationError as exc:
            problems.items.extend(exc.problems)
            return None, ""
        return spec, str(spec["pipelineInfo"]["name"])

    def _check_location(self, problems: Problems) -> None:
        if not isinstance(self.project, str) or not PROJECT.fullmatch(self.project):
            problems.add(
                "project", self.project or None, "Is not a Google Cloud project id.",
                "Pass --project PROJECT_ID (6-30 lowercase letters, digits or '-').",
            )  # fmt: skip
        if not isinstance(self.location, str) or not vertex_locations.is_location(self.location):
            alike = ", ".join(vertex_locations.nearest(str(self.location or "")))
            problems.add(
                "location", self.location or None,
                f"Is not a Vertex AI region ({vertex_locations.SOURCE}).",
                f"Pass --location REGION, e.g. {alike} (Pipelines has no 'global').",
            )  # fmt: skip
        refused = {problem.field for problem in problems.items}
        for name, option in RUN_PLACE.items():
            given = self.parameter_values.get(name)
            if name not in refused and given is not None and given != getattr(self, name):
                problems.add(
                    f"parameter_values.{name}", given,
                    f"Differs from {option} {getattr(self, name)}: the run would be sent to one "
                    f"{name} and create its resources in another.",
                    f"Drop --param {name}=... ({option} fills it), or pass {option} {given}.",
                )  # fmt: skip

    def _check_parameters(self, problems: Problems, spec: dict[str, Any] | None) -> None:
        for name, value in self.parameter_values.items():
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                problems.add(
                    f"parameter_values.{name}", str(value), "Is not a JSON value.",
                    f"Quote it as a string: --param '{name}=\"...\"'.",
                )  # fmt: skip
        if spec is not None:
            definitions = template_parameters.root_parameters(spec)
            groups = template_parameters.option_groups(spec)
            template_parameters.check_parameters(
                problems, self.parameter_values, definitions, groups=groups
            )

    @property
    def pipeline_parameters(self) -> dict[str, dict[str, Any]] | None:
        """The template's root parameter definitions; None for a registry URI (unknown)."""
        return None if self._spec is None else template_parameters.root_parameters(self._spec)

    @property
    def parent(self) -> str:
        """``projects/P/locations/L``."""
        return f"projects/{self.project}/locations/{self.location}"

    @property
    def name(self) -> str:
        """``projects/P/locations/L/pipelineJobs/ID``."""
        return f"{self.parent}/pipelineJobs/{self.job_id}"

    def resolved(self, resolver: templates.TagResolver) -> PipelineJobRequest:
        """This request with a registry tag replaced by its ``sha256:`` version."""
        if self._spec is not None:
            return self
        uri = templates.resolve_template_uri(self.template, resolver)
        return self if uri == self.template else dataclasses.replace(self, template=uri)

    def body(self) -> dict[str, Any]:
        """The PipelineJob JSON body (the id travels as the ``pipelineJobId`` query parameter)."""
        body: dict[str, Any] = {"displayName": self.display_name}
        if self._spec is not None and self.enable_caching is not None:
            body["pipelineSpec"] = caching.with_caching(self._spec, self.enable_caching)
        elif self._spec is not None:
            body["pipelineSpec"] = self._spec
        else:
            body["templateUri"] = self.template
        body["runtimeConfig"] = {
            "gcsOutputDirectory": self.pipeline_root,
            "parameterValues": dict(self.parameter_values),
        }
        if self.service_account:
            body["serviceAccount"] = self.service_account
        body["labels"] = dict(self.labels)
        return body


class PipelineJobsClient:
    """Creates, reads and lists pipeline jobs of one location.

    Args:
        client: The REST client (its location must be the jobs' location).
        clock: Time source for the pause before a lookup (tests pass ``FakeClock``).
        backoff: Delays between create attempts; ``CREATE_BACKOFF`` when None.
    """

    def __init__(
        self,
        client: rest.VertexRestClient,
        *,
        clock: polling.Clock | None = None,
        backoff: polling.Backoff | None = None,
    ):
        self.client = client
        self.clock = clock or polling.RealClock()
        self.backoff = backoff or CREATE_BACKOFF

    def create(self, request: PipelineJobRequest) -> dict[str, Any]:
        """Creates the job; after a lost answer returns the job the lost call created.

        Raises:
            errors.UserError: The id is already taken by another job (or the request is refused).
            errors.TransientError: No answer after ``CREATE_ATTEMPTS`` attempts and no such job.
        """
        path = f"{API_VERSION}/{request.parent}/pipelineJobs"
        body, delays = request.body(), self.backoff.delays()
        last: Exception | None = None
        for attempt in range(1, CREATE_ATTEMPTS + 1):
            try:
                return self.client.post(path, body, params={"pipelineJobId": request.job_id})
            except errors.AlreadyExistsError as exc:
                found = self.get(request.name) if last is not None else None
                if found is not None:
                    return found
                raise errors.UserError(
                    f"job_id = {request.job_id!r}: a pipeline job with this id already exists "
                    f"in {request.parent}. Fix: pass another --job-id, or omit it to get a "
                    "generated one."
                ) from exc
            except errors.TransientError as exc:
                last = exc
                log.warning(
                    "create of pipeline job %s got no usable answer (attempt %d): %s; looking "
                    "it up before sending again",
                    request.job_id,
                    attempt,
                    exc,
                )
                self.clock.sleep(next(delays))
                found = self.get(request.name)
                if found is not None:
                    log.info("pipeline job %s exists: the lost call created it", request.job_id)
                    return found
        raise errors.TransientError(
            f"pipeline job {request.job_id} was not created after {CREATE_ATTEMPTS} attempts: "
            f"{last}"
        )

    def get(self, name: str) -> dict[str, Any] | None:
        """The job ``projects/P/locations/L/pipelineJobs/ID``, or None when it does not exist."""
        try:
            return self.client.get(f"{API_VERSION}/{name}")
        except errors.NotFoundError:
            return None

    def list(self, parent: str, filter_text: str | None = None) -> Iterator[dict[str, Any]]:
        """Every job of ``projects/P/locations/L`` matching a list ``filter``, newest first."""
        params = {"filter": filter_text} if filter_text else {}
        return self.client.list_all(f"{API_VERSION}/{parent}/pipelineJobs", "pipelineJobs", params)
