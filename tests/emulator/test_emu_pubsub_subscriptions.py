"""Pub/Sub pull subscriptions on the emulator: filters, held pulls, acks, redelivery, deletes."""

from __future__ import annotations

import threading
import time

import pytest
import requests

TOPIC = "projects/test-project/topics/progress"
SUB = "projects/test-project/subscriptions/vsp-progress-a1"


def _url(emulator, name: str, verb: str = "") -> str:
    return f"{emulator.base_url}/v1/{name}{verb}"


def _create(emulator, **fields) -> requests.Response:
    body = {"topic": TOPIC, "filter": 'attributes.vsp_run = "a1"', **fields}
    return requests.put(_url(emulator, SUB), json=body)


def _publish(emulator, **attributes: str) -> None:
    answer = requests.post(
        _url(emulator, TOPIC, ":publish"), json={"messages": [{"attributes": attributes}]}
    )
    assert answer.status_code == 200


def _pull(emulator, **fields) -> dict:
    answer = requests.post(_url(emulator, SUB, ":pull"), json={"maxMessages": 10, **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_subscription_gets_the_matching_messages_published_after_it_was_made(emulator):
    _publish(emulator, vsp_run="a1", state="early")  # before the subscription: not kept
    created = _create(emulator, ackDeadlineSeconds=10, expirationPolicy={"ttl": "86400s"})
    assert created.status_code == 200
    assert created.json()["filter"] == 'attributes.vsp_run = "a1"'
    assert _create(emulator).status_code == 409
    _publish(emulator, vsp_run="a1", state="started")
    _publish(emulator, vsp_run="b2", state="started")  # another run's: filtered out
    _publish(emulator, vsp_run="a1", state="notice")
    got = _pull(emulator, returnImmediately=True)["receivedMessages"]
    assert [m["message"]["attributes"]["state"] for m in got] == ["started", "notice"]
    assert all(m["ackId"] and m["message"]["messageId"] for m in got)


def test_an_empty_pull_waits_for_a_message_and_answers_it_at_once(emulator_factory):
    emulator = emulator_factory(pubsub_pull_hold_seconds=20.0)
    assert _create(emulator).status_code == 200
    timer = threading.Timer(0.5, lambda: _publish(emulator, vsp_run="a1", state="exiting"))
    timer.start()
    started = time.monotonic()
    got = _pull(emulator)["receivedMessages"]
    waited = time.monotonic() - started
    timer.join()
    assert [m["message"]["attributes"]["state"] for m in got] == ["exiting"]
    assert 0.4 < waited < 5.0  # answered when the message came, long before the 20 s hold


def test_an_empty_pull_answers_empty_after_the_hold(emulator_factory):
    emulator = emulator_factory(pubsub_pull_hold_seconds=0.6)
    assert _create(emulator).status_code == 200
    started = time.monotonic()
    assert _pull(emulator) == {}
    assert 0.55 < time.monotonic() - started < 3.0
    started = time.monotonic()
    assert _pull(emulator, returnImmediately=True) == {}
    assert time.monotonic() - started < 0.5


def test_an_unacknowledged_message_comes_back_after_its_ack_deadline(emulator):
    assert _create(emulator).status_code == 200
    _publish(emulator, vsp_run="a1", state="started")
    [first] = _pull(emulator, returnImmediately=True)["receivedMessages"]
    assert _pull(emulator, returnImmediately=True) == {}  # out on its ack deadline
    emulator.app.clock = lambda: time.time() + 11  # past the 10 s deadline
    [again] = _pull(emulator, returnImmediately=True)["receivedMessages"]
    assert again["message"] == first["message"] and again["ackId"] != first["ackId"]
    stale = requests.post(_url(emulator, SUB, ":acknowledge"), json={"ackIds": [first["ackId"]]})
    assert stale.status_code == 200
    emulator.app.clock = lambda: time.time() + 22
    [third] = _pull(emulator, returnImmediately=True)["receivedMessages"]  # stale ack ignored
    answer = requests.post(_url(emulator, SUB, ":acknowledge"), json={"ackIds": [third["ackId"]]})
    assert answer.status_code == 200
    emulator.app.clock = lambda: time.time() + 60
    assert _pull(emulator, returnImmediately=True) == {}


def test_deleting_a_subscription_drops_what_it_held_and_a_second_delete_is_404(emulator):
    assert _create(emulator).status_code == 200
    _publish(emulator, vsp_run="a1", state="started")
    assert requests.delete(_url(emulator, SUB)).status_code == 200
    assert requests.get(_url(emulator, SUB)).status_code == 404
    assert requests.delete(_url(emulator, SUB)).status_code == 404
    assert _create(emulator).status_code == 200
    assert _pull(emulator, returnImmediately=True) == {}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"topic": "runs"}, "topic"),
        ({"ackDeadlineSeconds": 5}, "ackDeadlineSeconds"),
        ({"expirationPolicy": {"ttl": "3600s"}}, "expirationPolicy.ttl"),
    ],
)
def test_a_bad_subscription_is_refused_naming_the_field(emulator, fields, field):
    answer = _create(emulator, **fields)
    assert answer.status_code == 400
    named = [v["field"] for d in answer.json()["error"]["details"] for v in d["fieldViolations"]]
    assert named == [field]
    assert requests.get(_url(emulator, SUB)).status_code == 404


def test_a_filter_the_emulator_cannot_evaluate_is_refused(emulator):
    answer = _create(emulator, filter='hasPrefix(attributes.vsp_run, "a")')
    assert answer.status_code == 400 and "AND only" in answer.json()["error"]["message"]
