"""Staged code on a real Slurm 24.11: the job script unpacks the pinned package and runs it.

The train step talks to the emulator, which forwards the Slurm Job API to the real slurmrestd
(``slurmrestd`` setting); the real slurmd runs the generated batch script, which copies the
package from the emulated Cloud Storage, checks its sha256, builds the venv once per digest in
the cache folder, and runs the trainer there. Two runs with different code share the cache.
"""

from __future__ import annotations

import os
import pathlib

import code_packages
import pytest

from vsp.components.runtime.core import polling
from vsp.components.runtime.steps import train_on_cluster
from vsp.components.runtime.training import code_check
from vsp.components.runtime.training.backends import slurm
from vsp.pipelines.cli import code_pack

pytestmark = pytest.mark.slurm_conformance
CLUSTER = "realcode"
POLL = polling.Backoff(initial=0.2, maximum=0.5, jitter=0)


@pytest.mark.slow
def test_real_slurm_jobs_unpack_and_run_the_pinned_code_per_digest(
    slurm_cluster, held_real_slurm, tmp_path, monkeypatch
):
    slurm_cluster(CLUSTER, slurmrestd=held_real_slurm)
    os.chmod(tmp_path, 0o755)
    gcs = tmp_path / "gcs"
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(gcs))
    cache = tmp_path / "cache"
    seen = {}
    for version in ("1", "2"):
        source = code_packages.trainer_source(
            tmp_path / f"src-{version}", version, code_packages.dependency_wheel(tmp_path / "w")
        )
        package = code_pack.pack_folder(source)
        uri = package.uri("gs://bucket/root")
        code_pack.upload(package, uri)
        run = f"real-code-{version}"
        spec = slurm.SlurmTraining(
            command=["python", "train.py"],
            working_directory=str(tmp_path / "work"),
            checkpoint_dir=str(gcs / "bucket" / run / "ckpt"),
            model_dir=str(gcs / "bucket" / run / "model"),
            standard_output=str(gcs / "bucket" / run / "slurm-%j.out"),
            code=code_check.resolve(uri, package.sha256, str(cache)),
        )
        outcome = train_on_cluster.train_on_cluster(
            project="test-project",
            location="us-central1",
            cluster_id=CLUSTER,
            training=spec,
            spot_partition="spot",
            run_key=run,
            poll_backoff=POLL,
            timeout_seconds=300,
        )
        [job] = outcome.result.job_ids
        log = (gcs / "bucket" / run / f"slurm-{job}.out").read_text()
        link = cache / package.sha256
        assert f"staging {uri} into {link}" in log
        assert f"code version {version} (vspdep 1.0, cwd {link.resolve()}/src" in log
        assert f"python {link}/venv/bin/python, sha256 {package.sha256})" in log
        model = pathlib.Path(spec.model_dir) / "model.npz"
        assert model.read_bytes() == f"trained by code {version}".encode()
        seen[version] = package.sha256
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == sorted(
        seen.values()
    )
