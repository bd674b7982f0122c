"""Waiting on a long-running operation: looks (GET) with the service holding each wait
(``:wait``), and plain sleeps where the service does not hold."""

from __future__ import annotations

import threading
import time

import pytest

from vsp.components.runtime.core import errors, operations, polling, rest

LOCATION = "us-central1"
SLOW = polling.Backoff(initial=5.0, maximum=5.0, jitter=0)


def _pending(emulator, parent):
    return emulator.app.operations.create(
        parent=parent, kind="test.never", metadata={"@type": "t"}, due=None
    )["name"]


def _finish_after(emulator, name, seconds, **outcome):
    def finish():
        time.sleep(seconds)
        emulator.app.operations.finish(name, at=emulator.app.now(), **outcome)

    thread = threading.Thread(target=finish, daemon=True)
    thread.start()
    return thread


def _calls(emulator, name):
    return [
        (entry["method"], entry["path"].rsplit("/", 1)[-1])
        for entry in emulator.journal()
        if name.rsplit("/", 1)[-1] in entry["path"]
    ]


def _client():
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def _waited(emulator, parent, *, ends_after: float, look_every: float):
    """Waits (looks ``look_every`` s apart) on an operation that ends after ``ends_after`` s;
    returns its id and the calls made on it."""
    name = _pending(emulator, parent)
    finisher = _finish_after(emulator, name, ends_after, response={"@type": "t"})
    looks = polling.Backoff(initial=look_every, maximum=look_every, jitter=0)
    operations.wait_for_operation(_client(), name, backoff=looks, timeout=60)
    finisher.join()
    return name.rsplit("/", 1)[-1], _calls(emulator, name)


def test_an_operation_that_ends_between_looks_is_seen_when_it_ends(emulator, emulator_api):
    name = _pending(emulator, emulator_api.parent)
    finisher = _finish_after(emulator, name, 0.4, response={"@type": "t", "value": 7})
    started = time.monotonic()
    response = operations.wait_for_operation(_client(), name, backoff=SLOW, timeout=60)
    took = time.monotonic() - started
    finisher.join()
    assert response == {"@type": "t", "value": 7}
    assert 0.35 <= took < 2.5  # not the 5 s look interval
    op_id = name.rsplit("/", 1)[-1]
    # One look, one held wait whose answer is the next look: no GET after it.
    assert _calls(emulator, name) == [("GET", op_id), ("POST", f"{op_id}:wait")]


def test_a_held_wait_that_times_out_is_the_next_look(emulator, emulator_api):
    op_id, calls = _waited(emulator, emulator_api.parent, ends_after=1.2, look_every=0.5)
    assert calls[0] == ("GET", op_id)
    assert calls[1:] == [("POST", f"{op_id}:wait")] * (len(calls) - 1)
    assert len(calls) in (3, 4)  # waits of 0.5 s each until the end at 1.2 s


def test_the_failure_of_an_operation_is_raised_after_a_held_wait(emulator, emulator_api):
    name = _pending(emulator, emulator_api.parent)
    stockout = {"code": 8, "message": "no capacity"}
    finisher = _finish_after(emulator, name, 0.2, error=stockout)
    with pytest.raises(errors.OperationFailedError, match="no capacity"):
        operations.wait_for_operation(_client(), name, backoff=SLOW, timeout=60)
    finisher.join()


def test_a_service_without_the_wait_method_is_slept_on_after_one_try(emulator, emulator_api):
    emulator.add_fault(action="status", method="POST", path=r":wait$", http_status=501)
    op_id, calls = _waited(emulator, emulator_api.parent, ends_after=0.9, look_every=0.4)
    assert calls[:2] == [("GET", op_id), ("POST", f"{op_id}:wait")]
    assert set(calls[2:]) == {("GET", op_id)} and len(calls[2:]) >= 2


def test_a_service_that_answers_at_once_is_slept_on_after_one_try(
    emulator_factory, emulator_api_for
):
    emulator = emulator_factory(operation_wait_cap_seconds=0.0)
    started = time.monotonic()
    op_id, calls = _waited(
        emulator, emulator_api_for(emulator).parent, ends_after=0.9, look_every=0.4
    )
    assert calls[:2] == [("GET", op_id), ("POST", f"{op_id}:wait")]
    assert set(calls[2:]) == {("GET", op_id)}
    # The early answer did not shorten the look interval: the looks stay 0.4 s apart.
    assert len(calls) - 1 <= (time.monotonic() - started) / 0.4 + 1


def test_a_transient_failure_of_a_wait_keeps_the_next_wait_held(emulator, emulator_api):
    emulator.add_fault(action="status", method="POST", path=r":wait$", http_status=503, times=1)
    op_id, calls = _waited(emulator, emulator_api.parent, ends_after=1.0, look_every=0.4)
    assert calls[:3] == [("GET", op_id), ("POST", f"{op_id}:wait"), ("GET", op_id)]
    assert calls[3:] and set(calls[3:]) == {("POST", f"{op_id}:wait")}


def test_with_an_injected_clock_the_waits_are_its_sleeps(emulator, emulator_api):
    name = _pending(emulator, emulator_api.parent)
    emulator.app.operations.finish(name, at=emulator.app.now(), response={"@type": "t"})
    clock = polling.FakeClock()
    operations.wait_for_operation(_client(), name, backoff=SLOW, clock=clock, timeout=60)
    assert [method for method, _ in _calls(emulator, name)] == ["GET"]


def test_v1_sends_the_timeout_as_a_query_parameter(emulator, emulator_api):
    name = _pending(emulator, emulator_api.parent)
    finisher = _finish_after(emulator, name, 0.3, response={"@type": "t"})
    operations.wait_for_operation(_client(), name, api_version="v1", backoff=SLOW, timeout=60)
    finisher.join()
    (wait,) = [e for e in emulator.journal() if e["path"].endswith(":wait")]
    assert wait["path"].startswith("/v1/") and wait["query"] == {"timeout": "5.000s"}
    assert wait["body"] in ({}, None) and wait["status"] == 200


def test_a_held_wait_asks_no_longer_than_the_client_listens(emulator, emulator_api):
    name = _pending(emulator, emulator_api.parent)
    finisher = _finish_after(emulator, name, 1.5, response={"@type": "t"})
    client = rest.VertexRestClient(LOCATION, timeout=2.0)
    operations.wait_for_operation(client, name, backoff=SLOW, timeout=60)
    finisher.join()
    waits = [e for e in emulator.journal() if e["path"].endswith(":wait")]
    # 2 s request timeout less the 1 s margin: a 1 s hold, answered not done, then the end.
    assert [w["body"] for w in waits] == [{"timeout": "1.000s"}, {"timeout": "1.000s"}]
    assert all(w["status"] == 200 for w in waits)


def test_the_answer_that_started_the_operation_is_its_first_look(emulator, emulator_api):
    name = _pending(emulator, emulator_api.parent)
    started = emulator.app.operations.get(name)
    finisher = _finish_after(emulator, name, 0.3, response={"@type": "t"})
    operations.wait_for_operation(_client(), name, backoff=SLOW, timeout=60, latest=started)
    finisher.join()
    op_id = name.rsplit("/", 1)[-1]
    assert _calls(emulator, name) == [("POST", f"{op_id}:wait")]  # no GET at all
