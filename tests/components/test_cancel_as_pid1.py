"""Cancel reaches the step when its command runs as the container's PID 1, as on Vertex.

The compiled ``train_on_cluster`` command runs unchanged in a new PID namespace
(``unshare --pid --fork``), so its first process is PID 1 there, with a fresh venv first on
``PATH`` standing in for the stock image. SIGTERM is sent to that PID 1, as the container runtime
does on a pipeline cancel. With the exec-ing command the Python step receives it, cancels its
Slurm job (DELETE) and exits 143; with kfp's original command (no ``exec``) ``sh`` stays PID 1,
ignores the signal, and the job keeps running, which is the failure this guards against.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import venv

import pytest
from kfp import components
from kfp.local import executor_input_utils

from tests.components import compiled_steps

DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "pidone"

pytestmark = pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")


@pytest.fixture(scope="module")
def stock_python(tmp_path_factory):
    """A fresh venv standing in for the stock image's interpreter (nothing installed)."""
    root = tmp_path_factory.mktemp("stock")
    venv.create(root, with_pip=True)
    return root / "bin"


@pytest.fixture
def cluster(slurm_cluster):
    return slurm_cluster(CLUSTER)


def _executor_input(tmp_path) -> str:
    work = tmp_path / "shared"
    arguments = {
        "project": PROJECT,
        "location": LOCATION,
        "cluster_id": CLUSTER,
        "command": [
            sys.executable,
            "-m",
            "vsp.examples.trainer",
            "--steps",
            "2000",
            "--step-seconds",
            "0.05",
        ],
        "working_directory": str(work),
        "checkpoint_dir": str(work / "ckpt"),
        "model_dir": str(work / "model"),
        "account": "ml",
        "run_key": "pid-one",
        "poll_seconds": 0.5,
    }
    loaded = components.load_component_from_file(
        str(compiled_steps.COMPILED / "components" / "train_on_cluster.yaml")
    )
    [spec] = loaded.pipeline_spec.components.values()
    message = executor_input_utils.construct_executor_input(
        spec, arguments, str(tmp_path / "task"), block_input_artifact=False
    )
    # Integers as the backend sends them (protobuf numbers are doubles until typed back).
    return json.dumps(executor_input_utils.executor_input_to_dict(message, spec))


def _without_exec(command: list[str]) -> list[str]:
    """kfp's own command shape: neither ``sh`` stage execs its successor."""
    return [
        part.replace('&& exec "$0" "$@"', '&& "$0" "$@"').replace(
            "_KFP_RUNTIME=true exec python3", "_KFP_RUNTIME=true python3"
        )
        for part in command
    ]


def _namespace_init(unshare: subprocess.Popen) -> int:
    """The host pid of PID 1 of the namespace (the child ``unshare --fork`` started)."""
    deadline = time.monotonic() + 10
    path = pathlib.Path(f"/proc/{unshare.pid}/task/{unshare.pid}/children")
    while time.monotonic() < deadline:
        children = path.read_text().split() if path.exists() else []
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError("unshare started no child")


def _wait_running(cluster, step, output, timeout=300.0):
    deadline = time.monotonic() + timeout
    while "RUNNING" not in json.dumps(cluster.app.slurm.jobs(CLUSTER)):
        assert step.poll() is None, f"the step ended early:\n{output()}"
        assert time.monotonic() < deadline, f"the step never started its job:\n{output()}"
        time.sleep(0.2)


def _deletes(cluster) -> list[dict]:
    return [
        e
        for e in cluster.journal()
        if "callSlurmRestApi" in e["path"]
        and (e.get("body") or {}).get("method") == "HTTP_METHOD_DELETE"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["compiled", "kfp-without-exec"])
def test_sigterm_to_pid_1_cancels_the_slurm_job(shape, cluster, stock_python, tmp_path):
    step = compiled_steps.CompiledStep.load("train_on_cluster")
    command = step.command if shape == "compiled" else _without_exec(step.command)
    payload = _executor_input(tmp_path)
    args = [a.replace("{{$}}", payload) for a in step.args]
    environment = {**os.environ, "PATH": f"{stock_python}{os.pathsep}{os.environ['PATH']}"}
    log = (tmp_path / "step.log").open("w")
    unshare = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--kill-child", *command, *args],
        env=environment, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    output = lambda: (tmp_path / "step.log").read_text()[-3000:]  # noqa: E731
    try:
        init = _namespace_init(unshare)
        _wait_running(cluster, unshare, output)
        os.kill(init, signal.SIGTERM)
        if shape == "compiled":
            unshare.wait(timeout=60)
            assert unshare.returncode == 143, output()
            assert len(_deletes(cluster)) == 1, output()
            deadline = time.monotonic() + 10
            while "CANCELLED" not in json.dumps(cluster.app.slurm.jobs(CLUSTER)):
                assert time.monotonic() < deadline
                time.sleep(0.1)
        else:
            time.sleep(5)
            assert unshare.poll() is None  # sh as PID 1 ignored SIGTERM; Python never saw it
            assert _deletes(cluster) == []
            assert "RUNNING" in json.dumps(cluster.app.slurm.jobs(CLUSTER))
    finally:
        if unshare.poll() is None:
            unshare.kill()  # --kill-child: the namespace's PID 1 gets SIGKILL, and with it all
            unshare.wait(timeout=30)
        log.close()
