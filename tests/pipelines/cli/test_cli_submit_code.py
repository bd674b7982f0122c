"""`vsp submit --code DIR`: reproducible packing, the upload beside the outputs, the parameters."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile

import google.api_core.exceptions
import pytest
from click.testing import CliRunner

from tests.pipelines.cluster_place import PLACE_PARAM
from vsp.components.runtime.core import errors
from vsp.pipelines.cli import code_pack, main

LOC = ["--project", "test-project", "--location", "us-central1"]
REQUIRED = [
    "project=test-project",
    'command=["python", "train.py"]',
    "working_directory=/home/me/runs",
    "model_dir=gs://bucket/root/model",
    "model_id=digits",
    "serving_image=us-docker.pkg.dev/p/r/serve:1",
    PLACE_PARAM,
]


def tree(folder, *, touch: float | None = None):
    """A small code folder; ``touch`` sets every file's mtime."""
    (folder / "pkg").mkdir(parents=True)
    (folder / "train.py").write_text("print('hi')\n")
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "run.sh").chmod(0o755)
    (folder / "pkg" / "mod.py").write_text("X = 1\n")
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"junk")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref\n")
    (folder / "pkg" / "stale.pyc").write_bytes(b"junk")
    if touch is not None:
        for path in folder.rglob("*"):
            os.utime(path, (touch, touch))
    return folder


def test_packing_depends_only_on_names_contents_and_executable_bits(tmp_path):
    one = code_pack.pack_folder(tree(tmp_path / "a", touch=1_000_000))
    two = code_pack.pack_folder(tree(tmp_path / "b", touch=2_000_000_000))
    assert one.data == two.data and one.sha256 == two.sha256
    assert one.sha256 == hashlib.sha256(one.data).hexdigest() and one.files == 3
    with tarfile.open(fileobj=io.BytesIO(one.data)) as archive:
        members = archive.getmembers()
    assert [(m.name, m.mode, m.mtime, m.uid, m.uname) for m in members] == [
        ("pkg/mod.py", 0o644, code_pack.MTIME, 0, ""),
        ("run.sh", 0o755, code_pack.MTIME, 0, ""),
        ("train.py", 0o644, code_pack.MTIME, 0, ""),
    ]
    (tmp_path / "b" / "pkg" / "mod.py").write_text("X = 2\n")
    assert code_pack.pack_folder(tmp_path / "b").sha256 != one.sha256


def test_packing_refuses_symlinks_and_empty_or_missing_folders(tmp_path):
    folder = tree(tmp_path / "a")
    (folder / "link.py").symlink_to(folder / "train.py")
    with pytest.raises(errors.UserError, match=r"symlinks \(link.py\).*Fix:"):
        code_pack.pack_folder(folder)
    (tmp_path / "empty").mkdir()
    with pytest.raises(errors.UserError, match="has no files"):
        code_pack.pack_folder(tmp_path / "empty")
    with pytest.raises(errors.UserError, match="is not a folder"):
        code_pack.pack_folder(tmp_path / "missing")


@pytest.fixture
def spot_template(tmp_path):
    path = tmp_path / "slurm_spot_training.yaml"
    shutil.copyfile("src/vsp/compiled/pipelines/slurm_spot_training.yaml", path)
    return str(path)


@pytest.fixture
def gcs(tmp_path, monkeypatch):
    root = tmp_path / "gcs"
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(root))
    return root


def submit(template, code, *extra):
    args = ["submit", *LOC, "--template", template, "--pipeline-root", "gs://bucket/root"]
    args += ["--code", str(code), "--job-id", "run-1"]
    for item in REQUIRED:
        args += ["--param", item]
    return CliRunner().invoke(main.main, [*args, *extra])


def test_submit_code_uploads_beside_the_outputs_and_passes_code_uri_and_digest(
    emulator, spot_template, gcs, tmp_path
):
    code = tree(tmp_path / "code")
    package = code_pack.pack_folder(code)
    uri = f"gs://bucket/root/vsp-code/{package.sha256}.tar.gz"
    result = submit(spot_template, code, "--param", 'training_options={"max_preemptions": 20}')
    assert result.exit_code == 0, result.output
    assert f"code: {uri} (uploaded; sha256 {package.sha256})" in result.stderr
    stored = gcs / "bucket" / "root" / "vsp-code" / f"{package.sha256}.tar.gz"
    assert stored.read_bytes() == package.data
    [entry] = emulator.journal()
    values = entry["body"]["runtimeConfig"]["parameterValues"]
    assert values["training_options"] == {
        "max_preemptions": 20,
        "code_uri": uri,
        "code_sha256": package.sha256,
    }
    again = CliRunner().invoke(
        main.main,
        ["submit", *LOC, "--template", spot_template, "--pipeline-root", "gs://bucket/root"]
        + ["--code", str(code), "--job-id", "run-2"]
        + [a for item in REQUIRED for a in ("--param", item)],
    )
    assert again.exit_code == 0, again.output
    assert f"code: {uri} (already there; sha256 {package.sha256})" in again.stderr


