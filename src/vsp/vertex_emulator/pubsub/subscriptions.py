"""Pub/Sub pull subscriptions as the emulator serves them (``pubsub.googleapis.com`` v1 paths).

``PUT /v1/projects/{p}/subscriptions/{s}`` creates one on a topic (``topic``, optional
``filter``, ``ackDeadlineSeconds`` 10 to 600, default 10; ``expirationPolicy.ttl`` at least one
day when given); GET reads it, DELETE removes it and its undelivered messages (404 when absent,
as the real service answers). A message published to the topic after the subscription was
created (``topics.publish``) is kept for it when it matches its filter. Topics are not resources
here: a subscription may name any topic, and publishing to it needs no create.

``:pull`` answers up to ``maxMessages`` messages that are not out on an ack deadline, each with
an ``ackId``; a delivered message comes back after ``ackDeadlineSeconds`` unless acknowledged
(``:acknowledge`` with ``ackIds``). A pull that finds none waits for one up to the emulator's
``pubsub_pull_hold_seconds`` (real Pub/Sub waits "for a bounded amount of time", not
documented), then answers ``{}``; ``returnImmediately`` answers at once.

Filters: the emulator understands ``attributes.KEY = "VALUE"`` terms joined by ``AND``, the form
the training step uses; any other filter is refused (400), so a test never relies on one it
does not evaluate.
"""

from __future__ import annotations

import re
from typing import Any

from vsp.vertex_emulator import clock, errors, router

SUBSCRIPTIONS = "pubsub_subscriptions"
DELIVERIES = "pubsub_deliveries"
_SUBSCRIPTION = r"projects/(?P<project>[^/]+)/subscriptions/(?P<subscription>[^/:]+)"
_TOPIC_NAME = re.compile(r"projects/[^/]+/topics/[A-Za-z][A-Za-z0-9._~+%-]{2,254}")
_ID = re.compile(r"[A-Za-z][A-Za-z0-9._~+%-]{2,254}")
_TERM = re.compile(r'\s*attributes\.([A-Za-z0-9_-]+)\s*=\s*"([^"\\]*)"\s*')
_DAY_SECONDS = 86400


def register(app: Any) -> None:
    """Adds the subscription routes."""
    add = app.router.add_api
    add("PUT", _SUBSCRIPTION, create, versions=("v1",), name="create_subscription")
    add("GET", _SUBSCRIPTION, get, versions=("v1",), name="get_subscription")
    add("DELETE", _SUBSCRIPTION, delete, versions=("v1",), name="delete_subscription")
    add("POST", _SUBSCRIPTION + ":pull", pull, versions=("v1",), name="pull")
    add("POST", _SUBSCRIPTION + ":acknowledge", acknowledge, versions=("v1",), name="acknowledge")


def parse_filter(text: str) -> list[tuple[str, str]]:
    """The (attribute, value) pairs of a filter ('' = every message).

    Raises:
        errors.ApiException: A filter the emulator does not evaluate (400).
    """
    if not text.strip():
        return []
    terms = []
    for part in re.split(r"\bAND\b", text):
        found = _TERM.fullmatch(part)
        if found is None:
            raise errors.invalid_argument(
                f'Invalid filter {text!r}: the emulator evaluates attributes.KEY = "VALUE" '
                "terms joined by AND only."
            )
        terms.append((found.group(1), found.group(2)))
    return terms


def matches(subscription: dict[str, Any], attributes: dict[str, str]) -> bool:
    """Whether a message with ``attributes`` passes the subscription's filter."""
    return all(attributes.get(k) == v for k, v in parse_filter(subscription.get("filter") or ""))


def _name(request: router.Request) -> str:
    return f"projects/{request.params['project']}/subscriptions/{request.params['subscription']}"


def _seconds(text: Any, field: str) -> float:
    seconds = clock.duration_seconds(text)
    if seconds is None:
        raise errors.invalid_fields(
            "Invalid subscription", [errors.FieldViolation(field, "a duration such as '86400s'")]
        )
    return seconds


