"""The emulated polling benchmark's detection rules, on hand-made records."""

from __future__ import annotations

from benchmarks.polling import emulated


def seen(time, outcome, requeues=0, beacon=None):
    return {"time": time, "outcome": outcome, "requeues": requeues, "beacon": beacon}


def test_changes_come_from_the_emulator_records():
    events = [{"epoch": 130.0, "runSeconds": 100.0, "noticeSeconds": 0.5}]
    job = {"start_time": 135, "end_time": 200}
    assert emulated.changes(events, job) == [
        {"kind": "start", "run": 0, "time": 30.0},
        {"kind": "preempted", "run": 0, "time": 130.0},
        {"kind": "start", "run": 1, "time": 135.0},
        {"kind": "end", "run": 1, "time": 200.0},
    ]


def test_each_change_is_seen_at_the_first_observation_that_shows_it():
    events = [{"epoch": 130.0, "runSeconds": 100.0, "noticeSeconds": 0.5}]
    job = {"start_time": 135, "end_time": 200}
    observations = [
        seen(10, "PENDING"),
        seen(31, "RUNNING"),
        seen(60, "RUNNING", beacon=[0, "running"]),
        seen(131, "RUNNING", beacon=[0, "notice"]),  # the notice shows the preemption
        seen(150, "RUNNING", requeues=1, beacon=[0, "exiting"]),  # RUNNING with 1 requeue
        seen(230, "SUCCEEDED", requeues=1, beacon=[1, "exiting"]),
    ]
    found = emulated.detections(emulated.changes(events, job), observations)
    assert [(d["kind"], d["run"], d["seconds"]) for d in found] == [
        ("start", 0, 1.0), ("preempted", 0, 1.0), ("start", 1, 15.0), ("end", 1, 30.0),
    ]  # fmt: skip


def test_a_later_run_or_the_restart_count_shows_an_unannounced_preemption():
    change = {"kind": "preempted", "run": 0, "time": 100.0}
    assert not emulated.shows(change, seen(120, "RUNNING", beacon=[0, "running"]))
    assert emulated.shows(change, seen(120, "PENDING", requeues=1))
    assert emulated.shows(change, seen(120, "RUNNING", beacon=[1, "started"]))
    found = emulated.detections([change], [seen(90, "RUNNING")])
    assert found[0]["seconds"] is None
