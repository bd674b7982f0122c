"""Tests of trainer.async_save: snapshot, background persist, manifest last."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from vsp.components.runtime.trainer import async_save, checkpoint, history, manifests, progress


def _arrays(value: float) -> dict[str, np.ndarray]:
    return {"w": np.full((3, 2), value), "idx": np.arange(4) + int(value)}


def test_save_returns_after_the_snapshot_and_persists_in_the_background(tmp_path: Path) -> None:
    gate = threading.Event()
    persisted: list[async_save.SaveTiming] = []

    def slow_persist(directory, step, arrays, metadata, keep=None, **history):
        assert gate.wait(10)
        return checkpoint.save(directory, step, arrays, metadata, keep=keep, **history)

    saver = async_save.AsyncCheckpointer(
        tmp_path, persist=slow_persist, on_persisted=persisted.append
    )
    arrays, meta = _arrays(1.0), {"step": 5, "rng": {"state": 2**100}}
    timing = saver.save(5, arrays, meta)
    assert (timing.step, timing.total_s) == (5, None)
    assert saver.in_flight
    assert not (tmp_path / "ckpt-0000000005" / manifests.MANIFEST).exists()
    with pytest.raises(TimeoutError, match="still running"):
        saver.wait(timeout_s=0.01)
    arrays["w"][:] = -7.0  # training goes on changing the state: the snapshot is unaffected
    meta["rng"]["state"] = 0
    gate.set()
    ref = saver.wait()
    assert ref is not None and ref.step == 5 and not saver.in_flight
    loaded = checkpoint.load_latest(tmp_path)
    assert loaded is not None and loaded.step == 5
    np.testing.assert_array_equal(loaded.arrays["w"], np.full((3, 2), 1.0))
    np.testing.assert_array_equal(loaded.arrays["idx"], np.arange(4) + 1)
    assert loaded.metadata == {"step": 5, "rng": {"state": 2**100}}
    assert [(t.step, t.total_s is not None) for t in persisted] == [(5, True)]
    assert persisted[0].total_s >= persisted[0].block_s


def test_a_late_persist_is_dated_from_its_snapshot(tmp_path: Path) -> None:
    # A persist that starts late (a queue, a wrapper that waits) must not move the save's
    # recorded start: the steps after the snapshot are not in this checkpoint.
    def late_persist(directory, step, arrays, metadata, keep=None, **history):
        time.sleep(0.5)
        return checkpoint.save(directory, step, arrays, metadata, keep=keep, **history)

    saver = async_save.AsyncCheckpointer(tmp_path, persist=late_persist)
    before = time.time()
    timing = saver.save(7, _arrays(1.0), {"step": 7})
    after = time.time()
    saver.wait()
    saves = [r for r in history.read(tmp_path) if r.event == "save"]
    assert [(r.step, r.reason) for r in saves] == [(7, "periodic")]
    assert after - before < 0.5  # save() returned at the snapshot, before the persist began
    assert before - 0.01 <= saves[0].time <= after + 0.01  # not 0.5 s later
    assert saves[0].seconds == pytest.approx(timing.block_s, abs=1e-5)
    # A blocking save (in the caller's thread) is dated from its call, as before.
    checkpoint.save(tmp_path, 8, _arrays(2.0), {"step": 8})
    assert [r.step for r in history.read(tmp_path) if r.event == "save"] == [7, 8]


def test_next_save_waits_for_the_persist_in_flight(tmp_path: Path) -> None:
    gate, second_called = threading.Event(), threading.Event()
    events: list[tuple[str, int]] = []

    def persist(directory, step, arrays, metadata, keep=None, **history):
        events.append(("start", step))
        if step == 1:
            assert gate.wait(10)
        ref = checkpoint.save(directory, step, arrays, metadata, keep=keep)
        events.append(("end", step))
        return ref

    saver = async_save.AsyncCheckpointer(tmp_path, persist=persist, keep=1)
    saver.save(1, _arrays(1.0), {})

    def second() -> None:
        second_called.set()
        saver.save(2, _arrays(2.0), {})

    thread = threading.Thread(target=second)
    thread.start()
    assert second_called.wait(10)
    thread.join(0.2)  # the second save is blocked behind the gated first persist
    assert thread.is_alive() and events == [("start", 1)]
    gate.set()
    thread.join(10)
    saver.wait()
    assert events == [("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    assert [step for step, _ in manifests.list_checkpoints(tmp_path)] == [2]  # keep=1


def test_a_persist_error_surfaces_in_the_caller(tmp_path: Path) -> None:
    calls = []

    def failing(directory, step, arrays, metadata, keep=None, **history):
        calls.append(step)
        if step == 1:
            raise OSError(28, "No space left on device")
        return checkpoint.save(directory, step, arrays, metadata, keep=keep, **history)

    saver = async_save.AsyncCheckpointer(tmp_path, persist=failing)
    saver.save(1, _arrays(1.0), {})
    with pytest.raises(OSError, match="No space left on device"):
        saver.save(2, _arrays(2.0), {})  # raised before any snapshot of step 2
    assert calls == [1]
    assert saver.wait() is None  # raised once, then cleared
    saver.save(3, _arrays(3.0), {})
    assert saver.wait().step == 3
    assert calls == [1, 3]
    saver.save(1, _arrays(1.0), {})
    with pytest.raises(OSError, match="No space left"):
        saver.close()


def test_leaving_the_context_waits_for_the_persist(tmp_path: Path) -> None:
    with async_save.AsyncCheckpointer(tmp_path) as saver:
        saver.save(4, _arrays(4.0), {"k": 1})
    assert not saver.in_flight
    assert manifests.latest_valid_checkpoint(tmp_path).step == 4


def test_bad_arrays_are_refused_at_the_snapshot(tmp_path: Path) -> None:
    saver = async_save.AsyncCheckpointer(tmp_path)
    with pytest.raises(checkpoint.errors.UserError, match="object dtype"):
        saver.save(1, {"bad": np.array([object()])}, {})
    assert not saver.in_flight


CRASH_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from vsp.components.runtime.core import file_primitives
    from vsp.components.runtime.trainer import async_save, checkpoint, history, manifests

    root = sys.argv[1]
    checkpoint.save(root, 1, {"w": np.full(3, 1.0)}, {"step": 1})
    real = file_primitives.write_file_atomic

    def stall_before_manifest(path, data):
        if path.name == manifests.MANIFEST:
            print("payload written", flush=True)
            time.sleep(600)
        return real(path, data)

    file_primitives.write_file_atomic = stall_before_manifest
    async_save.AsyncCheckpointer(root).save(2, {"w": np.full(3, 2.0)}, {"step": 2})
    time.sleep(600)
    """
)


