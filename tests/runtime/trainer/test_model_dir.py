"""Tests of ``trainer.model_files``: writing and verifying the final model directory."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vsp.components.runtime.core import errors, file_primitives
from vsp.components.runtime.trainer import manifests, model_files

ARRAYS = {"W": np.arange(12, dtype=np.float64).reshape(3, 4) / 7, "b": np.ones(4, np.float32)}


def _write(path: Path, **kwargs) -> dict:
    extra = kwargs.pop("extra_files", {"metrics.json": {"loss_history": [1.0, 0.5]}})
    return model_files.write_model_dir(
        path, ARRAYS, {"step": 40, "name": "mlp"}, extra_files=extra, **kwargs
    )


def _problems(path: Path) -> list[str]:
    with pytest.raises(manifests.ModelDirError) as info:
        manifests.verify_model_dir(path)
    assert isinstance(info.value, errors.UserError)
    assert str(path) in str(info.value)
    return info.value.problems


def test_write_then_verify_and_read(tmp_path: Path) -> None:
    written = _write(tmp_path / "model")
    manifest = manifests.verify_model_dir(tmp_path / "model")
    assert manifest == written
    assert (manifest["format"], manifest["format_version"], manifest["step"]) == (
        "vsp-model",
        1,
        40,
    )
    assert sorted(manifest["files"]) == ["metadata.json", "metrics.json", "model.npz"]
    for name, entry in manifest["files"].items():
        size, sha = file_primitives.file_digest(tmp_path / "model" / name)
        assert entry == {"size": size, "sha256": sha}
    arrays, metadata = model_files.read_model_dir(tmp_path / "model")
    assert {k: v.tobytes() for k, v in arrays.items()} == {
        k: v.tobytes() for k, v in ARRAYS.items()
    }
    assert metadata == {"step": 40, "name": "mlp"}
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert metrics == {"loss_history": [1.0, 0.5]}


def test_same_arrays_give_same_model_file_bytes(tmp_path: Path) -> None:
    first = _write(tmp_path / "a")["files"]["model.npz"]
    second = _write(tmp_path / "b")["files"]["model.npz"]
    assert first == second


def test_explicit_step_and_text_extras(tmp_path: Path) -> None:
    manifest = _write(tmp_path, step=7, extra_files={"README.txt": "hi", "raw.bin": b"\x00"})
    assert manifest["step"] == 7
    assert (tmp_path / "README.txt").read_text() == "hi"


def test_missing_directory(tmp_path: Path) -> None:
    assert _problems(tmp_path / "absent") == ["the directory does not exist"]


def test_missing_manifest(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "manifest.json").unlink()
    assert _problems(tmp_path) == [
        "manifest.json is missing: the folder holds metadata.json, metrics.json, model.npz, "
        "written without vsp's model "
        "files, or by a writer that did not finish"
    ]


def test_a_model_in_a_layout_of_its_own_is_told_how_to_write_it(tmp_path: Path) -> None:
    (tmp_path / "export" / "v1").mkdir(parents=True)
    (tmp_path / "export" / "v1" / "weights.npz").write_bytes(b"w")
    with pytest.raises(manifests.ModelDirError) as caught:
        manifests.verify_model_dir(tmp_path)
    assert "the folder holds export, written without vsp's model files" in str(caught.value)
    assert "Fix: write the final model with vsp.components.runtime.trainer.model_files." in (
        str(caught.value)
    )
    (tmp_path / "export" / "v1" / "weights.npz").unlink()
    (tmp_path / "export" / "v1").rmdir()
    (tmp_path / "export").rmdir()
    assert _problems(tmp_path) == ["manifest.json is missing: the folder is empty"]


def test_unparsable_manifest(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    assert _problems(tmp_path)[0].startswith("manifest.json is not valid JSON")


def test_unsupported_format_version(tmp_path: Path) -> None:
    _write(tmp_path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["format_version"] = 99
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert _problems(tmp_path) == ["unsupported format_version 99"]


def test_size_mismatch(tmp_path: Path) -> None:
    _write(tmp_path)
    data = (tmp_path / "model.npz").read_bytes()
    (tmp_path / "model.npz").write_bytes(data[:-10])
    size = len(data)
    assert _problems(tmp_path) == [f"file 'model.npz' has {size - 10} bytes, manifest says {size}"]


def test_sha_mismatch(tmp_path: Path) -> None:
    _write(tmp_path)
    data = bytearray((tmp_path / "metrics.json").read_bytes())
    data[3] ^= 0x20
    (tmp_path / "metrics.json").write_bytes(bytes(data))
    (problem,) = _problems(tmp_path)
    assert problem.startswith("file 'metrics.json' sha256") and "does not match" in problem


def test_missing_file(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "metadata.json").unlink()
    assert _problems(tmp_path) == ["file 'metadata.json' is missing"]


def test_extra_file(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "stray.txt").write_text("?")
    (tmp_path / ".tmp-model.npz-1-ab").write_bytes(b"")
    assert _problems(tmp_path) == [
        "extra file '.tmp-model.npz-1-ab' is not listed in the manifest",
        "extra file 'stray.txt' is not listed in the manifest",
    ]


def test_several_problems_are_all_named(tmp_path: Path) -> None:
    _write(tmp_path)
    (tmp_path / "metadata.json").unlink()
    (tmp_path / "extra.bin").write_bytes(b"1")
    assert len(_problems(tmp_path)) == 2


def test_rewrite_replaces_previous_files(tmp_path: Path) -> None:
    _write(tmp_path, extra_files={"old.json": [1]})
    _write(tmp_path, extra_files={"new.json": [2]})
    (tmp_path / ".tmp-model.npz-9-cd").write_bytes(b"leftover")
    manifest = _write(tmp_path, extra_files={"new.json": [3]})
    assert sorted(manifest["files"]) == ["metadata.json", "model.npz", "new.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*manifest["files"], "manifest.json"]
    )
    manifests.verify_model_dir(tmp_path)


def test_foreign_files_are_not_clobbered(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(errors.UserError, match="precious.txt"):
        _write(tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep me"
    assert not (tmp_path / "manifest.json").exists()


@pytest.mark.parametrize("name", ["manifest.json", "model.npz", "sub/x.json", ".hidden", ""])
def test_reserved_or_unsafe_extra_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(errors.UserError, match="extra file name"):
        _write(tmp_path, extra_files={name: b"x"})


def test_bad_step_is_refused(tmp_path: Path) -> None:
    with pytest.raises(errors.UserError, match="step must be"):
        model_files.write_model_dir(tmp_path, ARRAYS, {"step": "40"})
