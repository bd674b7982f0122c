"""``trainer.collective``: parts written by several ranks, committed once, read as checkpoints."""

from __future__ import annotations

import json

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import checkpoint, collective, history, manifests


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
