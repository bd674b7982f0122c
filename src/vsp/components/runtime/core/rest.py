"""The one Vertex AI REST client, for the real service and for the local emulator alike.

The only backend switch is the endpoint: when ``VERTEX_EMULATOR_HOST=host:port`` is set (the
convention of Google's own emulators) requests go over plain HTTP to that address with no
credentials; otherwise they go to ``https://{location}-aiplatform.googleapis.com`` with
Application Default Credentials from google-auth.

Retries: GET, PATCH and DELETE are retried on transient failures (429, 5xx, resets, timeouts)
with jittered exponential backoff from ``google.api_core.retry``, unless the caller asks not to.
A POST is retried only when the caller says it is idempotent: a create is never retried
blindly; callers look the resource up first (see ``cluster_ops``). No header or token is
ever logged. The location and every project in a path are checked against Google's formats
(``resource_ids``) before a URL is built, so no parameter can change the host.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import requests
from google.api_core import exceptions as api_exceptions
from google.api_core import retry as api_retry

from vsp.components.runtime.core import errors, resource_ids

log = logging.getLogger(__name__)

EMULATOR_ENV = "VERTEX_EMULATOR_HOST"
USER_AGENT = "vertex-slurm-pipelines/0.1"
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """Backoff for transient failures of one request.

    Attributes:
        initial: First delay, seconds.
        maximum: Largest delay, seconds.
        multiplier: Growth between attempts.
        deadline: Total seconds spent retrying one request before giving up.
    """

    initial: float = 1.0
    maximum: float = 32.0
    multiplier: float = 2.0
    deadline: float = 300.0

    def build(self) -> api_retry.Retry:
        """The google-api-core ``Retry`` object for this policy (retries ``TransientError``)."""
        return api_retry.Retry(
            predicate=lambda exc: isinstance(exc, errors.TransientError),
            initial=self.initial,
            maximum=self.maximum,
            multiplier=self.multiplier,
            timeout=self.deadline,
            on_error=lambda exc: log.warning("transient error, will retry: %s", exc),
        )


def emulator_host() -> str | None:
    """The emulator address from ``VERTEX_EMULATOR_HOST``, or None for the real service."""
    value = os.environ.get(EMULATOR_ENV, "").strip()
    if not value:
        return None
    return value.removeprefix("http://")


PUBSUB_ROOT = "https://pubsub.googleapis.com"


def service_root(location: str, emulator: str | None) -> str:
    """Base URL (scheme and host) for a Vertex location.

    Args:
        location: Vertex region such as ``us-central1``.
        emulator: ``host:port`` of the emulator, or None for the real service.
    """
    if emulator:
        return f"http://{emulator}"
    return f"https://{location}-aiplatform.googleapis.com"


KEY_FILE_ENV = "GOOGLE_APPLICATION_CREDENTIALS"


def credentials_problem(exc: Exception) -> str:
    """Why google-auth found no usable credentials, in its words (a key file's path, never its
    contents), and the fix, as one sentence without its final period.

    Args:
        exc: What google-auth raised (``DefaultCredentialsError`` or a refresh error).
    """
    said = str(exc).strip().rstrip(".") or type(exc).__name__
    key_file = os.environ.get(KEY_FILE_ENV)
    if key_file:
        fix = (
            f"check the key file {KEY_FILE_ENV} names ({key_file}), or unset it and run "
            "`gcloud auth application-default login`"
        )
    else:
        fix = (
            "run `gcloud auth application-default login`, run on Google Cloud with a service "
            "account"
        )
    return f"no usable Google Cloud credentials ({said}). Fix: {fix}"


class VertexRestClient:
    """JSON-over-HTTP client for Vertex AI REST paths.

    Paths are given without a leading slash and include the API version, e.g.
    ``v1beta1/projects/p/locations/us-central1/modelDevelopmentClusters``.

    Args:
        location: Vertex region the requests go to.
        session: A ``requests.Session`` to use; when None one is built (an ``AuthorizedSession``
            with Application Default Credentials for the real service).
        retry: Backoff for transient failures.
        timeout: Seconds to wait for one HTTP response.
        deadline_at: Monotonic time (``time.monotonic()``) after which no request is sent: each
            request waits at most what is left and retries stop there (None: no such bound).
        root: Base URL of another Google API served the same way (e.g. ``PUBSUB_ROOT``); the
            emulator serves it too when ``VERTEX_EMULATOR_HOST`` is set. None: Vertex AI.
    """

    def __init__(
        self,
        location: str,
        *,
        session: requests.Session | None = None,
        retry: RetryPolicy = RetryPolicy(),
        timeout: float = 60.0,
        deadline_at: float | None = None,
        root: str | None = None,
    ):
        if not location:
            raise errors.UserError(
                "location is empty. Fix: pass a Vertex region such as us-central1."
            )
        self.location = resource_ids.check_location(location)
        self.emulator = emulator_host()
        self.root = service_root(location, self.emulator)
        if root and not self.emulator:
            self.root = root
        self.timeout = timeout
        self._policy = retry
        self._retry = retry.build()
        self._deadline = retry.deadline
        self.deadline_at = deadline_at
        self._session = session or self._default_session()
        self.requests_sent = 0  # each counts against the Vertex quota
        self.answers_received = 0  # HTTP responses of any status (the API was reachable)

    def _default_session(self) -> requests.Session:
        if self.emulator:
            session = requests.Session()
        else:
            import google.auth  # noqa: PLC0415 - only the real service needs credentials
            from google.auth.transport.requests import AuthorizedSession  # noqa: PLC0415

            try:
                credentials, _ = google.auth.default(scopes=[CLOUD_PLATFORM_SCOPE])
            except google.auth.exceptions.DefaultCredentialsError as exc:
                raise errors.UserError(
                    f"{credentials_problem(exc)}, or set {EMULATOR_ENV} to use the local emulator."
                ) from exc
            session = AuthorizedSession(credentials)
        session.headers["User-Agent"] = USER_AGENT
        return session

    def url(self, path: str) -> str:
        """Absolute URL of an API path (its ``projects/{id}`` segments checked first)."""
        return f"{self.root}/{resource_ids.check_path(path).lstrip('/')}"

    def get(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """GET, retried on transient failures."""
        return self._retried("GET", path, params, None)

    def list_all(
        self, path: str, key: str | tuple[str, ...], params: dict[str, Any] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every item of a list method, following ``nextPageToken``.

        Args:
            path: API path of the collection, e.g. ``v1/projects/P/locations/L/customJobs``.
            key: Field of the response holding the page's items, e.g. ``customJobs``; with
                several, the first one present (for fields whose name is not certain).
            params: Query parameters (``filter``, ``pageSize``, ...), sent with every page.
        """
        keys = (key,) if isinstance(key, str) else key
        params = dict(params or {})
        while True:
            page = self.get(path, params)
            yield from next((page[k] for k in keys if page.get(k)), [])
            token = page.get("nextPageToken")
            if not token:
                return
            params["pageToken"] = token

    def delete(
        self, path: str, params: dict[str, Any] | None = None, *, retry: bool = True
    ) -> dict[str, Any]:
        """DELETE; retried on transient failures unless ``retry`` is False (callers that must
        tell "deleted by me" from "already deleting" read the resource again instead)."""
        if not retry:
            return self._send("DELETE", path, params, None)
        return self._retried("DELETE", path, params, None)

    def patch(
        self,
        path: str,
        body: dict[str, Any],
        params: dict[str, Any] | None = None,
        *,
        retry: bool = True,
    ) -> dict[str, Any]:
        """PATCH with a full body and an update mask; retried unless ``retry`` is False (a
        resource that starts an update operation refuses a second PATCH while it runs)."""
        if not retry:
            return self._send("PATCH", path, params, body)
        return self._retried("PATCH", path, params, body)

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT (a create by name, as Pub/Sub's): never retried; as the name is the caller's
        own, an ALREADY_EXISTS answer (``AlreadyExistsError``) is its lookup."""
        return self._send("PUT", path, None, body)

    def post(
        self,
        path: str,
        body: dict[str, Any],
        params: dict[str, Any] | None = None,
        *,
        idempotent: bool = False,
    ) -> dict[str, Any]:
        """POST. Retried only when ``idempotent`` (a create must look the resource up instead)."""
        if idempotent:
            return self._retried("POST", path, params, body)
        return self._send("POST", path, params, body)

    def _retried(
        self, method: str, path: str, params: dict[str, Any] | None, body: dict[str, Any] | None
    ) -> dict[str, Any]:
        """``_send`` with the retry policy; its deadline passing is a ``TransientError`` too.

        google-api-core raises its own ``RetryError`` when the deadline passes; it is mapped to
        ``errors.UnavailableError`` (exit code 75 in a step), so callers and the polling
        primitive see one taxonomy and a long poll keeps going past one request's deadline.
        """
        retry, budget = self._retry, self._deadline
        if self.deadline_at is not None:
            budget = max(0.0, min(budget, self.deadline_at - time.monotonic()))
            if budget <= 0:
                return self._send(method, path, params, body)  # raises DeadlinePassedError
            retry = dataclasses.replace(self._policy, deadline=budget).build()
        try:
            return retry(self._send)(method, path, params, body)
        except api_exceptions.RetryError as exc:
            cause = exc.cause
            if isinstance(cause, errors.DeadlinePassedError):
                raise cause from exc
            http_status = getattr(cause, "http_status", 0)
            fix = ""
            if not http_status:
                where = f"{EMULATOR_ENV}={self.emulator}" if self.emulator else self.root
                fix = f". Fix: check that {where} is reachable from here, then retry"
            raise errors.UnavailableError(
                f"still failing after {budget:g} s of retries (last: "
                f"{getattr(cause, 'message', None) or cause}){fix}",
                http_status=http_status,
                status=getattr(cause, "status", "") or "UNAVAILABLE",
                method=method,
                url=self.url(path),
            ) from exc

    def _send(
        self, method: str, path: str, params: dict[str, Any] | None, body: dict[str, Any] | None
    ) -> dict[str, Any]:
        url = self.url(path)
        timeout = self.timeout
        if self.deadline_at is not None:
            timeout = min(timeout, self.deadline_at - time.monotonic())
            if timeout <= 0:
                raise errors.DeadlinePassedError(
                    "not sent: the caller's deadline has passed",
                    status="DEADLINE_EXCEEDED",
                    method=method,
                    url=url,
                )
        log.debug("%s %s", method, url)
        self.requests_sent += 1
        try:
            response = self._session.request(
                method,
                url,
                params=params,
                data=None if body is None else json.dumps(body),
                headers={"Content-Type": "application/json"} if body is not None else None,
                timeout=timeout,
            )
        except (
            requests.ConnectionError,
            requests.Timeout,
            requests.exceptions.ChunkedEncodingError,  # the connection broke mid-answer
            requests.exceptions.ContentDecodingError,
        ) as exc:
            raise errors.UnavailableError(
                f"no response ({type(exc).__name__})", status="UNAVAILABLE", method=method, url=url
            ) from exc
        self.answers_received += 1
        try:
            payload = response.json() if response.content else {}
        except ValueError:
            payload = response.text
        if response.status_code >= 400:
            raise errors.api_error_from_response(
                response.status_code, payload, method=method, url=url
            )
        if not isinstance(payload, dict):
            raise errors.InternalError(
                f"{method} {url} returned a non-object body: {payload!r:.200}"
            )
        return payload
