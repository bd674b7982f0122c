"""The embedded runtime of each component: exactly the modules its body needs, and enough."""

import ast
import pathlib
import subprocess
import sys

import pytest

from vsp.components import catalog, packaging

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_runtime_imports_reads_every_import_form():
    tree = ast.parse(
        "from vsp.components.runtime.core import errors, rest as client\n"
        "from vsp.components.runtime.cluster.spec import ClusterSpec\n"
        "import vsp.components.runtime.slurm.api\n"
        "import os\n"
        "from vsp.components import catalog\n"
        "def f():\n"
        "    from vsp.components.runtime.teardown import decision\n"
    )
    assert packaging.runtime_imports(tree) == {
        "core.errors",
        "core.rest",
        "cluster.spec",
        "slurm.api",
        "teardown.decision",
    }


def test_closure_follows_imports_transitively():
    closure = packaging.runtime_closure({"steps.create_cluster"})
    # steps.create_cluster -> cluster.ops -> core.operations -> core.polling: two hops.
    expected = {
        "steps.create_cluster",
        "cluster.ops",
        "core.operations",
        "core.polling",
        "core.errors",
    }
    assert expected <= closure
    assert "training.supervisor" not in closure and "registry.client" not in closure


def test_an_import_of_a_missing_module_names_it(monkeypatch, tmp_path):
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "lonely.py").write_text(
        "from vsp.components.runtime.core import nowhere\n"
    )
    monkeypatch.setattr(packaging, "_RUNTIME_DIR", tmp_path)
    packaging._module_imports.cache_clear()
    try:
        with pytest.raises(ValueError, match="vsp.components.runtime.core.nowhere"):
            packaging.runtime_closure({"core.lonely"})
    finally:
        packaging._module_imports.cache_clear()


def test_cluster_components_do_not_carry_the_training_runtime():
    modules = packaging.component_modules(catalog.declarations()["delete_cluster"])
    assert "steps.delete_cluster" in modules
    # The Slurm client comes along for the in-use check before a delete; training does not.
    assert {"teardown.in_use", "slurm.api"} <= modules
    assert not {m for m in modules if m.startswith("training.") or m == "steps.train_on_cluster"}


@pytest.mark.parametrize("name", sorted(catalog.declarations()))
def test_every_embedded_module_imports_from_the_staged_copy_alone(name, tmp_path):
    """Import each embedded module in a fresh interpreter that cannot see the repository.

    ``-B``: no ``__pycache__`` may appear in the staged copy (what a step unpacks).
    """
    modules = packaging.component_modules(catalog.declarations()[name])
    staged = str(packaging.write_files(packaging.runtime_files(modules), tmp_path / "staged"))
    code = (
        "import importlib, sys\n"
        f"sys.path = [{staged!r}] + [p for p in sys.path if p and p != {str(REPO)!r}]\n"
        f"for m in {sorted(modules)!r}:\n"
        "    mod = importlib.import_module('vsp.components.runtime.' + m)\n"
        f"    assert mod.__file__.startswith({staged!r}), mod.__file__\n"
    )
    subprocess.run([sys.executable, "-I", "-B", "-c", code], check=True, cwd="/")
    assert not list(pathlib.Path(staged).rglob("__pycache__"))


def test_custom_job_component_does_not_embed_the_slurm_client():
    modules = packaging.component_modules(catalog.declarations()["train_custom_job"])
    assert {
        "steps.train_custom_job",
        "training.backends.custom_job",
        "training.driver",
        "training.supervisor",
    } <= modules
    assert not {m for m in modules if m.startswith(("slurm.", "cluster."))}


@pytest.mark.parametrize("name", sorted(catalog.declarations()))
def test_no_step_embeds_the_numpy_trainer_library(name):
    """Steps read manifests with the standard library (``manifests``); writing checkpoints and
    models (numpy) is the trainer's side."""
    modules = packaging.component_modules(catalog.declarations()[name])
    assert not modules & {"trainer.checkpoint", "trainer.model_files"}


@pytest.mark.slow
def test_commands_exec_into_python_so_pid_1_gets_sigterm():
    command = catalog.component_set()["delete_cluster"].component_spec.implementation.container
    install, executor = command.command[2], command.command[5]
    assert install.rstrip().endswith('&& exec "$0" "$@"')
    assert "_KFP_RUNTIME=true exec python3 -m kfp.dsl.executor_main" in executor


def test_an_unknown_command_shape_fails_loudly():
    with pytest.raises(RuntimeError, match="cannot make the step exec into Python"):
        packaging.exec_in_place(["sh", "-c", "python3 -m something_else"])
