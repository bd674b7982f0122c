"""The committed templates in compiled/ are exactly what the sources compile to, and they run."""

# No postponed annotations: a pipeline below is defined here and kfp reads its types.

import base64
import io
import lzma
import pathlib
import tarfile

import pytest
import yaml
from kfp import components as kfp_components
from kfp import dsl, local

from tests.components import compiled_steps, gcpc_wiring
from vsp.pipelines.definitions import compile

ROOT = pathlib.Path(__file__).resolve().parents[2]
COMPILED = ROOT / "src" / "vsp" / "compiled"


def _files(folder: pathlib.Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*.yaml"))}


@pytest.mark.slow
def test_compiled_templates_are_up_to_date(tmp_path):
    compile.compile_all(tmp_path)
    fresh, committed = _files(tmp_path), _files(COMPILED)
    assert sorted(fresh) == sorted(committed), "run `make compile` and commit src/vsp/compiled/"
    stale = [name for name in fresh if fresh[name] != committed[name]]
    assert stale == [], f"stale templates {stale}: run `make compile` and commit src/vsp/compiled/"


@pytest.mark.slow
def test_compiling_twice_gives_identical_bytes(tmp_path):
    compile.compile_all(tmp_path / "a")
    compile.compile_all(tmp_path / "b")
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_templates_embed_the_runtime_and_use_a_stock_image():
    text = (COMPILED / "components" / "create_cluster.yaml").read_text()
    spec = yaml.safe_load(text)
    (executor,) = spec["deploymentSpec"]["executors"].values()
    assert executor["container"]["image"] == "python:3.11-slim"
    command = "\n".join(executor["container"]["command"])
    assert "pip install" in command and "pydantic" in command
    step = compiled_steps.CompiledStep.load("create_cluster")
    archive = lzma.decompress(base64.b64decode("".join(step.runtime_chunks)))
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        names = tar.getnames()
        assert all(m.mtime == 0 and m.uid == 0 and m.mode == 0o644 for m in tar.getmembers())
    assert "vsp/components/runtime/cluster/ops.py" in names
    assert not [n for n in names if "__pycache__" in n or not n.endswith(".py")]


def test_the_embedded_runtime_is_the_sources_with_their_docstrings():
    step = compiled_steps.CompiledStep.load("train_on_cluster")
    files = step.embedded_files()
    runtime = ROOT / "src"
    for path, data in files.items():
        if path in ("vsp/__init__.py", "vsp/components/__init__.py"):
            continue  # stubs: the package's own would import kfp lazily for nothing
        assert data == (runtime / path).read_bytes(), path
    source = files["vsp/components/runtime/steps/train_on_cluster.py"].decode()
    assert source.startswith('"""The ``train_on_cluster`` step')


@pytest.mark.slow
def test_prebuilt_image_option_drops_the_pip_installs(tmp_path):
    from vsp.components import packaging

    compile.compile_all(tmp_path, packaging.ImageOptions("europe-docker.pkg.dev/p/r/vsp:1", False))
    spec = yaml.safe_load((tmp_path / "components" / "delete_cluster.yaml").read_text())
    (executor,) = spec["deploymentSpec"]["executors"].values()
    assert executor["container"]["image"] == "europe-docker.pkg.dev/p/r/vsp:1"
    assert "pip install" not in "\n".join(executor["container"]["command"])


def test_component_parameters_are_documented_for_the_ui():
    spec = yaml.safe_load((COMPILED / "components" / "create_cluster.yaml").read_text())
    params = spec["root"]["inputDefinitions"]["parameters"]
    undocumented = [name for name, p in params.items() if not p.get("description")]
    assert undocumented == []
    assert "Seconds to wait" in params["timeout_seconds"]["description"]


@pytest.mark.slow
def test_compiled_component_yaml_runs_as_is_on_the_emulator(emulator, tmp_path):
    """The stock-image template (pip installs included) runs under kfp.local unchanged."""
    delete_op = kfp_components.load_component_from_file(
        str(COMPILED / "components" / "delete_cluster.yaml")
    )

    @dsl.pipeline(name="compiled-delete")
    def uses_compiled(cluster_id: str):
        delete_op(project="test-project", location="us-central1", cluster_id=cluster_id)

    local.init(local.SubprocessRunner(use_venv=False), pipeline_root=str(tmp_path))
    uses_compiled(cluster_id="absent")
    (entry,) = emulator.journal()
    assert entry["method"] == "GET" and entry["status"] == 404
    assert entry["path"].endswith("/modelDevelopmentClusters/absent")


def test_every_command_argument_is_far_below_the_linux_per_argument_limit():
    """execve refuses one argument over 128 KiB (E2BIG); the runtime is split across several,
    each at most a quarter of that, and the whole command far below ARG_MAX (2 MiB here)."""
    for path in sorted(COMPILED.rglob("*.yaml")):
        spec = yaml.safe_load(path.read_text())
        for executor in spec["deploymentSpec"]["executors"].values():
            command = executor["container"]["command"]
            assert max(len(a.encode()) for a in command) <= 32 * 1024, path.name
            assert sum(len(a.encode()) for a in command) < 512 * 1024, path.name


def test_register_model_output_feeds_gcpc_model_deploy_op(tmp_path):
    """A pipeline built from our compiled YAML wires its VertexModel into ModelDeployOp."""
    register_op = kfp_components.load_component_from_file(
        str(COMPILED / "components" / "register_model.yaml")
    )
    spec = gcpc_wiring.compiled_spec(register_op, tmp_path)
    ours = spec["components"]["comp-register-model"]["outputDefinitions"]["artifacts"]["model"]
    assert ours["artifactType"]["schemaTitle"] == "google.VertexModel"
    assert gcpc_wiring.model_source(spec, "model-deploy") == gcpc_wiring.FROM_REGISTER


def test_every_pipeline_and_component_input_is_documented():
    """Input descriptions reach the Vertex UI from the docstrings."""
    for path in sorted(COMPILED.rglob("*.yaml")):
        inputs = yaml.safe_load(path.read_text())["root"]["inputDefinitions"]
        undocumented = [
            name
            for kind in ("parameters", "artifacts")
            for name, value in inputs.get(kind, {}).items()
            if not value.get("description")
        ]
        assert undocumented == [], f"{path.name}: {undocumented}"


def test_slurm_spot_training_graph_shows_the_teardown_branch_and_exit_task():
    spec = yaml.safe_load((COMPILED / "pipelines" / "slurm_spot_training.yaml").read_text())
    root = spec["root"]["dag"]["tasks"]
    assert root["finalize-cluster"]["triggerPolicy"] == {"strategy": "ALL_UPSTREAM_TASKS_COMPLETED"}
    assert root["finalize-cluster"]["dependentTasks"] == ["exit-handler-1"]
    group = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]
    order = {name: task.get("dependentTasks", []) for name, task in group.items()}
    assert order["check-run-parameters"] == []
    assert order["create-cluster"] == ["check-run-parameters"]
    assert order["train-on-cluster"] == ["create-cluster"]
    assert order["register-model"] == ["train-on-cluster"]
    assert order["decide-teardown"] == ["register-model"]
    assert order["condition-branches-2"] == ["decide-teardown"]
    branches = spec["components"]["comp-condition-branches-2"]["dag"]["tasks"]
    conditions = {t["taskInfo"]["name"]: t["triggerPolicy"]["condition"] for t in branches.values()}
    action = "inputs.parameter_values['pipelinechannel--decide-teardown-action']"
    keep, shrink = f"{action} == 'keep'", f"{action} == 'shrink'"
    assert conditions == {
        "keep-warm": keep,
        "shrink-gpu-pools": f"!({keep}) && {shrink}",
        "delete-now": f"!({keep}) && !({shrink})",
    }
    inner = {
        t["taskInfo"]["name"]: next(
            iter(spec["components"][t["componentRef"]["name"]]["dag"]["tasks"])
        )
        for t in branches.values()
    }
    assert inner == {
        "keep-warm": "keep-cluster",
        "shrink-gpu-pools": "shrink-cluster",
        "delete-now": "delete-cluster",
    }