def test_submit_code_dry_run_shows_the_upload_and_sends_nothing(
    emulator, spot_template, gcs, tmp_path
):
    code = tree(tmp_path / "code")
    package = code_pack.pack_folder(code)
    uri = f"gs://bucket/root/vsp-code/{package.sha256}.tar.gz"
    result = submit(spot_template, code, "--dry-run")
    assert result.exit_code == 0, result.output
    assert (
        f"dry run: would upload {code} (3 files, {len(package.data)} bytes, sha256 "
        f"{package.sha256}) to {uri} (not sent)" in result.stderr
    )
    body = json.loads(result.stdout)
    assert body["runtimeConfig"]["parameterValues"]["training_options"] == {
        "code_uri": uri,
        "code_sha256": package.sha256,
    }
    assert not gcs.exists() and emulator.journal() == []


def test_submit_code_refuses_a_second_code_uri_before_uploading(
    emulator, spot_template, gcs, tmp_path
):
    code = tree(tmp_path / "code")
    result = submit(
        spot_template, code, "--param", 'training_options={"code_uri": "gs://b/x.tar.gz"}'
    )
    assert result.exit_code == errors.EXIT_USER_ERROR
    assert "--code and --param training_options=... both set the code" in result.output
    assert not gcs.exists() and emulator.journal() == []


def test_submit_code_needs_the_emulated_storage_folder(
    emulator, spot_template, tmp_path, monkeypatch
):
    monkeypatch.delenv("VSP_GCS_FUSE_ROOT", raising=False)
    result = submit(spot_template, tree(tmp_path / "code"))
    assert result.exit_code == errors.EXIT_USER_ERROR
    assert "Fix: export VSP_GCS_FUSE_ROOT" in result.output
    assert emulator.journal() == []


class FakeBlob:
    """Stands in for a google-cloud-storage blob; the bucket's objects are a dict."""

    def __init__(self, objects, name, error):
        self.objects, self.name, self.error = objects, name, error

    def upload_from_string(self, data, content_type, if_generation_match):
        if self.error is not None:
            raise self.error
        assert (content_type, if_generation_match) == ("application/gzip", 0)
        if self.name in self.objects:
            raise google.api_core.exceptions.PreconditionFailed("exists")
        self.objects[self.name] = data


class FakeStorage:
    """Stands in for ``google.cloud.storage.Client``: records the bucket and object names."""

    objects: dict = {}
    buckets: list = []
    error: Exception | None = None

    def bucket(self, name):
        self.buckets.append(name)
        return type(
            "Bucket", (), {"blob": lambda _, blob: FakeBlob(self.objects, blob, self.error)}
        )()


@pytest.fixture
def storage(monkeypatch):
    from google.cloud import storage as gcs_storage

    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    FakeStorage.objects, FakeStorage.buckets, FakeStorage.error = {}, [], None
    monkeypatch.setattr(gcs_storage, "Client", FakeStorage)
    return FakeStorage


def test_upload_to_cloud_storage_is_create_only_and_maps_errors(storage, tmp_path):
    package = code_pack.pack_folder(tree(tmp_path / "code"))
    uri = package.uri("gs://my-bucket/pipeline-root/")
    assert uri == f"gs://my-bucket/pipeline-root/vsp-code/{package.sha256}.tar.gz"
    assert code_pack.upload(package, uri) is True
    assert storage.buckets == ["my-bucket"]
    assert storage.objects == {f"pipeline-root/vsp-code/{package.sha256}.tar.gz": package.data}
    assert code_pack.upload(package, uri) is False  # already there: left as it is
    storage.error = google.api_core.exceptions.Forbidden("no")
    with pytest.raises(errors.UserError, match="roles/storage.objectCreator"):
        code_pack.upload(package, uri)
    storage.error = google.api_core.exceptions.ServiceUnavailable("busy")
    with pytest.raises(errors.TransientError):
        code_pack.upload(package, uri)
    with pytest.raises(errors.UserError, match="not on Cloud Storage"):
        package.uri("/local/root")
