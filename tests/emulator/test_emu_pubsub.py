"""Pub/Sub publishing on the emulator: messages are checked, recorded in order, never sent."""

from __future__ import annotations

import base64

import requests

TOPIC = "projects/test-project/topics/runs"


def test_published_messages_are_recorded_with_their_topic_and_decoded_text(emulator):
    url = f"{emulator.base_url}/v1/{TOPIC}:publish"
    data = base64.b64encode(b'{"state": "FAILED"}').decode()
    answer = requests.post(url, json={"messages": [{"data": data, "attributes": {"a": "1"}}]})
    assert answer.status_code == 200 and answer.json() == {"messageIds": ["1"]}
    [message] = emulator.published()
    assert (message["topic"], message["text"], message["attributes"]) == (
        TOPIC,
        '{"state": "FAILED"}',
        {"a": "1"},
    )


def test_a_malformed_publish_is_refused_and_records_nothing(emulator):
    url = f"{emulator.base_url}/v1/{TOPIC}:publish"
    bad = {"messages": [{"data": "not base64!", "attributes": {"n": 1}}, {}]}
    answer = requests.post(url, json=bad)
    assert answer.status_code == 400
    fields = [v["field"] for d in answer.json()["error"]["details"] for v in d["fieldViolations"]]
    assert fields == ["messages[0].data", "messages[0].attributes", "messages[1]"]
    assert requests.post(url, json={"messages": []}).status_code == 400
    assert emulator.published() == []
