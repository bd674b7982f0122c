"""The exit task's deadline is hard: with the API down, silent or failing every call, the
``finalize_cluster`` step with a 5 s deadline ends within 5 s plus the last resort's bound
(``LAST_RESORT_SECONDS``, 5 s here instead of 10), exits 75 and says the cluster's state is
unknown and how to check."""

from __future__ import annotations

import logging
import socket
import time
import types

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.steps import finalize_cluster
from vsp.components.runtime.teardown import exit_task

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "exit"
DEADLINE = 5.0


@pytest.fixture(autouse=True)
def short_last_resort(monkeypatch):
    monkeypatch.setattr(exit_task, "LAST_RESORT_SECONDS", 5.0)


class Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def errors_logged():
    handler = Collect()
    logger = logging.getLogger("vsp")
    logger.addHandler(handler)
    yield handler.messages
    logger.removeHandler(handler)


def run_exit_task() -> tuple[int, float]:
    """Runs the step as the pipeline does after a failed run; its exit code and its seconds."""
    began = time.monotonic()
    with pytest.raises(SystemExit) as ended:
        finalize_cluster.main(
            project=PROJECT,
            location=LOCATION,
            cluster_id=CLUSTER,
            status=types.SimpleNamespace(state="FAILED"),
            failure_keep_minutes=60.0,
            timeout_seconds=DEADLINE,
            pipeline_run="run-1",
        )
    return ended.value.code, time.monotonic() - began


def check(code, seconds, messages, why):
    assert code == errors.EXIT_TRANSIENT_ERROR == 75
    assert DEADLINE <= seconds <= DEADLINE + exit_task.LAST_RESORT_SECONDS + 1.0
    [message] = [m for m in messages if m.startswith("finalize_cluster failed (exit 75): ")]
    assert f"could not keep or delete cluster projects/{PROJECT}" in message
    assert f"The cluster's state is unknown ({why}; labelling it to expire failed too)" in message
    assert f"vsp clusters get --project {PROJECT} --location {LOCATION} {CLUSTER}" in message
    assert "the reap-expired-clusters pipeline, every 10 minutes" in message


@pytest.mark.slow
def test_api_refusing_connections(monkeypatch, errors_logged):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", f"127.0.0.1:{port}")  # nothing listens there
    code, seconds = run_exit_task()
    check(code, seconds, errors_logged, "the Vertex AI API could not be reached")


@pytest.mark.slow
def test_api_accepting_but_never_answering(monkeypatch, errors_logged):
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # the kernel accepts connections; nobody reads or answers
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", f"127.0.0.1:{silent.getsockname()[1]}")
    try:
        code, seconds = run_exit_task()
    finally:
        silent.close()
    check(code, seconds, errors_logged, "the Vertex AI API could not be reached")


@pytest.mark.slow
def test_api_answering_500_to_every_call(emulator, errors_logged):
    # Each answer takes 2 s, so the deadline cuts the last call before its answer comes; the
    # API did answer the others, so it is not called unreachable.
    emulator.add_fault(action="delay", seconds=2.0, times=None)
    emulator.add_fault(action="status", http_status=500, times=None)
    code, seconds = run_exit_task()
    check(code, seconds, errors_logged, "the API kept failing")


def test_an_id_no_cluster_can_have_ends_the_exit_task_with_nothing_to_do(monkeypatch):
    # It exited 2 and was retried twice, to the same answer: create_cluster refuses the id too,
    # so no step of the run made or used a cluster by it.
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "127.0.0.1:9")  # any request would fail
    action, summary = finalize_cluster.main(
        project=PROJECT,
        location=LOCATION,
        cluster_id="My_Cluster!",
        status=types.SimpleNamespace(state="FAILED"),
        failure_keep_minutes=60.0,
        timeout_seconds=DEADLINE,
        pipeline_run="run-1",
    )
    assert (action, summary) == (
        "none",
        "none: no cluster can have the id 'My_Cluster!', so none is ended",
    )
