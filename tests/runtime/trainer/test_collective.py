"""``trainer.collective``: parts written by several ranks, committed once, read as checkpoints."""

from __future__ import annotations

import json
import logging

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import (
    checkpoint,
    collective,
    history,
    history_writer,
    manifests,
)


def write_parts(root, step: int, ranks: int = 2) -> None:
    """What DCP leaves: ``.metadata`` and a part per rank."""
    state = collective.prepare(root, step)
    (state / ".metadata").write_bytes(b"meta-%d" % step)
    for rank in range(ranks):
        (state / f"__{rank}_0.distcp").write_bytes(bytes([rank]) * (100 + step))


def test_a_committed_checkpoint_is_the_latest_valid_and_in_the_history(tmp_path):
    write_parts(tmp_path, 10)
    ref = collective.commit(tmp_path, 10, "periodic", started=1.0)
    assert (
        ref.manifest["payload"] == "directory" and ref.manifest["writer"] == collective.DCP_WRITER
    )
    assert sorted(ref.manifest["files"]) == [
        "state/.metadata",
        "state/__0_0.distcp",
        "state/__1_0.distcp",
    ]
    assert manifests.latest_valid_checkpoint(tmp_path).step == 10
    (record,) = history.read(tmp_path)  # the saved line completes the save line
    assert (record.event, record.step, record.reason, record.time) == ("save", 10, "periodic", 1.0)
    assert record.seconds > 0  # from the start the ranks began writing to the commit


def test_parts_without_a_commit_are_torn_and_skipped(tmp_path):
    write_parts(tmp_path, 10)
    collective.commit(tmp_path, 10)
    write_parts(tmp_path, 20)  # every rank wrote, rank 0 died before commit
    assert manifests.latest_valid_checkpoint(tmp_path).step == 10


def test_a_changed_or_missing_part_makes_it_corrupt(tmp_path):
    write_parts(tmp_path, 10)
    collective.commit(tmp_path, 10)
    write_parts(tmp_path, 20)
    ref = collective.commit(tmp_path, 20)
    (ref.path / "state" / "__1_0.distcp").write_bytes(b"other")
    with pytest.raises(manifests.CorruptCheckpointError, match="__1_0.distcp"):
        manifests.verify_checkpoint(ref.path)
    assert manifests.latest_valid_checkpoint(tmp_path).step == 10
    (ref.path / "state" / "__1_0.distcp").unlink()
    with pytest.raises(manifests.CorruptCheckpointError, match="is missing"):
        manifests.verify_checkpoint(ref.path)


def test_a_manifest_naming_a_path_outside_state_is_refused(tmp_path):
    write_parts(tmp_path, 10)
    ref = collective.commit(tmp_path, 10)
    manifest = json.loads((ref.path / "manifest.json").read_text())
    manifest["files"]["state/../../escape"] = {"size": 1, "sha256": "0"}
    (ref.path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(manifests.CorruptCheckpointError, match="not a file under state/"):
        manifests.verify_checkpoint(ref.path)


def test_retention_and_resume_work_on_committed_checkpoints(tmp_path):
    for step in (10, 20, 30, 40):
        write_parts(tmp_path, step)
        collective.commit(tmp_path, step, keep=2)
    assert [s for s, _ in manifests.list_checkpoints(tmp_path)] == [30, 40]
    assert collective.resume(tmp_path).step == 40
    assert history.read(tmp_path)[-1].event == "resume"


def test_prepare_empties_an_earlier_save_of_the_same_step(tmp_path):
    write_parts(tmp_path, 10, ranks=4)  # an attempt on 4 ranks
    write_parts(tmp_path, 10, ranks=2)  # the same step again, on 2
    ref = collective.commit(tmp_path, 10)
    assert "state/__3_0.distcp" not in ref.manifest["files"]


def test_nothing_to_commit_says_how_to_fix_it(tmp_path):
    with pytest.raises(errors.UserError, match="collective.state_dir"):
        collective.commit(tmp_path, 5)
    with pytest.raises(errors.UserError, match="reason must be one of"):
        collective.commit(tmp_path, 5, "sometimes")


def test_the_numpy_loader_skips_a_collective_checkpoint(tmp_path):
    write_parts(tmp_path, 10)
    collective.commit(tmp_path, 10)
    assert checkpoint.load_latest(tmp_path) is None


def test_committed_names_only_a_valid_checkpoint_of_that_very_step(tmp_path):
    assert collective.committed(tmp_path, 10) is None
    write_parts(tmp_path, 10)
    assert collective.committed(tmp_path, 10) is None  # parts without a manifest: torn
    collective.commit(tmp_path, 10)
    assert collective.committed(tmp_path, 10).step == 10
    assert collective.committed(tmp_path, 20) is None
    part = collective.state_dir(tmp_path, 10) / "__1_0.distcp"
    part.write_bytes(b"changed")
    assert collective.committed(tmp_path, 10) is None  # no longer matches its manifest


def test_preparing_a_committed_step_again_says_it_deletes_it(tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(logging.getLogger("vsp"), "propagate", True)  # a step may have cut it
    write_parts(tmp_path, 10)
    collective.commit(tmp_path, 10)
    collective.prepare(tmp_path, 10)
    assert "step 10 is already committed" in caplog.text
    assert collective.committed(tmp_path, 10) is None  # gone until the new save commits


def test_a_notice_with_nothing_to_write_is_recorded_and_counts_as_landed(tmp_path):
    history_writer.record_resume(tmp_path, 10, 100.0, 1.0)  # loaded step 10 ...
    history_writer.record_unchanged(tmp_path, 10, "notice", at=101.0)  # ... noticed at once
    history_writer.record_resume(tmp_path, 10, 200.0, 1.0)  # the next process resumes it
    records = history.read(tmp_path)
    assert [(r.event, r.step, r.reason, r.time, r.seconds) for r in records] == [
        ("resume", 10, "", 100.0, 1.0),
        ("save", 10, "notice", 101.0, 0.0),
        ("resume", 10, "", 200.0, 1.0),
    ]
    assert history.notice_outcomes(records) == (1, 0)
    without = [r for r in records if r.event != "save"]
    assert history.notice_outcomes(without) == (0, 1)
