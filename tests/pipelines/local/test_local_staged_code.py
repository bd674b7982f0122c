"""The main pipeline with staged code, as Vertex runs it: the compiled template, a venv per step.

The code is given as ``training_options`` (``code_uri``, ``code_sha256``, and
``code_cache_dir`` on the cluster's home), as ``vsp submit --code`` passes it; the emulated job
unpacks and runs it, and register-model records its digest on the model version.
"""

from __future__ import annotations

import os
import pathlib

import code_packages
import pytest

from tests.job_log_files import job_log
from tests.pipelines.local import run_arguments
from vsp import vertex_emulator
from vsp.components.runtime.core import gcs_paths
from vsp.pipelines.cli import code_pack
from vsp.pipelines.definitions import catalog


@pytest.mark.slow
def test_compiled_pipeline_trains_the_staged_code_and_the_model_version_names_its_digest(
    tmp_path, monkeypatch
):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    arguments = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    gcs_root = str(tmp_path / "emulator" / "gcs")
    source = code_packages.trainer_source(
        tmp_path / "src", "42", code_packages.dependency_wheel(tmp_path / "w")
    )
    package = code_pack.pack_folder(source)
    uri = package.uri(f"gs://{catalog.LOCAL_BUCKET}/root")
    stored = gcs_paths.to_local_path(uri, gcs_root=gcs_root)
    stored.parent.mkdir(parents=True)
    stored.write_bytes(package.data)
    home = vertex_emulator.cluster_home(str(tmp_path / "emulator"), "vsplocal")
    arguments["command"] = ["python", "train.py"]
    arguments["training_options"] = {
        **arguments["training_options"],
        "code_uri": uri,
        "code_sha256": package.sha256,
        "code_cache_dir": f"{home}/.vsp/code",
    }
    result = run_arguments.run_main(tmp_path, arguments)
    assert result.succeeded, result.error
    assert result.mode == "faithful"
    assert result.parameters["train-on-cluster"]["code_sha256"] == package.sha256
    log_dir = pathlib.Path(arguments["training_options"]["log_directory"])
    log_file = job_log(log_dir, 1)
    log = log_file.read_text()
    assert f"code version 42 (vspdep 1.0, cwd {home}/.vsp/code/.build-{package.sha256}-" in log
    assert f"sha256 {package.sha256})" in log
    model = pathlib.Path(arguments["model_dir"]) / "model.npz"
    assert model.read_bytes() == b"trained by code 42"
    [upload] = [e for e in result.journal if e["path"].endswith("models:upload")]
    body = upload["body"]["model"]
    assert body["labels"]["vsp-code-sha256"] == package.sha256[:63]
    assert body["versionDescription"].endswith(f"Trained with code sha256:{package.sha256}.")
    report = pathlib.Path(result.outputs["train-on-cluster/report"]).read_text()
    assert f"{uri} (sha256 {package.sha256})" in report
    assert not os.path.exists(f"{home}/.vsp")  # the cluster's home is out of the steps' sight
