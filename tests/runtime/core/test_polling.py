"""Tests of the shared poller and its clock."""

from __future__ import annotations

import random

import pytest

from vsp.components.runtime.core import errors, polling


def test_backoff_grows_to_maximum_without_jitter():
    delays = polling.Backoff(initial=1, maximum=5, multiplier=2, jitter=0).delays()
    assert [next(delays) for _ in range(5)] == [1, 2, 4, 5, 5]


def test_backoff_jitter_stays_within_bounds():
    delays = polling.Backoff(initial=10, maximum=10, multiplier=1, jitter=0.2).delays(
        random.Random(7)
    )
    seen = [next(delays) for _ in range(200)]
    assert min(seen) >= 8 and max(seen) <= 12
    assert len(set(seen)) > 100


def test_poll_until_returns_final_state_and_sleeps_on_the_fake_clock():
    states = iter(["PROVISIONING", "PROVISIONING", "RUNNING"])
    clock = polling.FakeClock()
    changes = []
    result = polling.poll_until(
        lambda: next(states),
        lambda s: s == "RUNNING",
        what="cluster",
        timeout=100,
        backoff=polling.Backoff(initial=2, multiplier=2, jitter=0),
        clock=clock,
        on_change=lambda s, t: changes.append((s, t)),
    )
    assert result.value == "RUNNING"
    assert result.attempts == 3
    assert clock.sleeps == [2, 4]
    assert result.elapsed == 6
    assert changes == [("PROVISIONING", 0), ("RUNNING", 6)]


def test_poll_until_absorbs_transient_errors_but_not_others():
    calls = {"n": 0}

    def flaky():
        calls["n"] += 1
        if calls["n"] < 3:
            raise errors.UnavailableError("blip", http_status=503)
        return "done"

    clock = polling.FakeClock()
    result = polling.poll_until(
        flaky, lambda s: s == "done", what="x", timeout=60, clock=clock, rng=random.Random(1)
    )
    assert result.value == "done" and result.attempts == 3

    def broken():
        raise errors.InvalidArgumentError("bad", http_status=400)

    with pytest.raises(errors.InvalidArgumentError):
        polling.poll_until(broken, bool, what="x", timeout=60, clock=polling.FakeClock())


def test_poll_until_times_out_with_last_state_in_message():
    clock = polling.FakeClock()
    with pytest.raises(errors.TimeoutExceededError, match="last state: PENDING"):
        polling.poll_until(
            lambda: "PENDING",
            lambda s: False,
            what="job",
            timeout=30,
            backoff=polling.Backoff(initial=4, jitter=0, multiplier=1),
            clock=clock,
        )
    assert clock.now() == pytest.approx(30)


def test_long_unchanged_waits_log_a_heartbeat(caplog):
    states = iter(["PENDING"] * 30 + ["RUNNING"])
    caplog.set_level("INFO", logger=polling.PROGRESS_LOGGER)
    polling.poll_until(
        lambda: next(states),
        lambda s: s == "RUNNING",
        what="job 7",
        timeout=None,
        backoff=polling.Backoff(initial=10, multiplier=1, jitter=0),
        clock=polling.FakeClock(),
        heartbeat=60,
    )
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "job 7: PENDING (0 s; next check in 10 s)"
    assert messages[1:5] == [
        f"job 7: still PENDING after {t} (next check in 10 s)"
        for t in ("1 min", "2 min", "3 min", "4 min")
    ]
    assert messages[-1] == "job 7: RUNNING (5 min)"
    assert len(messages) == 6


def test_progress_lines_say_when_the_wait_gives_up(caplog):
    states = iter(["PROVISIONING"] * 3 + ["RUNNING"])
    caplog.set_level("INFO", logger=polling.PROGRESS_LOGGER)
    polling.poll_until(
        lambda: next(states),
        lambda s: s == "RUNNING",
        what="create of cluster c1",
        timeout=3600,
        backoff=polling.Backoff(initial=20, multiplier=1, jitter=0),
        clock=polling.FakeClock(),
    )
    assert [r.getMessage() for r in caplog.records] == [
        "create of cluster c1: PROVISIONING (0 s; next check in 20 s, gives up in 1 h 00 min)",
        "create of cluster c1: RUNNING (1 min)",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 s"),
        (0.4, "0.4 s"),
        (45, "45 s"),
        (60, "1 min"),
        (200, "3 min 20 s"),
        (7500, "2 h 05 min"),
    ],
)
def test_durations_read_as_people_write_them(seconds, text):
    assert polling.duration(seconds) == text


def test_delay_for_sets_each_pause_and_backoff_still_follows_a_transient_error():
    answers = iter(["a", errors.UnavailableError("flaky"), "b", "done"])

    def probe():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    clock = polling.FakeClock()
    result = polling.poll_until(
        probe,
        lambda s: s == "done",
        what="job",
        timeout=None,
        backoff=polling.Backoff(initial=7, multiplier=1, jitter=0),
        clock=clock,
        delay_for=lambda s: {"a": 3.0, "b": 4.0}[s],
    )
    assert result.value == "done"
    assert clock.sleeps == [3.0, 7.0, 4.0]
