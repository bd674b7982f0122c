"""The polling benchmark's lower bound on the p95 detection of any pull schedule."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.polling import run


def test_the_floor_of_the_benchmarks_change_mix():
    # 9 preemptions of 30 changes, 60 looks an hour: 60 s x (1 - 0.05 / 0.3) = 50 s.
    assert run.pull_p95_floor(9, 30) == pytest.approx(50.0)
    assert run.pull_p95_floor(1, 30) == 0.0  # preemptions under 5% of the changes: no floor
    assert run.pull_p95_floor(0, 0) == 0.0


@settings(max_examples=200, deadline=None)
@given(weights=st.lists(st.floats(0.01, 1.0), min_size=60, max_size=60))
def test_no_schedule_of_60_looks_beats_the_floor(weights):
    # Any 60 gaps summing to an hour: the share of change times waiting more than just under
    # the floor, times the preemptions' share, is above 5%, so the p95 is above that time.
    gaps = [w / sum(weights) * 3600.0 for w in weights]
    share = 9 / 30
    below = run.pull_p95_floor(9, 30) - 0.5
    waiting = sum(max(0.0, g - below) for g in gaps) / 3600.0
    assert share * waiting > 0.05
