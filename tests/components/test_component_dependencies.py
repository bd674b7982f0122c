"""Each compiled component needs nothing its YAML does not install.

Two checks, both from ``compiled/components/*.yaml`` as users deploy them:

* computed: every third-party import of the embedded runtime and of the component's program
  belongs to a distribution the YAML installs, or to one of their dependencies (resolved from
  the installed packages' metadata, not a hand-written list);
* executed: in a fresh virtual environment, the YAML's own install stage runs unchanged, then the
  step's program is loaded as the executor loads it and every embedded module is imported.
"""

from __future__ import annotations

import ast
import collections
import importlib.metadata
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.components import compiled_steps
from vsp.pipelines.local import step_envs

NAMES = compiled_steps.component_names()
_NAME = re.compile(r"^[A-Za-z0-9._-]+")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    return _canonical(_NAME.match(requirement.strip()).group(0))


def _dependency_closure(roots: list[str]) -> set[str]:
    """The declared distributions and everything they require (markers evaluated here)."""
    from packaging.requirements import Requirement  # noqa: PLC0415

    seen: set[str] = set()
    pending = list(roots)
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
                continue
            pending.append(_canonical(requirement.name))
    return seen


def _top_level_imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def undeclared_imports(step: compiled_steps.CompiledStep) -> dict[str, str]:
    """Third-party imports of a step that no installed requirement provides, with the
    distribution each one comes from."""
    sources = [
        data.decode() for path, data in step.embedded_files().items() if path.endswith(".py")
    ]
    program = step.program
    imports = set().union(*(_top_level_imports(s) for s in [*sources, program]))
    third_party = imports - set(sys.stdlib_module_names) - {"__future__", "vsp"}
    allowed = _dependency_closure([_requirement_name(r) for r in step.requirements()])
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for name in sorted(third_party):
        distributions = {_canonical(d) for d in providers.get(name, [name])}
        if not distributions & allowed:
            missing[name] = ", ".join(sorted(distributions))
    return missing


@pytest.mark.parametrize("name", NAMES)
def test_every_import_of_a_component_is_installed_by_its_yaml(name):
    step = compiled_steps.CompiledStep.load(name)
    assert undeclared_imports(step) == {}


def test_the_check_catches_an_undeclared_import():
    """A step that imports numpy without installing it is reported (as on the main branch
    before the trainer library left the step code)."""
    step = compiled_steps.CompiledStep.load("register_model")
    planted = step.program.replace("def register_model(", "import numpy\n\ndef register_model(")
    command = list(step.command)
    command[step.program_index] = planted
    changed = compiled_steps.CompiledStep(step.name, command, [], "")
    assert undeclared_imports(changed) == {"numpy": "numpy"}


def _install_groups() -> dict[str, list[compiled_steps.CompiledStep]]:
    groups = collections.defaultdict(list)
    for name in NAMES:
        step = compiled_steps.CompiledStep.load(name)
        groups[step.install_stage].append(step)
    return groups


_CHECK = """
import importlib, runpy, sys
namespace = runpy.run_path(sys.argv[1])  # what kfp's executor_main does with the program file
assert callable(namespace[sys.argv[2]])
for module in sys.argv[3:]:
    importlib.import_module(module)
print("imported", len(sys.argv) - 3, "modules of", sys.argv[2])
"""


@pytest.mark.slow
@pytest.mark.parametrize("group", range(len(_install_groups())))
def test_every_component_imports_in_a_fresh_venv_with_only_its_declared_packages(group, tmp_path):
    """The YAML's install stage, unchanged but for the interpreter path (as kfp.local's venv
    runner rewrites it), in a fresh venv; then each step's program and modules load there.

    The fresh venv sees the base environment of the stage's install list (``step_envs``), as
    every step of a faithful local run does: built once per install list by running the stage's
    own ``pip install`` commands, verbatim, in a new venv, and never written after; so the
    stage's install finds its requirements present, and anything else stays out.
    """
    install_stage, steps = sorted(_install_groups().items())[group]
    commands = step_envs.install_commands([install_stage])
    assert commands, "the stage installs nothing"
    with step_envs.step_environment(commands) as python:
        environment = {
            k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")
        }
        environment["PATH"] = f"{os.path.dirname(python)}{os.pathsep}{environment.get('PATH', '')}"
        for step in steps:
            program = step.write_program(tmp_path / step.name)
            command = [
                "sh",
                "-c",
                install_stage.replace("python3", python),
                python,
                "-c",
                _CHECK,
                str(program),
                step.name,
                *[m for m in step.runtime_modules() if m.startswith("vsp.components.runtime.")],
            ]
            done = subprocess.run(
                command, cwd=tmp_path, env={**environment, "_KFP_RUNTIME": "true"},
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            assert done.returncode == 0, (
                f"{step.name}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
            assert f"of {step.name}" in done.stdout
        # The stages found every requirement in the base: the venv's own installs are pip's.
        site = subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        own = sorted(p.name.split("-")[0] for p in pathlib.Path(site).glob("*.dist-info"))
        assert own in ([], ["pip"]), own
        numpy = subprocess.run([python, "-c", "import numpy"], capture_output=True, env=environment)
        assert numpy.returncode != 0, "the venv must hold only what the YAML installs"
