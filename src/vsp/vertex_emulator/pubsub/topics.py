"""Pub/Sub publishing as the emulator records it: ``POST /v1/projects/{p}/topics/{t}:publish``.

The emulator stands in for ``pubsub.googleapis.com`` too (a client pointed at it by
``VERTEX_EMULATOR_HOST`` sends its publishes here): every message is kept, in order, with its
topic and publish time (``published(app)`` gives them all), and kept for each subscription of
the topic whose filter it matches (``subscriptions``), for its pulls. The body is a
``PublishRequest``: ``messages``, each with ``data`` (base64) and/or
``attributes`` (string to string), at least one of them; the answer is ``{"messageIds": [...]}``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from vsp.vertex_emulator import clock, errors, router
from vsp.vertex_emulator.pubsub import subscriptions

MESSAGES = "pubsub_messages"
_TOPIC = r"projects/(?P<project>[^/]+)/topics/(?P<topic>[^/:]+)"


def register(app: Any) -> None:
    """Adds the publish route."""
    app.router.add_api("POST", _TOPIC + ":publish", publish, versions=("v1",), name="publish")


def _check(messages: Any) -> list[errors.FieldViolation]:
    if not isinstance(messages, list) or not messages:
        return [errors.FieldViolation("messages", "messages must be a non-empty list.")]
    found = []
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict) or not (message.get("data") or message.get("attributes")):
            found.append(errors.FieldViolation(where, "a message needs data or attributes."))
            continue
        try:
            base64.b64decode(message.get("data") or "", validate=True)
        except (binascii.Error, ValueError):
            found.append(errors.FieldViolation(f"{where}.data", "data must be base64."))
        attributes = message.get("attributes") or {}
        if not isinstance(attributes, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in attributes.items()
        ):
            found.append(errors.FieldViolation(f"{where}.attributes", "string to string only."))
    return found


def publish(request: router.Request) -> router.Response:
    """Records the messages; answers their ids."""
    body = request.json_object()
    violations = _check(body.get("messages"))
    if violations:
        raise errors.invalid_fields("Invalid PublishRequest", violations)
    topic = f"projects/{request.params['project']}/topics/{request.params['topic']}"
    store = request.app.store
    ids = []
    for message in body["messages"]:
        number = len(store.keys(MESSAGES)) + 1
        record = {
            "topic": topic,
            "messageId": str(number),
            "publishTime": clock.rfc3339(request.app.now()),
            "data": message.get("data") or "",
            "attributes": dict(message.get("attributes") or {}),
        }
        store.put(MESSAGES, f"{number:012d}", record)
        delivered = {k: record[k] for k in ("data", "attributes", "messageId", "publishTime")}
        subscriptions.deliver(request.app, topic, delivered)
        ids.append(record["messageId"])
    return router.Response({"messageIds": ids})


def published(app: Any) -> list[dict[str, Any]]:
    """Every message recorded, oldest first, its ``data`` decoded (``text``)."""
    found = [app.store.get(MESSAGES, key) for key in sorted(app.store.keys(MESSAGES))]
    return [{**m, "text": base64.b64decode(m["data"]).decode("utf-8")} for m in found if m]
