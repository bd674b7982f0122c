"""The embedded runtime of each component: exactly the modules its body needs, and enough."""

import ast
import pathlib
import subprocess
import sys

import pytest

from components import catalog, packaging

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_runtime_imports_reads_every_import_form():
    tree = ast.parse(
        "from components.runtime import a, b\n"
        "from components.runtime.c import thing\n"
        "import components.runtime.d\n"
        "import os\n"
        "from components import catalog\n"
        "def f():\n"
        "    from components.runtime import e\n"
    )
    assert packaging.runtime_imports(tree) == {"a", "b", "c", "d", "e"}


def test_closure_follows_imports_transitively():
    closure = packaging.runtime_closure({"cluster_step"})
    # cluster_step -> cluster_ops -> operations -> polling: found through two hops.
    assert {"cluster_step", "cluster_ops", "operations", "polling", "errors"} <= closure
    assert "training_run" not in closure and "model_registry" not in closure


def test_an_import_of_a_missing_module_names_it(monkeypatch, tmp_path):
    (tmp_path / "lonely.py").write_text("from components.runtime import nowhere\n")
    monkeypatch.setattr(packaging, "_RUNTIME_DIR", tmp_path)
    packaging._module_imports.cache_clear()
    try:
        with pytest.raises(ValueError, match="components.runtime.nowhere"):
            packaging.runtime_closure({"lonely"})
    finally:
        packaging._module_imports.cache_clear()


def test_cluster_components_do_not_carry_the_training_runtime():
    modules = packaging.component_modules(catalog.COMPONENT_FUNCTIONS["delete_cluster"])
    assert "cluster_step" in modules
    # The Slurm client comes along for the in-use check before a delete; training does not.
    assert {"cluster_in_use", "slurm_api"} <= modules
    assert not {m for m in modules if m.startswith(("training_", "custom_job", "train_step"))}


@pytest.mark.parametrize("name", sorted(catalog.COMPONENT_FUNCTIONS))
def test_every_embedded_module_imports_from_the_staged_copy_alone(name):
    """Import each staged module in a fresh interpreter that cannot see the repository.

    ``-B``: no ``__pycache__`` may appear in the staged copy, which is what gets embedded.
    """
    modules = packaging.component_modules(catalog.COMPONENT_FUNCTIONS[name])
    staged = packaging.staged_runtime(modules)
    code = (
        "import importlib, sys\n"
        f"sys.path = [{staged!r}] + [p for p in sys.path if p and p != {str(REPO)!r}]\n"
        f"for m in {sorted(modules)!r}:\n"
        "    mod = importlib.import_module('components.runtime.' + m)\n"
        f"    assert mod.__file__.startswith({staged!r}), mod.__file__\n"
    )
    subprocess.run([sys.executable, "-I", "-B", "-c", code], check=True, cwd="/")
    assert not list(pathlib.Path(staged).rglob("__pycache__"))


def test_custom_job_component_does_not_embed_the_slurm_client():
    modules = packaging.component_modules(catalog.COMPONENT_FUNCTIONS["train_custom_job"])
    assert {"custom_job_backend", "training_step", "training_run"} <= modules
    assert not {m for m in modules if m.startswith(("slurm_", "cluster_")) or m == "train_step"}


@pytest.mark.parametrize("name", sorted(catalog.COMPONENT_FUNCTIONS))
def test_no_step_embeds_the_numpy_trainer_library(name):
    """Steps read manifests with the standard library (``manifests``); writing checkpoints and
    models (numpy) is the trainer's side."""
    modules = packaging.component_modules(catalog.COMPONENT_FUNCTIONS[name])
    assert not modules & {"checkpoint", "model_dir"}


def test_commands_exec_into_python_so_pid_1_gets_sigterm():
    command = catalog.component_set()["delete_cluster"].component_spec.implementation.container
    install, executor = command.command[2], command.command[5]
    assert install.rstrip().endswith('&& exec "$0" "$@"')
    assert "_KFP_RUNTIME=true exec python3 -m kfp.dsl.executor_main" in executor


def test_an_unknown_command_shape_fails_loudly():
    with pytest.raises(RuntimeError, match="exec_in_place"):
        packaging.exec_in_place(["sh", "-c", "python3 -m something_else"])
