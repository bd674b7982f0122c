"""Fault rules: what a rule matches and does (see ``faults`` for how rules are applied).

HTTP-level actions (``status``, ``reset``, ``delay``) are applied by the app around the handler.
Resource-level actions (``lro_error``, ``provisioning_delay``, and any a resource module declares
with ``register_action``) are consumed by handlers through ``Request.take_fault(action)``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

HTTP_ACTIONS = ("status", "reset", "delay")
_RESOURCE_ACTIONS = {"lro_error", "provisioning_delay"}
_ALIASES = {"reset_before": ("reset", "before"), "reset_after": ("reset", "after")}


def register_action(name: str) -> None:
    """Declares a resource-level action (call at import time of the module that consumes it)."""
    if name in HTTP_ACTIONS or name in _ALIASES or not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        raise ValueError(f"invalid fault action name {name!r}")
    _RESOURCE_ACTIONS.add(name)


def actions() -> tuple[str, ...]:
    """Every known action: the HTTP-level ones, then the resource-level ones."""
    return (*HTTP_ACTIONS, *sorted(_RESOURCE_ACTIONS))


@dataclasses.dataclass(frozen=True)
class RequestInfo:
    """What a fault rule can match on."""

    method: str
    path: str
    query: dict[str, Any]
    body_text: str


@dataclasses.dataclass
class FaultRule:
    """One fault-injection rule (see the module docstring for the actions).

    Attributes:
        action: One of ``actions()`` (``reset_before``/``reset_after`` are accepted as aliases).
        id: Unique id; assigned (``fault-N``) when empty.
        method: HTTP method regex (full match, case-insensitive); ``*`` matches any.
        path: Regex searched in the decoded path (no query string); empty matches any.
        query: Query parameter -> regex searched in its value; the parameter must be present.
        body: Regex searched in the raw request body text; None matches any body.
        when: ``before`` or ``after`` handling (``status``, ``reset``, ``delay``).
        times: How many times the rule fires; None = every match after ``skip``.
        skip: How many matches to let through before firing.
        http_status: HTTP status of a ``status`` fault.
        error_status: Canonical status name of a ``status`` fault; derived when empty.
        message: Error message (``status`` and ``lro_error``); a default when empty.
        retry_after: ``Retry-After`` header value in seconds (``status``), if any.
        seconds: Delay for ``delay`` (wall clock) and ``provisioning_delay`` (emulated).
        code: google.rpc.Code of an ``lro_error`` (8 = RESOURCE_EXHAUSTED, a stockout).
        cluster_state: State a failed operation leaves the cluster in; empty = the default.
        step: Training step at which ``slurm_freeze`` stops the trainer (``slurm.freeze``).
        rank: The one rank (``SLURM_PROCID``) ``slurm_freeze`` stops; None = the first to reach
            ``step``.
        matched: Matches counted so far (output).
        fired: Times fired so far (output).
    """

    action: str
    id: str = ""
    method: str = "*"
    path: str = ""
    query: dict[str, str] = dataclasses.field(default_factory=dict)
    body: str | None = None
    when: str = "before"
    times: int | None = 1
    skip: int = 0
    http_status: int = 503
    error_status: str = ""
    message: str = ""
    retry_after: float | None = None
    seconds: float = 0.0
    code: int = 8
    cluster_state: str = ""
    step: int = 0
    rank: int | None = None
    matched: int = 0
    fired: int = 0

    def __post_init__(self) -> None:
        if self.action in _ALIASES:
            self.action, self.when = _ALIASES[self.action]
        if self.action not in actions():
            raise ValueError(f"unknown fault action {self.action!r}; use one of {actions()}")
        if self.when not in ("before", "after"):
            raise ValueError(f"fault 'when' must be 'before' or 'after', not {self.when!r}")
        patterns = [self.path, self.body or "", *self.query.values()]
        for pattern in patterns + ([self.method] if self.method != "*" else []):
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                raise ValueError(f"invalid fault regex {pattern!r}: {exc}") from exc
        if self.times is not None and self.times < 0 or self.skip < 0:
            raise ValueError("fault 'times' and 'skip' must not be negative")
        if not 400 <= self.http_status <= 599:
            raise ValueError(f"fault http_status must be 4xx or 5xx, not {self.http_status}")
        if self.seconds < 0:
            raise ValueError("fault 'seconds' must not be negative")
        if self.step < 0:
            raise ValueError("fault 'step' must not be negative")
        if self.rank is not None and self.rank < 0:
            raise ValueError("fault 'rank' must not be negative")
        if not 1 <= self.code <= 16:
            raise ValueError(f"lro_error code must be a google.rpc.Code 1-16, not {self.code}")

    @property
    def exhausted(self) -> bool:
        """Whether the rule will never fire again."""
        return self.times is not None and self.fired >= self.times

    def matches(self, request: RequestInfo) -> bool:
        """Whether the request matches the rule's predicates (counters aside)."""
        if self.method != "*" and not re.fullmatch(self.method, request.method, re.IGNORECASE):
            return False
        if self.path and not re.search(self.path, request.path):
            return False
        for name, pattern in self.query.items():
            values = request.query.get(name)
            if values is None:
                return False
            values = values if isinstance(values, list) else [values]
            if not any(re.search(pattern, str(v)) for v in values):
                return False
        return self.body is None or re.search(self.body, request.body_text) is not None

    def count_match(self) -> bool:
        """Counts one match and returns whether the rule fires on it (counting the firing)."""
        self.matched += 1
        if self.matched <= self.skip or self.exhausted:
            return False
        self.fired += 1
        return True

    def to_dict(self) -> dict[str, Any]:
        """The rule as a JSON-ready dict (with its counters)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FaultRule:
        """Builds a rule from a dict, accepting ``status`` as an alias of ``http_status``.

        Raises:
            ValueError: Unknown fields or invalid values.
        """
        data = dict(data)
        if isinstance(data.get("status"), int) and "http_status" not in data:
            data["http_status"] = data.pop("status")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown fault rule fields {unknown}; known: {sorted(known)}")
        if "action" not in data:
            raise ValueError(f"a fault rule needs an 'action' (one of {actions()})")
        return cls(**data)
