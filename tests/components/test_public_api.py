"""``vsp.components``: the built components by name, the shipped YAML, and no plain functions."""

# No postponed annotations: a pipeline below is defined here and kfp reads its types.

import inspect
import pathlib
import subprocess
import sys

import pytest
import yaml
from kfp.dsl import base_component

import vsp.components
from vsp.components import catalog, cluster, declare, packaging, training

COMPILED = pathlib.Path(__file__).resolve().parents[2] / "src" / "vsp" / "compiled"


def test_all_lists_every_component_and_the_helpers():
    assert vsp.components.__all__ == [
        "check_run_parameters",
        "create_cluster",
        "decide_teardown",
        "delete_cluster",
        "ensure_slurm_account",
        "finalize_cluster",
        "finalize_custom_jobs",
        "keep_cluster",
        "reap_expired_clusters",
        "register_model",
        "shrink_cluster",
        "train_custom_job",
        "train_on_cluster",
        "COMPONENTS",
        "compiled_path",
        "component_set",
        "load",
    ]
    assert sorted(vsp.components.COMPONENTS) == sorted(catalog.declarations())


@pytest.mark.parametrize("name", vsp.components.COMPONENTS)
def test_each_name_is_the_built_component_the_pipelines_use(name):
    component = getattr(vsp.components, name)
    assert isinstance(component, base_component.BaseComponent)
    assert component is catalog.component_set()[name]
    assert component.name == name.replace("_", "-")
    # The runtime is embedded: that is what a bare dsl.component of the function lacks.
    command = "\n".join(component.component_spec.implementation.container.command)
    assert packaging.RUNTIME_FILE in command


def test_declaration_modules_give_the_component_not_the_plain_function():
    from vsp.components.cluster import create_cluster
    from vsp.components.training import ensure_slurm_account, train_on_cluster

    assert create_cluster is vsp.components.create_cluster
    assert train_on_cluster is vsp.components.train_on_cluster
    assert ensure_slurm_account is vsp.components.ensure_slurm_account
    assert not inspect.isfunction(cluster.create_cluster)
    # The declaration itself stays reachable, for other images (catalog.component_set).
    assert inspect.isfunction(declare.DECLARED["create_cluster"])
    assert cluster.create_cluster.python_func is declare.DECLARED["create_cluster"]
    with pytest.raises(AttributeError, match="has no attribute 'train_on_clusterr'"):
        training.train_on_clusterr  # noqa: B018


def test_a_name_declared_twice_is_refused():
    def create_cluster(project: str) -> str:
        """A second create_cluster."""
        return project

    with pytest.raises(ValueError, match="'create_cluster' is declared twice"):
        declare.component(create_cluster)


def test_every_component_body_hands_its_parameters_to_its_entry_module():
    """The one declaration form: ``params = dict(locals())``, the import, ``main(**params)``;
    and each entry's ``main`` takes exactly the component's parameters."""
    import ast
    import importlib
    import textwrap

    for name, func in catalog.declarations().items():
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
        body = tree.body[0].body[1:]  # after the docstring
        assert [ast.unparse(node) for node in body] == [
            "params = dict(locals())",
            f"from vsp.components.runtime.steps import {name}",
            f"return {name}.main(**params)",
        ], name
        module = importlib.import_module(f"vsp.components.runtime.steps.{name}")
        declared = set(inspect.signature(func).parameters)
        if "options" in declared:  # the entry takes it through step.accepts_options
            assert module.main.__wrapped__.__module__ == module.__name__, name
            declared.discard("options")
        accepted = inspect.signature(module.main).parameters
        named = {n for n, p in accepted.items() if p.kind is p.KEYWORD_ONLY}
        if any(p.kind is p.VAR_KEYWORD for p in accepted.values()):
            # The rest go through as a group the entry names in a table (or all, for the check).
            tables = [v for k, v in vars(module).items() if k.endswith("_PARAMETERS")]
            rest = set(tables[0]) if tables else declared - named
            assert named <= declared and (named | rest) == declared, name
        else:
            assert named == declared, name


@pytest.mark.parametrize("name", ["create_cluster", "train_on_cluster", "register_model"])
def test_load_reads_the_compiled_yaml(name):
    loaded = vsp.components.load(name)
    built = getattr(vsp.components, name)
    assert vsp.components.compiled_path(name).name == f"{name}.yaml"
    assert loaded.name == built.name
    assert loaded.component_spec.inputs == built.component_spec.inputs
    assert loaded.component_spec.outputs == built.component_spec.outputs


def test_an_unknown_name_says_which_exist():
    with pytest.raises(ValueError, match=r"no component named 'train'\. Fix: use one of "):
        vsp.components.load("train")
    with pytest.raises(AttributeError, match="has no attribute 'train'"):
        vsp.components.train  # noqa: B018


def test_the_runtime_import_does_not_import_kfp():
    code = (
        "import sys\n"
        "import vsp.components.runtime.core.step\n"
        "import vsp.components.runtime.steps.train_on_cluster\n"
        "print(sorted(m for m in sys.modules if m == 'kfp' or m.startswith('kfp.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _task(spec: dict, name: str) -> dict:
    dags = [spec["root"], *spec["components"].values()]
    (task,) = [d["dag"]["tasks"][name] for d in dags if name in d.get("dag", {}).get("tasks", {})]
    return task


def test_training_consumes_the_created_cluster_name_instead_of_an_after():
    spec = yaml.safe_load((COMPILED / "pipelines" / "slurm_spot_training.yaml").read_text())
    train = _task(spec, "train-on-cluster")
    assert train["inputs"]["parameters"]["cluster_name"] == {
        "taskOutputParameter": {
            "outputParameterKey": "cluster_name",
            "producerTask": "create-cluster",
        }
    }
    assert "cluster_id" not in train["inputs"]["parameters"]
    assert train["dependentTasks"] == ["create-cluster"]


def test_wrapping_a_public_name_with_dsl_component_fails_at_once():
    from kfp import dsl  # noqa: PLC0415

    with pytest.raises(TypeError, match="got PythonComponent"):
        dsl.component(vsp.components.create_cluster, base_image="python:3.11-slim")


def test_the_built_register_model_feeds_gcpc_deploy(tmp_path):
    """The README's register-then-deploy example, with the component from ``vsp.components``."""
    from tests.components import gcpc_wiring  # noqa: PLC0415

    spec = gcpc_wiring.compiled_spec(vsp.components.register_model, tmp_path)
    assert gcpc_wiring.model_source(spec, "model-deploy") == gcpc_wiring.FROM_REGISTER
