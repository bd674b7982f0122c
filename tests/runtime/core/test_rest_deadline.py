"""An outage longer than one request's retry deadline stays in the error taxonomy.

google-api-core raises its own ``RetryError`` when a retry deadline passes. The client maps it
to ``UnavailableError`` (a ``TransientError``: exit code 75 in a step, not 70 with a
traceback), and the polling primitive, which retries transient errors until its own deadline,
keeps polling through an outage longer than one request's deadline.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from vsp.components.runtime.core import errors, polling, rest

FAST = rest.RetryPolicy(initial=0.01, maximum=0.05, deadline=0.3)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_endpoint_ends_as_unavailable_not_retry_error(monkeypatch):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", f"127.0.0.1:{_closed_port()}")
    client = rest.VertexRestClient("us-central1", retry=FAST, timeout=1.0)
    with pytest.raises(errors.UnavailableError) as caught:
        client.get("v1/projects/test-project/locations/us-central1/customJobs/1")
    assert isinstance(caught.value, errors.TransientError)
    assert str(caught.value).count("still failing after 0.3 s of retries") == 1
    assert str(caught.value).endswith("is reachable from here, then retry")
    assert caught.value.method == "GET" and caught.value.url.endswith("/customJobs/1")


def test_the_step_exits_75_on_it_without_a_traceback():
    # In a process of its own, as a step runs (its logging setup is the step's).
    program = (
        "from vsp.components.runtime.core import rest, step\n"
        "policy = rest.RetryPolicy(initial=0.01, maximum=0.05, deadline=0.3)\n"
        "client = rest.VertexRestClient('us-central1', retry=policy, timeout=1.0)\n"
        "step.run_step('probe', lambda: client.get("
        "'v1/projects/test-project/locations/us-central1/customJobs/1'))\n"
    )
    env = {**os.environ, "VERTEX_EMULATOR_HOST": f"127.0.0.1:{_closed_port()}"}
    done = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == errors.EXIT_TRANSIENT_ERROR == 75
    (failed,) = [line for line in done.stderr.splitlines() if "probe failed" in line]
    assert "customJobs/1 -> 0 UNAVAILABLE: still failing after 0.3 s of retries (last: " in failed
    assert failed.endswith("is reachable from here, then retry")
    assert "Traceback" not in done.stderr


def test_a_poll_outlives_one_request_deadline(emulator):
    path = "v1/projects/test-project/locations/us-central1/customJobs/404"
    # 503 for about a second: far longer than the 0.3 s deadline of one request.
    emulator.add_fault(
        action="status", method="GET", path="customJobs/404$", http_status=503, times=40
    )
    client = rest.VertexRestClient("us-central1", retry=FAST)

    def probe():
        try:
            return client.get(path)
        except errors.NotFoundError:
            return "gone"

    result = polling.poll_until(
        probe,
        lambda value: value == "gone",
        what="job 404",
        timeout=60.0,
        backoff=polling.Backoff(initial=0.05, maximum=0.1, jitter=0),
    )
    assert result.value == "gone"
    fired = emulator.faults()[0]
    assert fired.fired == 40


def test_a_connection_broken_mid_answer_is_unavailable():
    import requests

    class Broken(requests.Session):
        def request(self, *args, **kwargs):
            raise requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead")

    client = rest.VertexRestClient("us-central1", session=Broken(), retry=FAST)
    with pytest.raises(errors.UnavailableError, match="ChunkedEncodingError"):
        client.post("v1/projects/test-project/locations/us-central1/customJobs", {})