def test_a_crash_mid_persist_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", CRASH_SCRIPT, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout.readline() == "payload written\n"
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(30)
    torn = tmp_path / "ckpt-0000000002"
    assert sorted(p.name for p in torn.iterdir()) == ["arrays.npz", "metadata.json"]
    assert [step for step, _ in manifests.list_checkpoints(tmp_path)] == [1, 2]
    resumed = checkpoint.load_latest(tmp_path)
    assert resumed is not None and resumed.step == 1
    np.testing.assert_array_equal(resumed.arrays["w"], np.full(3, 1.0))


def test_save_work_inside_progress_saving_before_the_call_is_the_saves_time(
    tmp_path: Path,
) -> None:
    # A trainer that serialises (0.3 s) inside progress.saving() before calling save: that time
    # held training for this save, so the history's save starts when saving() began, in both
    # the blocking and the asynchronous save; a save outside saving() starts at its call.
    blocking, background = tmp_path / "blocking", tmp_path / "async"
    began = time.time()
    with progress.saving():
        time.sleep(0.3)
        checkpoint.save(blocking, 1, _arrays(1.0), {"step": 1})
    ended = time.time()
    [save] = [r for r in history.read(blocking) if r.event == "save"]
    assert began - 0.01 <= save.time <= began + 0.05
    assert 0.3 <= save.seconds <= ended - began + 0.01

    saver = async_save.AsyncCheckpointer(background)
    began = time.time()
    with progress.saving():
        time.sleep(0.3)
        timing = saver.save(2, _arrays(2.0), {"step": 2})
    saver.wait()
    [save] = [r for r in history.read(background) if r.event == "save"]
    assert began - 0.01 <= save.time <= began + 0.05
    assert timing.block_s >= 0.3
    assert save.seconds == pytest.approx(timing.block_s, abs=1e-5)

    checkpoint.save(blocking, 3, _arrays(3.0), {"step": 3}, blocked_before=0.2)
    [*_, last] = [r for r in history.read(blocking) if r.event == "save"]
    assert 0.2 <= last.seconds < 0.3  # outside saving(): blocked_before alone moves the start
