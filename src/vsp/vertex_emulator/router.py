"""Routing: (method, path regex) -> handler, and the request/response types handlers use.

A resource module registers its routes from its ``register(app)`` function::

    def register(app):
        app.router.add_api("GET", r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
                                  r"/customJobs/(?P<job>[^/:]+)", get_custom_job)

``add_api`` prefixes ``/v1beta1/`` and ``/v1/`` (named group ``api_version``). A handler takes a
``Request`` and returns a ``Response`` or raises ``errors.ApiException``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Any

from vsp.vertex_emulator import errors, fault_rules

API_VERSIONS = ("v1beta1", "v1")


@dataclasses.dataclass
class Response:
    """What a handler answers.

    Attributes:
        status: HTTP status code.
        body: JSON-serialisable body.
        headers: Extra response headers.
        hold_seconds: A long poll's empty answer: the app calls the handler again whenever the
            emulator's state changes (``EmulatorApp.changed``), up to this many seconds, and
            answers the first reply that holds no more (0: answer now).
    """

    body: Any = dataclasses.field(default_factory=dict)
    status: int = 200
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    hold_seconds: float = 0.0


@dataclasses.dataclass
class Request:
    """One API request as handlers see it.

    Attributes:
        app: The ``EmulatorApp`` serving it (store, settings, operations, clock, ...).
        method: Upper-case HTTP method.
        path: Decoded path without the query string.
        query: Parameter -> value (a list when the parameter is repeated).
        body: Parsed JSON body, or None when the body is empty.
        body_text: The raw body text.
        params: Named groups of the matched route (``api_version`` for API routes).
        fired_faults: Ids of resource-level fault rules this request consumed.
    """

    app: Any
    method: str
    path: str
    query: dict[str, Any]
    body: Any
    body_text: str = ""
    params: dict[str, str] = dataclasses.field(default_factory=dict)
    fired_faults: list[str] = dataclasses.field(default_factory=list)

    def query_value(self, *names: str) -> str | None:
        """The value of the first present query parameter among ``names`` (last if repeated)."""
        for name in names:
            value = self.query.get(name)
            if isinstance(value, list):
                value = value[-1] if value else None
            if value is not None:
                return value
        return None

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object (``{}`` when empty).

        Raises:
            errors.ApiException: INVALID_ARGUMENT when the body is not an object.
        """
        if self.body is None:
            return {}
        if not isinstance(self.body, dict):
            raise errors.invalid_argument(
                "Invalid JSON payload received. Expected a JSON object as the request body.",
                [errors.FieldViolation("", "The request body must be a JSON object.")],
            )
        return self.body

    def fault_info(self) -> fault_rules.RequestInfo:
        """What fault rules match on."""
        return fault_rules.RequestInfo(self.method, self.path, self.query, self.body_text)

    def take_fault(self, action: str) -> fault_rules.FaultRule | None:
        """Consumes a resource-level fault (``lro_error``, ``provisioning_delay``, ...) if one
        matching this request fires now; call it only once the request is known to succeed."""
        rule = self.app.faults.take(action, self.fault_info())
        if rule is not None:
            self.fired_faults.append(rule.id)
        return rule


Handler = Callable[[Request], Response]


@dataclasses.dataclass(frozen=True)
class Route:
    """A registered route."""

    method: str
    pattern: re.Pattern[str]
    handler: Handler
    name: str


class Router:
    """An ordered list of routes; the first whose method and regex match wins."""

    def __init__(self) -> None:
        self._routes: list[Route] = []

    @property
    def routes(self) -> list[Route]:
        """The registered routes, in match order."""
        return list(self._routes)

    def add(self, method: str, pattern: str, handler: Handler, *, name: str = "") -> Route:
        """Registers a handler for a full-path regex (anchored at both ends).

        Args:
            method: HTTP method (``GET``, ``POST``, ``PATCH``, ``DELETE``, ...).
            pattern: Regex of the whole path; named groups become ``Request.params``.
            handler: The handler.
            name: Label for diagnostics; defaults to the handler's name.

        Returns:
            The new route.
        """
        regex = pattern if pattern.startswith("^") else "^" + pattern
        regex = regex if regex.endswith("$") else regex + "$"
        route = Route(method.upper(), re.compile(regex), handler, name or handler.__name__)
        self._routes.append(route)
        return route

    def add_api(
        self,
        method: str,
        tail: str,
        handler: Handler,
        *,
        versions: Iterable[str] = API_VERSIONS,
        name: str = "",
    ) -> Route:
        """Registers a handler under ``/{version}/{tail}`` for each API version.

        Args:
            method: HTTP method.
            tail: Regex of the path after the version, e.g. ``projects/(?P<project>[^/]+)/...``.
            handler: The handler.
            versions: API versions served.
            name: Label for diagnostics.

        Returns:
            The new route.
        """
        alternatives = "|".join(re.escape(v) for v in versions)
        return self.add(method, rf"^/(?P<api_version>{alternatives})/{tail}$", handler, name=name)

    def match(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        """The first route matching ``method`` and ``path`` with its named groups, or None."""
        for route in self._routes:
            if route.method != method.upper():
                continue
            found = route.pattern.match(path)
            if found:
                return route, {k: v for k, v in found.groupdict().items() if v is not None}
        return None
