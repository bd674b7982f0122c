"""A caller's deadline on the REST client: no request after it, none waits or retries past it."""

from __future__ import annotations

import socket
import time

import pytest

from vsp.components.runtime.core import errors, rest


def test_no_request_is_sent_once_the_deadline_has_passed(emulator):
    client = rest.VertexRestClient("us-central1", deadline_at=time.monotonic() - 1)
    with pytest.raises(errors.UnavailableError) as info:
        client.get("projects/test-project/locations/us-central1/modelDevelopmentClusters/c")
    assert client.requests_sent == 0
    assert info.value.status == "DEADLINE_EXCEEDED"


def test_a_silent_server_is_given_only_what_is_left(monkeypatch):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", f"127.0.0.1:{silent.getsockname()[1]}")
    client = rest.VertexRestClient("us-central1", timeout=60, deadline_at=time.monotonic() + 1.5)
    began = time.monotonic()
    try:
        with pytest.raises(errors.UnavailableError):
            client.get("projects/test-project/locations/us-central1/modelDevelopmentClusters/c")
    finally:
        silent.close()
    assert 1.4 <= time.monotonic() - began <= 2.5  # not the 60 s request timeout
