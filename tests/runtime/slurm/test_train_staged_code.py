"""Staged code end to end: the train step against the emulated Slurm, real jobs, real venvs.

The code is packed and uploaded as ``vsp submit --code`` does (``code_pack``) into the
emulated Cloud Storage (``$VSP_GCS_FUSE_ROOT``); jobs unpack it under the cluster's home, which
only they can see (the emulator's per-cluster filesystem), and the test reads through
``host_path``.
"""

from __future__ import annotations

import pathlib

import code_packages
import pytest
import requests

from vsp.components.runtime.cluster import resource, rules
from vsp.components.runtime.core import errors, polling, rest
from vsp.components.runtime.slurm import api, code_stage, job_checks
from vsp.components.runtime.steps import register_model, train_on_cluster
from vsp.components.runtime.training import code_check
from vsp.components.runtime.training.backends import slurm
from vsp.pipelines.cli import code_pack
from vsp.vertex_emulator import cluster_home

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "codetest"
SUBMIT = "/slurm/v0.0.42/job/submit"
POLL = polling.Backoff(initial=0.1, maximum=0.2, jitter=0)


class World:
    """One emulator with a RUNNING cluster, emulated Cloud Storage and the cluster's home."""

    def __init__(self, emulator, gcs: pathlib.Path, tmp: pathlib.Path):
        self.emulator, self.gcs, self.tmp = emulator, gcs, tmp
        self.home = cluster_home(emulator.state_dir, CLUSTER)
        self.cache = f"{self.home}/.vsp/code"

    def stage(self, version: str) -> tuple[str, str]:
        """Packs trainer ``version`` and uploads it as ``vsp submit --code`` does."""
        source = code_packages.trainer_source(
            self.tmp / f"src-{version}", version, code_packages.dependency_wheel(self.tmp / "w")
        )
        package = code_pack.pack_folder(source)
        uri = package.uri("gs://bucket/root")
        assert code_pack.upload(package, uri)
        return uri, package.sha256

    def training(self, run: str, uri: str, sha: str) -> slurm.SlurmTraining:
        return slurm.SlurmTraining(
            command=["python", "train.py"],
            working_directory=f"{self.home}/runs",
            checkpoint_dir=str(self.gcs / "bucket" / run / "ckpt"),
            model_dir=str(self.gcs / "bucket" / run / "model"),
            standard_output=str(self.gcs / "bucket" / run / "slurm-%j.out"),
            code=code_check.resolve(uri, sha, self.cache),
        )

    def train(self, run: str, uri: str, sha: str):
        spec = self.training(run, uri, sha)
        outcome = train_on_cluster.train_on_cluster(
            project=PROJECT,
            location=LOCATION,
            cluster_id=CLUSTER,
            training=spec,
            spot_partition="spot",
            run_key=run,
            poll_backoff=POLL,
            timeout_seconds=240,
        )
        [job] = outcome.result.job_ids
        log = (self.gcs / "bucket" / run / f"slurm-{job}.out").read_text()
        return outcome, log, pathlib.Path(spec.model_dir)

    def cached_digests(self) -> list[str]:
        name = f"projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters/{CLUSTER}"
        folder = pathlib.Path(self.emulator.app.slurm.host_path(name, self.cache))
        return (
            sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
            if (folder.is_dir())
            else []
        )

    def submits(self) -> list[dict]:
        return [
            e
            for e in self.emulator.journal()
            if (e.get("body") or {}).get("path", "").startswith(SUBMIT)
        ]


@pytest.fixture
def world(slurm_cluster, tmp_path, monkeypatch):
    gcs = tmp_path / "gcs"
    gcs.mkdir()
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(gcs))
    return World(slurm_cluster(CLUSTER), gcs, tmp_path)


@pytest.mark.slow
def test_two_runs_with_different_code_on_one_warm_cluster_train_different_code(world):
    first_uri, first_sha = world.stage("1")
    second_uri, second_sha = world.stage("2")
    assert first_sha != second_sha and first_uri.endswith(f"/vsp-code/{first_sha}.tar.gz")
    one, log_one, model_one = world.train("run-one", first_uri, first_sha)
    two, log_two, model_two = world.train("run-two", second_uri, second_sha)
    assert "code version 1 (vspdep 1.0" in log_one and f"sha256 {first_sha})" in log_one
    assert "code version 2 (vspdep 1.0" in log_two and f"sha256 {second_sha})" in log_two
    assert (model_one / "model.npz").read_bytes() == b"trained by code 1"
    assert (model_two / "model.npz").read_bytes() == b"trained by code 2"
    assert world.cached_digests() == sorted([first_sha, second_sha])
    # The digest is in each run's report, and in each job's request.
    assert f"{first_uri} (sha256 {first_sha})" in one.report_html
    scripts = [s["body"]["body"]["job"]["script"] for s in world.submits()]
    assert f"_vsp_code_sha={first_sha}" in scripts[0]
    assert f"_vsp_code_sha={second_sha}" in scripts[1]

    # A third run of the first code reuses its unpacked folder and venv.
    _, log_again, _ = world.train("run-three", first_uri, first_sha)
    assert "code version 1" in log_again and f"code {first_sha}: reusing" in log_again
    assert "staging" not in log_again


