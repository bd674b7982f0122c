"""Long-running operations (``google.longrunning.Operation``) shared by every resource.

A resource starts an operation with a ``kind`` and a due time; when the due time has passed, the
manager calls the completer registered for that kind, which applies the resource's state change
(as of the due time) and returns the operation's ``response`` or ``error``. Completion is driven
by stored timestamps from the app's tick (before every API request and in the background), so a
restarted emulator finishes overdue operations at once, stamped with their due times.

Stored in the ``operations`` collection as ``{"operation": <public JSON>, "kind", "target",
"due", "payload", "done_at"}``; the pending ones with a due time are also indexed in
``operations_due`` (``{name: {"due"}}``), so the tick reads only those, not every operation.

A finished operation is kept for ``operation_retention_seconds`` after it finished (scaled by
``time_scale``): from then on a GET answers 404 NOT_FOUND, as a service that prunes finished
operations does (clients fall back to reading the resource), and a sweep deletes it (at most
once per ``PRUNE_EVERY_SECONDS`` of emulated time, so requests do not each scan every
operation). Google does not document Vertex AI's retention; the default (7 days) is an
assumption. ``GET P/operations`` lists a location's operations by name, a page at a time.

``POST {name}:wait`` answers once the operation is done, or after its ``timeout`` (a Duration
such as ``"2.5s"``: in the body under v1beta1, a query parameter under v1, as the two versions'
references give it), whichever comes first, and at most after ``operation_wait_cap_seconds``
(the service's own HTTP/RPC timeout, which Google does not document). A completion wakes the
waiting calls at once (the background tick settles due operations every
``tick_interval_seconds``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from vsp.vertex_emulator import clock, errors, paging, router

COLLECTION = "operations"
DUE_COLLECTION = "operations_due"
PRUNE_EVERY_SECONDS = 60.0
TYPE_URL_PREFIX = "type.googleapis.com/google.cloud.aiplatform.v1beta1."
# Messages are stored under the v1beta1 package; a /v1/ request sees them under v1, as the
# service answers in the version asked for (Google's v1 client cannot read a v1beta1 type).
_VERSIONED_PREFIX = "type.googleapis.com/google.cloud.aiplatform."
EMPTY_TYPE = "type.googleapis.com/google.protobuf.Empty"

# (record, completion time) -> (response, error); exactly one of them should be non-None.
Completer = Callable[[dict[str, Any], float], tuple[Any, Any]]

_NAME_PATTERN = (
    r"(?P<name>projects/[^/]+/locations/[^/]+/(?:[^:]+/)?operations/(?P<operation>[^/:]+))"
)
_LIST_PATTERN = r"(?P<parent>projects/[^/]+/locations/[^/]+)/operations"


def type_url(message: str) -> str:
    """``type.googleapis.com/google.cloud.aiplatform.v1beta1.{message}``."""
    return TYPE_URL_PREFIX + message


def in_version(body: Any, api_version: str) -> Any:
    """``body`` with every aiplatform ``@type`` in ``api_version`` (``v1`` or ``v1beta1``).

    Args:
        body: An answer's JSON, as stored (v1beta1 type URLs).
        api_version: The version of the request's path.

    Returns:
        ``body`` itself for v1beta1; otherwise a copy with the type URLs rewritten.
    """
    if api_version == "v1beta1":
        return body
    if isinstance(body, list):
        return [in_version(item, api_version) for item in body]
    if not isinstance(body, dict):
        return body
    copied = {key: in_version(value, api_version) for key, value in body.items()}
    kind = copied.get("@type")
    if isinstance(kind, str) and kind.startswith(TYPE_URL_PREFIX):
        copied["@type"] = f"{_VERSIONED_PREFIX}{api_version}.{kind[len(TYPE_URL_PREFIX) :]}"
    return copied


def empty_response() -> dict[str, str]:
    """The ``response`` of an operation returning ``google.protobuf.Empty``."""
    return {"@type": EMPTY_TYPE}


class OperationManager:
    """Creates, completes and serves long-running operations."""

    def __init__(self, app: Any):
        """Binds the manager to an app (its store and clock).

        Args:
            app: The ``EmulatorApp``.
        """
        self._app = app
        self._completers: dict[str, Completer] = {}
        self._pruned_at: float | None = None

    def install(self) -> None:
        """Registers the operation GET and list routes and the settling tick on the app."""
        self._app.router.add_api("GET", _NAME_PATTERN, self._get_handler, name="operations.get")
        self._app.router.add_api("GET", _LIST_PATTERN, self._list_handler, name="operations.list")
        self._app.router.add_api(
            "POST", f"{_NAME_PATTERN}:wait", self._wait_handler, name="operations.wait"
        )
        self._app.add_tick(self.settle, name="operations.settle")
        self._app.add_tick(self.prune, name="operations.prune")
        self._index_pending()

    def register_kind(self, kind: str, completer: Completer) -> None:
        """Registers how operations of a kind complete (e.g. ``cluster.create``)."""
        self._completers[kind] = completer

    def create(
        self,
        *,
        parent: str,
        kind: str,
        metadata: dict[str, Any],
        due: float | None,
        target: str = "",
        payload: dict[str, Any] | None = None,
        now: float | None = None,
    ) -> dict[str, Any]:
        """Starts an operation.

        Args:
            parent: ``projects/{p}/locations/{l}`` (or a resource name) the operation lives under.
            kind: Completer kind.
            metadata: Operation metadata with its ``@type``; ``genericMetadata`` is added.
            due: Epoch seconds when it completes; None = only through ``finish``.
            target: Name of the resource it acts on (for the completer).
            payload: Extra data for the completer (e.g. an injected failure).
            now: Creation time; the app's clock when None.

        Returns:
            The public operation JSON.
        """
        now = self._app.now() if now is None else now
        with self._app.store.transaction() as store:
            while True:
                name = f"{parent}/operations/{secrets.randbelow(9 * 10**18) + 10**18}"
                if not store.contains(COLLECTION, name):
                    break
            stamp = clock.rfc3339(now)
            public = {
                "name": name,
                "metadata": {
                    **metadata,
                    "genericMetadata": {"createTime": stamp, "updateTime": stamp},
                },
                "done": False,
            }
            record = {
                "operation": public,
                "kind": kind,
                "target": target,
                "due": due,
                "payload": payload or {},
            }
            store.put(COLLECTION, name, record)
            if due is not None:
                store.put(DUE_COLLECTION, name, {"due": due})
        return public

    def get(self, name: str) -> dict[str, Any] | None:
        """The public JSON of an operation, or None (also once past its retention)."""
        record = self._app.store.get(COLLECTION, name)
        if record is None or self._expired(record, self._app.now()):
            return None
        return record["operation"]

    def record(self, name: str) -> dict[str, Any] | None:
        """The stored record of an operation (public JSON plus kind, target, due, payload)."""
        return self._app.store.get(COLLECTION, name)

    def finish(
        self, name: str, *, at: float, response: Any = None, error: dict[str, Any] | None = None
    ) -> dict[str, Any] | None:
        """Marks a pending operation done now, with a response or an error.

        Returns:
            The public operation JSON, or None if there is no such pending operation.
        """
        with self._app.store.transaction() as store:
            record = store.get(COLLECTION, name)
            if record is None or record["operation"]["done"]:
                return None
            _mark_done(record, at, response, error)
            store.put(COLLECTION, name, record)
            store.delete(DUE_COLLECTION, name)
        self._app.notify_changed()
        return record["operation"]

    def settle(self, app: Any, now: float) -> None:
        """Completes every pending operation whose due time has passed, oldest due first."""
        with app.store.transaction() as store:
            ripe = store.select(DUE_COLLECTION, lambda entry: entry["due"] <= now)
            due = []
            for name, _ in ripe:
                record = store.get(COLLECTION, name)
                if record is None or record["operation"]["done"]:
                    store.delete(DUE_COLLECTION, name)
                else:
                    due.append((name, record))
            for _, record in sorted(due, key=lambda item: item[1]["due"]):
                completer = self._completers.get(record["kind"])
                at = record["due"]
                if completer is None:
                    error = errors.rpc_status("INTERNAL", f"no completer for {record['kind']}")
                    response = None
                else:
                    response, error = completer(record, at)
                current = store.get(COLLECTION, record["operation"]["name"])
                if current is None or current["operation"]["done"]:
                    continue
                _mark_done(current, at, response, error)
                store.put(COLLECTION, current["operation"]["name"], current)
                store.delete(DUE_COLLECTION, current["operation"]["name"])
        if due:
            app.notify_changed()  # wakes the ``:wait`` calls

    def prune(self, app: Any, now: float) -> None:
        """Deletes the operations past their retention (a sweep per ``PRUNE_EVERY_SECONDS``)."""
        every = app.settings.scaled(PRUNE_EVERY_SECONDS)
        if self._pruned_at is not None and self._pruned_at <= now < self._pruned_at + every:
            return
        self._pruned_at = now
        with app.store.transaction() as store:
            expired = store.select(COLLECTION, lambda r: self._expired(r, now))
            for name, _ in expired:
                store.delete(COLLECTION, name)

    def _expired(self, record: dict[str, Any], now: float) -> bool:
        settings = self._app.settings
        horizon = now - settings.scaled(settings.operation_retention_seconds)
        return bool(record["operation"]["done"]) and _done_at(record) <= horizon

    def _index_pending(self) -> None:
        """Rebuilds the due-time index from the operations (state of any earlier version)."""
        with self._app.store.transaction() as store:
            for name in store.keys(DUE_COLLECTION):
                store.delete(DUE_COLLECTION, name)
            pending = store.select(
                COLLECTION, lambda r: not r["operation"]["done"] and r["due"] is not None
            )
            for name, record in pending:
                store.put(DUE_COLLECTION, name, {"due": record["due"]})

    def _list_handler(self, request: router.Request) -> router.Response:
        if request.query_value("filter"):
            raise errors.invalid_argument(
                "The emulator's operations.list takes no filter; list without one and filter "
                "on the client.",
                [errors.FieldViolation("filter", "Not supported by the emulator.")],
            )
        prefix = f"{request.params['parent']}/operations/"
        store, now = self._app.store, self._app.now()
        live = store.select(COLLECTION, lambda r: not self._expired(r, now))
        names = sorted(name for name, _ in live if name.startswith(prefix))
        chosen, body = paging.page(request, names, str, prefix)
        if chosen:
            body["operations"] = [store.get(COLLECTION, name)["operation"] for name in chosen]
        return router.Response(body)

    def _get_handler(self, request: router.Request) -> router.Response:
        operation = self.get(request.params["name"])
        if operation is None:
            raise errors.not_found(f'Operation "{request.params["name"]}" not found.')
        return router.Response(operation)

    def _wait_handler(self, request: router.Request) -> router.Response:
        """The operation now when done, else held until it is or its timeout has passed."""
        timeout = _wait_timeout(request, self._app.settings.operation_wait_cap_seconds)
        operation = self.get(request.params["name"])
        if operation is None:
            raise errors.not_found(f'Operation "{request.params["name"]}" not found.')
        held = 0.0 if operation["done"] else timeout
        return router.Response(operation, hold_seconds=held)


def _wait_timeout(request: router.Request, cap: float) -> float:
    """Seconds an ``operations.wait`` may hold: its ``timeout``, at most ``cap``.

    v1beta1 takes ``{"timeout": "2.5s"}`` as the body; v1 takes ``timeout`` as a query
    parameter with an empty body. A timeout in the other place is refused, not ignored. Without
    one the call holds for ``cap``.
    """
    body = request.json_object()
    if request.params.get("api_version") == "v1":
        if body:
            raise errors.invalid_fields(
                "Invalid JSON payload received (the request body must be empty under v1)",
                [
                    errors.FieldViolation(
                        key, "Unknown name; under v1 pass it as a query parameter."
                    )
                    for key in sorted(body)
                ],
            )
        text = request.query_value("timeout")
    else:
        misplaced = sorted(set(request.query) & {"timeout"})
        unknown = sorted(set(body) - {"timeout"})
        if misplaced or unknown:
            raise errors.invalid_fields(
                "Invalid request",
                [
                    errors.FieldViolation(key, "Under v1beta1 pass it in the body.")
                    for key in misplaced
                ]
                + [errors.FieldViolation(key, "Unknown name.") for key in unknown],
            )
        text = body.get("timeout")
    if text in (None, ""):
        return cap
    seconds = clock.duration_seconds(text)
    if seconds is None:
        raise errors.invalid_fields(
            "Invalid value at 'timeout' (type.googleapis.com/google.protobuf.Duration)",
            [
                errors.FieldViolation(
                    "timeout",
                    f"{text} is not a duration: give a non-negative number of seconds followed "
                    'by "s", for example "2.5s".',
                )
            ],
        )
    return min(cap, seconds)


def _done_at(record: dict[str, Any]) -> float:
    """When an operation finished (records stored before ``done_at`` use their updateTime)."""
    if record.get("done_at") is not None:
        return float(record["done_at"])
    generic = record["operation"].get("metadata", {}).get("genericMetadata", {})
    try:
        return clock.parse_rfc3339(generic.get("updateTime", ""))
    except ValueError:
        return float(record.get("due") or 0.0)


def _mark_done(record: dict[str, Any], at: float, response: Any, error: Any) -> None:
    record["done_at"] = at
    public = record["operation"]
    public["done"] = True
    public["metadata"].setdefault("genericMetadata", {})["updateTime"] = clock.rfc3339(at)
    public.pop("response", None)
    public.pop("error", None)
    if error is not None:
        public["error"] = error
    else:
        public["response"] = response if response is not None else empty_response()