def create(request: router.Request) -> router.Response:
    """Creates a subscription (409 when it exists)."""
    name = _name(request)
    body = request.json_object()
    violations = []
    if not _ID.fullmatch(request.params["subscription"]):
        violations.append(errors.FieldViolation("name", "3-255 characters, starting a letter"))
    topic = body.get("topic")
    if not isinstance(topic, str) or not _TOPIC_NAME.fullmatch(topic):
        violations.append(errors.FieldViolation("topic", "projects/PROJECT/topics/TOPIC"))
    deadline = body.get("ackDeadlineSeconds", 10)
    if not isinstance(deadline, int) or not 10 <= deadline <= 600:
        violations.append(errors.FieldViolation("ackDeadlineSeconds", "10 to 600 seconds"))
    if violations:
        raise errors.invalid_fields("Invalid subscription", violations)
    ttl = (body.get("expirationPolicy") or {}).get("ttl")
    if ttl is not None and _seconds(ttl, "expirationPolicy.ttl") < _DAY_SECONDS:
        raise errors.invalid_fields(
            "Invalid subscription",
            [errors.FieldViolation("expirationPolicy.ttl", "at least one day ('86400s')")],
        )
    parse_filter(body.get("filter") or "")
    store = request.app.store
    if store.contains(SUBSCRIPTIONS, name):
        raise errors.already_exists("Resource already exists in the project (resource=" + name)
    record = {
        "name": name,
        "topic": topic,
        "filter": body.get("filter") or "",
        "ackDeadlineSeconds": deadline,
        **({"expirationPolicy": {"ttl": ttl}} if ttl is not None else {}),
        "state": "ACTIVE",
    }
    store.put(SUBSCRIPTIONS, name, record)
    return router.Response(record)


def _found(request: router.Request) -> dict[str, Any]:
    name = _name(request)
    record = request.app.store.get(SUBSCRIPTIONS, name)
    if record is None:
        raise errors.not_found(f"Resource not found (resource={request.params['subscription']}).")
    return record


def get(request: router.Request) -> router.Response:
    """The subscription."""
    return router.Response(_found(request))


def delete(request: router.Request) -> router.Response:
    """Deletes the subscription and what it still held."""
    record = _found(request)
    store = request.app.store
    store.delete(SUBSCRIPTIONS, record["name"])
    for key in store.keys(DELIVERIES, record["name"] + "|"):
        store.delete(DELIVERIES, key)
    return router.Response({})


def deliver(app: Any, topic: str, message: dict[str, Any]) -> None:
    """Keeps a just-published message for every subscription of ``topic`` it matches."""
    store = app.store
    held = False
    for name, subscription in store.items(SUBSCRIPTIONS):
        if subscription["topic"] != topic or not matches(subscription, message["attributes"]):
            continue
        key = f"{name}|{int(message['messageId']):012d}"
        store.put(DELIVERIES, key, {"message": message, "visibleAt": 0.0, "attempts": 0})
        held = True
    if held:
        app.notify_changed()


def pull(request: router.Request) -> router.Response:
    """Up to ``maxMessages`` messages, or ``{}`` after the hold (see the module docstring)."""
    record = _found(request)
    body = request.json_object()
    most = body.get("maxMessages")
    if not isinstance(most, int) or most < 1:
        raise errors.invalid_fields(
            "Invalid PullRequest", [errors.FieldViolation("maxMessages", "a positive integer")]
        )
    app = request.app
    now = app.now()
    answer = []
    for key in app.store.keys(DELIVERIES, record["name"] + "|"):
        if len(answer) >= most:
            break
        delivery = app.store.get(DELIVERIES, key)
        if delivery["visibleAt"] > now:
            continue
        delivery["visibleAt"] = now + record["ackDeadlineSeconds"]
        delivery["attempts"] += 1
        app.store.put(DELIVERIES, key, delivery)
        answer.append({"ackId": f"{key}#{delivery['attempts']}", "message": delivery["message"]})
    if answer:
        return router.Response({"receivedMessages": answer})
    if body.get("returnImmediately"):
        return router.Response({})
    return router.Response({}, hold_seconds=app.settings.pubsub_pull_hold_seconds)


def acknowledge(request: router.Request) -> router.Response:
    """Removes the acknowledged messages (an ack of an older delivery, a stale ``ackId``, is
    ignored, as after a redelivery)."""
    name = _name(request)
    _found(request)
    ids = request.json_object().get("ackIds")
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise errors.invalid_fields(
            "Invalid AcknowledgeRequest", [errors.FieldViolation("ackIds", "a non-empty list")]
        )
    store = request.app.store
    for ack in ids:
        key, _, attempt = ack.partition("#")
        delivery = store.get(DELIVERIES, key) if key.startswith(name + "|") else None
        if delivery is not None and str(delivery["attempts"]) == attempt:
            store.delete(DELIVERIES, key)
    return router.Response({})
