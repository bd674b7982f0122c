"""A caller's deadline on the REST client: no request after it, none waits or retries past it."""

from __future__ import annotations

import socket
import time

import pytest

from vsp.components.runtime.core import errors, polling, rest


def test_no_request_is_sent_once_the_deadline_has_passed(emulator):
    client = rest.VertexRestClient("us-central1", deadline_at=time.monotonic() - 1)
    with pytest.raises(errors.DeadlinePassedError) as info:  # an UnavailableError too
        client.get("projects/test-project/locations/us-central1/modelDevelopmentClusters/c")
    assert client.requests_sent == 0
    assert info.value.status == "DEADLINE_EXCEEDED"
    assert isinstance(info.value, errors.UnavailableError)


def test_a_wait_ends_when_its_clients_deadline_passes(emulator):
    client = rest.VertexRestClient("us-central1", deadline_at=time.monotonic() + 0.3)
    path = "projects/test-project/locations/us-central1/modelDevelopmentClusters/c"
    clock = polling.FakeClock()
    probes = []

    def probe():
        probes.append(clock.now())
        time.sleep(0.1)  # real time passes: the client's deadline is real time
        try:
            return client.get(path)
        except errors.NotFoundError:
            return None

    with pytest.raises(errors.DeadlinePassedError):
        polling.poll_until(
            probe, lambda c: c is not None, what="cluster c", timeout=3600.0,
            backoff=polling.Backoff(initial=1.0, maximum=1.0, jitter=0), clock=clock,
        )  # fmt: skip
    # It stops at the first probe after the deadline, not at the 3600 s timeout.
    assert 2 <= len(probes) <= 5


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
