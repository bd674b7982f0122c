"""The example trainer's step log: each step ends when the next begins or a save pauses it."""

from __future__ import annotations

import itertools
import os

from vsp.examples.trainer.step_log import StepLog, read_step_log


def test_a_step_lasts_until_the_next_step_or_a_save_begins(tmp_path):
    ticks = itertools.count(100)
    path = tmp_path / "logs" / "steps.log"
    with StepLog(path, clock=lambda: float(next(ticks))) as log:
        began = log.begin()  # 100
        log.done(1, began)  # the loop's bookkeeping follows: step 1 is still open
        assert path.read_text() == ""
        began = log.begin()  # 101: step 1 ends here
        log.done(2, began)
        log.pause()  # 102: a save; step 2 ends here, the save's time is no step's
        log.pause()  # nothing open: no line
        began = log.begin()  # 103 (104 is never read)
        log.done(3, began)
    pid = os.getpid()
    assert read_step_log(path) == [
        (1, 100.0, 101.0, pid),
        (2, 101.0, 102.0, pid),
        (3, 103.0, 104.0, pid),
    ]


def test_without_a_path_nothing_is_written(tmp_path):
    with StepLog(None) as log:
        log.done(1, log.begin())
        log.pause()
    assert list(tmp_path.iterdir()) == []


def test_torn_and_foreign_lines_are_skipped(tmp_path):
    path = tmp_path / "steps.log"
    path.write_text("1 1.0 2.0 7\n2 2.0\nsave 2.0 3.0 7\n3 3.0 4.0 7\n")
    assert read_step_log(path) == [(1, 1.0, 2.0, 7), (3, 3.0, 4.0, 7)]


def test_the_loops_work_after_a_save_returned_belongs_to_the_next_step(tmp_path):
    ticks = itertools.count(100)
    path = tmp_path / "steps.log"
    with StepLog(path, clock=lambda: float(next(ticks))) as log:
        log.done(1, log.begin())  # 100
        log.pause()  # 101: the save begins; step 1 ends
        log.resumed()  # 102: the save call returned (its span in the history: 101-102)
        began = log.begin()  # 103, after the loop logged the save: step 2 began at 102
        log.done(2, began)
        began = log.begin()  # 104: no save since, so step 3 begins now
        log.done(3, began)
    assert [row[:3] for row in read_step_log(path)] == [
        (1, 100.0, 101.0),
        (2, 102.0, 104.0),
        (3, 104.0, 105.0),
    ]