def test_a_tampered_tarball_is_refused_before_anything_is_submitted(world):
    uri, sha = world.stage("1")
    tampered = code_packages.trainer_tarball(world.tmp / "evil", "666")[0].read_bytes()
    target = world.gcs / uri[len("gs://") :]
    target.write_bytes(tampered)
    actual = code_check.file_sha256(target)
    before = len(world.emulator.journal())  # the fixture's cluster set-up
    with pytest.raises(errors.UserError) as caught:
        world.train("run-evil", uri, sha)
    message = str(caught.value)
    assert f"has sha256 {actual}, not the pinned {sha}" in message
    assert "nothing was submitted" in message and "Fix: stage the code again" in message
    assert world.submits() == []
    assert world.emulator.journal()[before:] == []  # not a single request to Vertex or Slurm


def recreate_cluster(emulator) -> None:
    """Deletes the cluster through the project's client, then creates one of the same id from
    the same spec (as the ``slurm_cluster`` fixture does) with the caller's association."""
    vertex = rest.VertexRestClient(LOCATION)
    ref = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
    clusters = resource.ClusterResource(vertex, ref)
    assert clusters.delete()
    body = rules.load_cluster_spec(DATA / "cluster_full.yaml").to_request_body()
    body["orchestratorSpec"]["slurmSpec"]["prologBashScripts"] = ["#!/bin/bash\ntrue\n"]
    url = f"{emulator.base_url}/v1beta1/{ref.parent}/modelDevelopmentClusters"
    answer = requests.post(url, params={"model_development_cluster_id": CLUSTER}, json=body)
    assert answer.status_code == 200, answer.text
    assert clusters.wait_settled()["clusterStatus"]["state"] == "RUNNING"
    client = api.SlurmClient(vertex, ref)
    client.ensure_association("ml", client.whoami(), ["spot", "ondemand"])


@pytest.mark.slow
def test_a_recreated_cluster_with_an_empty_home_trains_the_pinned_code(world):
    uri, sha = world.stage("1")
    world.train("run-one", uri, sha)
    assert world.cached_digests() == [sha]
    recreate_cluster(world.emulator)
    assert world.cached_digests() == []  # the new cluster's home is empty
    _, log, model = world.train("run-after", uri, sha)
    assert f"staging {uri}" in log and "code version 1" in log
    assert (model / "model.npz").read_bytes() == b"trained by code 1"
    assert world.cached_digests() == [sha]


@pytest.mark.slow
def test_the_model_version_names_the_code_digest(world):
    uri, sha = world.stage("1")
    _, _, model = world.train("run-one", uri, sha)
    registration = register_model.register(
        project=PROJECT,
        location=LOCATION,
        model_id="staged",
        display_name="",
        model_dir_path=str(model),
        serving_image="us-docker.pkg.dev/p/r/serve:1",
        description="nightly",
        code_sha256=sha,
        pipeline_run="run-one",
    )
    [upload] = [e for e in world.emulator.journal() if e["path"].endswith("models:upload")]
    body = upload["body"]["model"]
    assert body["labels"]["vsp-code-sha256"] == sha[:63]
    assert body["versionDescription"] == f"nightly\nTrained with code sha256:{sha}."
    assert registration.model.resource_name.endswith("/models/staged@1")


def test_code_check_reads_the_digest_from_the_uri_fragment_and_refuses_disagreement():
    sha = "ab" * 32
    stage = code_check.resolve(f"gs://b/c.tar.gz#sha256={sha.upper()}")
    assert stage == code_stage.CodeStage("gs://b/c.tar.gz", sha)
    assert code_check.resolve("/gcs/b/c.whl", sha).uri == "gs://b/c.whl"
    assert code_check.resolve("", "") is None
    cases = {
        ("gs://b/c.tar.gz#sha256=" + sha, "cd" * 32): "differ",
        ("gs://b/c.tar.gz", ""): "has no sha256",
        ("gs://b/c.tar.gz", "xyz"): "not 64 hex digits",
        ("gs://b/c.zip", sha): "not a package on Cloud Storage",
        ("/home/me/c.tar.gz", sha): "not a package on Cloud Storage",
        ("gs://b/c.tar.gz#md5=1", sha): "fragment",
        ("", sha): "code_uri is empty",
    }
    for (uri, digest), words in cases.items():
        with pytest.raises(errors.UserError, match=words):
            code_check.resolve(uri, digest)


def test_a_container_image_is_refused_on_a_cluster_without_pyxis(world):
    spec = world.training("run-c", "", "")
    spec = slurm.SlurmTraining(**{**spec.__dict__, "code": None, "container_image": "img:1"})
    with pytest.raises(errors.UserError) as caught:
        train_on_cluster.train_on_cluster(
            project=PROJECT,
            location=LOCATION,
            cluster_id=CLUSTER,
            training=spec,
            spot_partition="spot",
            run_key="run-c",
            poll_backoff=POLL,
        )
    message = str(caught.value)
    assert "label slurm-pyxis=yes missing" in message and "nothing was submitted" in message
    assert "srun --help` lists --container-image" in message
    assert world.submits() == []


def test_a_container_image_passes_the_check_on_a_cluster_labelled_with_pyxis():
    cluster = {"labels": {"slurm-pyxis": "yes"}}
    code_check.check_container("img:1", cluster, CLUSTER)  # no error
    with pytest.raises(errors.UserError):
        code_check.check_container("img:1", {"labels": {"slurm-pyxis": "no"}}, CLUSTER)


@pytest.mark.parametrize(
    ("launcher", "refused"), [("none", False), ("srun", True), ("torchrun", True)]
)
def test_a_container_image_takes_the_launcher_none_only(launcher, refused):
    problems = []
    job_checks.launch_problems(launcher, "", lambda *p: problems.append(p), container_image="i:1")
    assert [p[0] for p in problems] == (["launcher"] if refused else [])
    if refused:
        assert "cannot be combined with container_image" in problems[0][2]
