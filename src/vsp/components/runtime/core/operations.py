"""Waiting on Vertex long-running operations (google.longrunning.Operation).

One function, ``wait_for_operation``, looks at ``GET {version}/{operation name}`` through the
shared poller until ``done`` and returns the ``response`` or raises the classified ``error``.
Between looks it asks the service itself to wait (``OperationWait``: the operation's ``:wait``
method, answered when the operation is done or after the delay), so an operation that ends
between two looks is seen when it ends rather than at the next look, for no extra call.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from vsp.components.runtime.core import errors, polling, rest

log = logging.getLogger(__name__)

DEFAULT_BACKOFF = polling.Backoff(initial=2.0, maximum=30.0, multiplier=1.5)
# A ``:wait`` answered sooner than this share of its timeout, the operation not done, shows a
# service that does not hold (the method is best-effort): later waits are plain sleeps.
EARLY_ANSWER_SHARE = 0.5
# A held call asks for this much less than the client's request timeout (or its deadline)
# allows, so the answer arrives before the client stops listening; under this, just sleep.
ANSWER_MARGIN_SECONDS = 1.0
MIN_HELD_SECONDS = 0.1


@dataclasses.dataclass
class OperationWait:
    """The waits between the looks at one operation, held by the service (``:wait``).

    ``wait(seconds)`` sends ``POST {version}/{name}:wait`` with that timeout. Its answer is the
    operation as of when it was sent back, so the next look (``probe``) uses it instead of a
    GET: one call per look, as with sleeping, and a done operation is seen at once. The method
    is best-effort: a service may not support it (an error other than a transient one) or may
    answer at once without the operation being done; either way the rest of the delay is
    slept, and every later wait of this operation is a plain sleep, so such a service never
    costs two calls per look. A transient failure sleeps the rest of that delay only.

    Attributes:
        client: The REST client.
        path: ``{version}/{operation name}``.
        api_version: ``v1`` (the timeout is a query parameter) or ``v1beta1`` (in the body).
        clock: The waits' clock.
        held: Whether to ask the service to hold (it has not shown it does not); False from
            the start with a clock other than the real one, as the service holds for real
            seconds.
        answer: The operation as last answered, the next look's (then a GET).
    """

    client: rest.VertexRestClient
    path: str
    api_version: str
    clock: polling.Clock
    held: bool = True
    answer: dict[str, Any] | None = None

    def probe(self) -> dict[str, Any]:
        """The operation: the last wait's answer when there is one, else a GET."""
        answer, self.answer = self.answer, None
        return answer if answer is not None else self.client.get(self.path)

    def wait(self, seconds: float) -> None:
        """Up to ``seconds`` (less when the operation ends first, or when the client's own
        bounds, its request timeout and deadline, leave less room for one call)."""
        started = self.clock.now()
        asked = min(seconds, self._room()) if self.held else 0.0
        if asked >= MIN_HELD_SECONDS:
            answer = self._ask(asked)
            taken = self.clock.now() - started
            if answer is not None and (answer.get("done") or taken >= EARLY_ANSWER_SHARE * asked):
                self.answer = answer
                return
            if answer is not None:
                log.debug(
                    "%s:wait answered after %.2f s of %.2f s: not held", self.path, taken, seconds
                )
                self.held = False
        self.clock.sleep(seconds - (self.clock.now() - started))

    def _room(self) -> float:
        """Seconds one held call may last: the client's request timeout and what is left of its
        deadline, less a margin for the answer to travel back."""
        room = self.client.timeout
        if self.client.deadline_at is not None:
            room = min(room, self.client.deadline_at - time.monotonic())
        return room - ANSWER_MARGIN_SECONDS

    def _ask(self, seconds: float) -> dict[str, Any] | None:
        timeout = f"{seconds:.3f}s"
        try:
            if self.api_version == "v1":
                return self.client.post(f"{self.path}:wait", {}, {"timeout": timeout})
            return self.client.post(f"{self.path}:wait", {"timeout": timeout})
        except errors.DeadlinePassedError:
            raise
        except errors.TransientError as exc:
            log.debug("%s:wait failed (%s): sleeping instead", self.path, exc)
        except errors.VspError as exc:
            log.debug("%s:wait is not served (%s): sleeping between looks", self.path, exc)
            self.held = False
        return None


def describe_operation(operation: dict[str, Any]) -> str:
    """A one-line state of an operation for progress logs."""
    if operation.get("done"):
        return "failed" if operation.get("error") else "done"
    metadata = operation.get("metadata") or {}
    return str(metadata.get("progressMessage") or "running")


def wait_for_operation(
    client: rest.VertexRestClient,
    operation_name: str,
    *,
    api_version: str = "v1beta1",
    timeout: float | None = 7200.0,
    backoff: polling.Backoff = DEFAULT_BACKOFF,
    clock: polling.Clock | None = None,
    what: str = "",
    latest: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Polls an operation until it is done, the service holding each wait (``OperationWait``).

    Args:
        client: The REST client.
        operation_name: Full name, ``projects/P/locations/L/operations/ID``.
        api_version: API version prefix to poll under.
        timeout: Seconds before giving up (None: wait forever).
        backoff: Delay schedule between polls.
        clock: Time source (tests inject ``FakeClock``). The service's wait holds for real
            seconds, so it is asked only with the real clock; with another the waits are the
            clock's sleeps.
        what: Name of the work, for progress logs.
        latest: The operation as the call that started it answered: the first look, instead
            of a GET sent right after that call (None: look it up, as a retried step does).

    Returns:
        The operation's ``response`` (``{}`` for an Empty response).

    Raises:
        errors.OperationFailedError: The operation ended with an error (classified as transient
            or user error by its code).
        errors.TimeoutExceededError: The deadline passed.
    """
    looks = OperationWait(
        client,
        f"{api_version}/{operation_name}",
        api_version,
        clock or polling.RealClock(),
        held=clock is None or isinstance(clock, polling.RealClock),
        answer=latest if latest is not None and latest.get("name") == operation_name else None,
    )
    result = polling.poll_until(
        looks.probe,
        lambda op: bool(op.get("done")),
        what=what or f"operation {operation_name}",
        timeout=timeout,
        backoff=backoff,
        clock=clock,
        describe=describe_operation,
        wait=looks.wait,
    )
    operation = result.value
    if operation.get("error"):
        raise errors.operation_error(operation_name, operation["error"])
    return operation.get("response") or {}
