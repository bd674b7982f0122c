"""Tests of ``trainer.checkpoint``: atomic save, torn-checkpoint skipping, retention."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from vsp.components.runtime.core import errors, file_primitives, gcs_paths
from vsp.components.runtime.trainer import checkpoint, manifests


def _arrays(step: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(step)
    return {
        "param.w": rng.standard_normal((3, 4)),
        "opt.count": np.arange(5, dtype=np.int64) + step,
        "mask": np.array([True, False, True]),
        "half": rng.standard_normal(6).astype(np.float32),
        "scalar": np.float64(step) / 3,
    }


def _meta(step: int) -> dict:
    rng = np.random.default_rng(step)
    return {
        "step": step,
        "rng": rng.bit_generator.state,
        "epoch": 2,
        "note": "x",
        "nan": float("nan"),
    }


def _save(root: Path, step: int, **kwargs) -> manifests.CheckpointRef:
    return checkpoint.save(root, step, _arrays(step), _meta(step), **kwargs)


def _steps(root: Path) -> list[int]:
    return [step for step, _ in manifests.list_checkpoints(root)]


def test_save_then_load_round_trips_bit_exactly(tmp_path: Path) -> None:
    ref = _save(tmp_path, 7)
    assert ref.path == tmp_path / "ckpt-0000000007"
    assert sorted(p.name for p in ref.path.iterdir()) == [
        "arrays.npz",
        "manifest.json",
        "metadata.json",
    ]
    loaded = checkpoint.load(ref)
    assert loaded.step == 7
    expected = _arrays(7)
    assert loaded.arrays.keys() == expected.keys()
    for name, array in expected.items():
        assert loaded.arrays[name].dtype == np.asarray(array).dtype
        assert loaded.arrays[name].tobytes() == np.asarray(array).tobytes()
    assert loaded.metadata["rng"] == _meta(7)["rng"]  # 128-bit ints survive JSON
    assert np.isnan(loaded.metadata["nan"])


def test_manifest_lists_step_format_sizes_and_sha256(tmp_path: Path) -> None:
    ref = _save(tmp_path, 3)
    manifest = json.loads((ref.path / "manifest.json").read_text())
    assert manifest["step"] == 3
    assert (manifest["format"], manifest["format_version"]) == ("vsp-checkpoint", 1)
    assert manifest["created_unix"] > 0 and manifest["created"].endswith("+00:00")
    for name in ("arrays.npz", "metadata.json"):
        size, sha = file_primitives.file_digest(ref.path / name)
        assert manifest["files"][name] == {"size": size, "sha256": sha}


def test_latest_valid_returns_newest(tmp_path: Path) -> None:
    for step in (1, 5, 12):
        _save(tmp_path, step)
    assert manifests.latest_valid_checkpoint(tmp_path).step == 12
    assert checkpoint.load_latest(tmp_path).step == 12


def test_missing_root_has_no_checkpoint(tmp_path: Path) -> None:
    assert manifests.latest_valid_checkpoint(tmp_path / "nope") is None
    assert checkpoint.load_latest(tmp_path / "nope") is None


def _no_manifest(path: Path) -> None:
    (path / "manifest.json").unlink()


def _wrong_sha(path: Path) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["files"]["arrays.npz"]["sha256"] = "0" * 64
    (path / "manifest.json").write_text(json.dumps(manifest))


def _truncated(path: Path) -> None:
    data = (path / "arrays.npz").read_bytes()
    (path / "arrays.npz").write_bytes(data[: len(data) // 2])


def _flipped_byte(path: Path) -> None:
    data = bytearray((path / "metadata.json").read_bytes())
    data[5] ^= 0x01
    (path / "metadata.json").write_bytes(bytes(data))


def _bad_json(path: Path) -> None:
    (path / "manifest.json").write_text('{"format": "vsp-checkpoint", ')


def _step_mismatch(path: Path) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["step"] = 1
    (path / "manifest.json").write_text(json.dumps(manifest))


def _missing_payload(path: Path) -> None:
    (path / "metadata.json").unlink()


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_no_manifest, "no manifest.json (torn save)"),
        (_wrong_sha, "'arrays.npz' sha256"),
        (_truncated, "'arrays.npz' has"),
        (_flipped_byte, "'metadata.json' sha256"),
        (_bad_json, "not valid JSON"),
        (_step_mismatch, "manifest step 1 != 20"),
        (_missing_payload, "'metadata.json' is missing"),
    ],
)
def test_torn_or_corrupt_newest_is_skipped_for_previous(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage, reason: str
) -> None:
    _save(tmp_path, 10)
    newest = _save(tmp_path, 20)
    damage(newest.path)
    with caplog.at_level(logging.WARNING, logger="vsp.components.runtime.trainer.checkpoint"):
        assert manifests.latest_valid_checkpoint(tmp_path).step == 10
        assert checkpoint.load_latest(tmp_path).step == 10
    assert any(
        "ckpt-0000000020" in r.getMessage() and reason in r.getMessage() for r in caplog.records
    )
    with pytest.raises(manifests.CorruptCheckpointError, match="ckpt-0000000020") as info:
        checkpoint.load(newest.path)
    assert isinstance(info.value, errors.UserError)


def test_crash_before_manifest_leaves_previous_as_newest_valid(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _save(tmp_path, 4)

    def crash(path: Path, data) -> None:
        raise OSError("simulated crash before the manifest")

    monkeypatch.setattr(file_primitives, "write_file_atomic", crash)
    with pytest.raises(OSError, match="simulated"):
        _save(tmp_path, 8)
    monkeypatch.undo()
    assert _steps(tmp_path) == [4, 8]  # the payload of 8 is in place ...
    assert (
        manifests.latest_valid_checkpoint(tmp_path).step == 4
    )  # ... but without manifest it is torn
    assert _save(tmp_path, 8).step == 8  # saving the same step again replaces it
    assert manifests.latest_valid_checkpoint(tmp_path).step == 8


def test_all_torn_gives_none(tmp_path: Path) -> None:
    _no_manifest(_save(tmp_path, 1).path)
    assert manifests.latest_valid_checkpoint(tmp_path) is None
    assert checkpoint.load_latest(tmp_path) is None


def test_keep_last_n(tmp_path: Path) -> None:
    for step in range(1, 8):
        _save(tmp_path, step, keep=3)
    assert _steps(tmp_path) == [5, 6, 7]
    removed = checkpoint.prune(tmp_path, 1)
    assert [p.name for p in removed] == ["ckpt-0000000005", "ckpt-0000000006"]
    assert _steps(tmp_path) == [7]


def test_retention_never_deletes_newest_valid(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        _save(tmp_path, step)
    for step in (4, 5):
        _no_manifest(_save(tmp_path, step).path)
    checkpoint.prune(tmp_path, 1)
    assert _steps(tmp_path) == [3, 5]
    assert manifests.latest_valid_checkpoint(tmp_path).step == 3


def test_temp_leftovers_of_crashed_saves_are_removed(tmp_path: Path) -> None:
    ref = _save(tmp_path, 1)
    staging = tmp_path / ".tmp-ckpt-0000000002-123-abcd"
    staging.mkdir()
    (staging / "arrays.npz").write_bytes(b"partial")
    (tmp_path / ".tmp-stray-9").write_bytes(b"x")
    (ref.path / ".tmp-manifest.json-123-beef").write_text("{")
    _save(tmp_path, 2, keep=5)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["ckpt-0000000001", "ckpt-0000000002", "history.jsonl"]
    assert not [p for p in ref.path.iterdir() if p.name.startswith(".tmp-")]
    assert manifests.latest_valid_checkpoint(tmp_path).step == 2


def test_save_without_keep_still_cleans_temp_files(tmp_path: Path) -> None:
    (tmp_path / ".tmp-ckpt-0000000009-1-ff").mkdir()
    _save(tmp_path, 1)
    assert checkpoint.clean_temp_files(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-0000000001", "history.jsonl"]


def test_directory_rename_refused_falls_back_to_file_moves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_rename = os.rename

    def refuse_dirs(src, dst, *args, **kwargs):
        if Path(src).is_dir():
            raise OSError(22, "Invalid argument (GCS FUSE rename-dir-limit)")
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "rename", refuse_dirs)
    ref = _save(tmp_path, 3, keep=2)
    assert checkpoint.load(ref).arrays["param.w"].tobytes() == _arrays(3)["param.w"].tobytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-0000000003", "history.jsonl"]


def test_directory_fsync_failure_is_tolerated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(22, "Invalid argument")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    assert file_primitives.fsync_dir(tmp_path) is False
    _save(tmp_path, 1)
    assert manifests.latest_valid_checkpoint(tmp_path).step == 1


def test_invalid_inputs_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(errors.UserError, match="object dtype"):
        checkpoint.save(tmp_path, 1, {"bad": np.array([{"a": 1}], dtype=object)}, {})
    with pytest.raises(errors.UserError, match="not JSON-serialisable"):
        checkpoint.save(tmp_path, 1, {}, {"when": object()})
    with pytest.raises(errors.UserError, match="belong in 'arrays'"):
        checkpoint.save(tmp_path, 1, {}, {"arr": np.zeros(2)})
    with pytest.raises(errors.UserError, match="non-negative int"):
        checkpoint.save(tmp_path, -1, {}, {})
    with pytest.raises(errors.UserError, match="keep must be"):
        checkpoint.prune(tmp_path, 0)
    assert not list(tmp_path.iterdir())


def test_numpy_scalars_in_metadata_become_json_numbers(tmp_path: Path) -> None:
    ref = checkpoint.save(tmp_path, 2, {}, {"lr": np.float64(0.1), "n": np.int64(4)})
    assert checkpoint.load(ref).metadata == {"lr": 0.1, "n": 4}


def test_list_checkpoints_ignores_other_entries(tmp_path: Path) -> None:
    _save(tmp_path, 2)
    (tmp_path / "ckpt-12").mkdir()
    (tmp_path / "ckpt-0000000099").write_text("a file")
    (tmp_path / "notes.txt").write_text("hello")
    assert _steps(tmp_path) == [2]


def test_gs_uris_map_to_the_fuse_mount(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(gcs_paths.GCS_FUSE_ROOT_ENV, raising=False)
    assert gcs_paths.to_local_path("gs://bucket/run/ckpt") == Path("/gcs/bucket/run/ckpt")
    assert gcs_paths.to_local_path("/gcs/bucket/x") == Path("/gcs/bucket/x")
    assert gcs_paths.to_local_path("gs://b/x", gcs_root="/mnt/g") == Path("/mnt/g/b/x")
    monkeypatch.setenv(gcs_paths.GCS_FUSE_ROOT_ENV, "/fuse")
    assert gcs_paths.to_local_path("gs://b/") == Path("/fuse/b")
    with pytest.raises(errors.UserError, match="names no bucket"):
        gcs_paths.to_local_path("gs://")


def test_runtime_modules_need_no_kfp_or_cloud_sdk() -> None:
    code = (
        "import sys; before = set(sys.modules);"
        " import vsp.components.runtime.trainer.checkpoint, vsp.components.runtime.trainer.policy,"
        " vsp.components.runtime.trainer.model_files, vsp.examples.trainer.loop;"
        " roots = ('kfp', 'google', 'requests', 'pydantic');"
        " bad = sorted(m for m in set(sys.modules) - before if m.split('.')[0] in roots);"
        " print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("env", "writes"),
    [
        ({}, True),
        ({"SLURM_PROCID": "0"}, True),
        ({"SLURM_PROCID": "1"}, False),
        ({"RANK": "3", "SLURM_PROCID": "0"}, False),  # torchrun's workers on the first node
        ({"RANK": "0", "SLURM_PROCID": "1"}, True),
    ],
)
def test_only_rank_0_records_a_resume(tmp_path, monkeypatch, env, writes):
    # Every rank of a job may call resume: the job started once, so one history line.
    for name in ("RANK", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    checkpoint.save(tmp_path, 4, _arrays(4), {"step": 4})
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert checkpoint.resume(tmp_path).step == 4
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [line["event"] for line in lines] == ["save", "saved", *(["resume"] if writes else [])]


@pytest.mark.parametrize("env", [{"SLURM_PROCID": "1"}, {"RANK": "2", "SLURM_PROCID": "0"}])
def test_a_save_on_another_rank_than_0_is_refused_and_writes_nothing(tmp_path, monkeypatch, env):
    # Two ranks saving into one root replaced each other's checkpoints: one rank's state lost.
    for name in ("RANK", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(errors.UserError, match=r"checkpoint.save called on rank [12]: .* Fix:"):
        checkpoint.save(tmp_path, 4, _arrays(4), {"step": 4})
    assert list(tmp_path.iterdir()) == []
