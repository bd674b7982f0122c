"""The runtime's structure: its layers in one order, and no import cycle between its modules.

The order is written once, as import-linter contracts in ``pyproject.toml``
(``[tool.importlinter]``): steps > registry | teardown | training > slurm > cluster > trainer >
core, no kfp anywhere in the runtime, no numpy below the trainer library. ``lint-imports``
checks them here on the sources, and on a staged copy with a violation planted, to show it
catches one. Import-linter's layers do not look inside a package, so cycles between modules
(of one package or several) are found here from the sources with ``ast``; a planted one is
caught too.
"""

from __future__ import annotations

import ast
import os
import pathlib
import shutil
import subprocess
import sys

import tomllib

REPO = pathlib.Path(__file__).resolve().parents[2]
RUNTIME = REPO / "src" / "vsp" / "components" / "runtime"
PREFIX = "vsp.components.runtime."
LAYERS = [
    "steps",
    "registry | teardown | training",
    "slurm",
    "cluster",
    "trainer",
    "core",
]


def contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def lint_imports(config: pathlib.Path, path_entry: pathlib.Path | None = None):
    env = dict(os.environ)
    if path_entry is not None:
        env["PYTHONPATH"] = str(path_entry)
    lint = pathlib.Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), str(config), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
    )


def test_the_layer_rule_is_one_order_over_every_runtime_package():
    (layers,) = [c for c in contracts() if c["type"] == "layers"]
    assert [layer.replace(PREFIX, "") for layer in layers["layers"]] == LAYERS
    named = {name.strip() for layer in LAYERS for name in layer.split("|")}
    packages = {p.name for p in RUNTIME.iterdir() if (p / "__init__.py").is_file()}
    assert named == packages
    assert [p.name for p in RUNTIME.glob("*.py")] == ["__init__.py"]


def test_the_runtime_keeps_its_contracts():
    done = lint_imports(REPO / "pyproject.toml")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "3 kept, 0 broken" in done.stdout


def staged_runtime(root: pathlib.Path) -> pathlib.Path:
    """A copy of the runtime as package ``vsp.components.runtime`` under ``root``."""
    for package in (root / "vsp", root / "vsp" / "components"):
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("")
    shutil.copytree(
        RUNTIME, root / "vsp" / "components" / "runtime", ignore=shutil.ignore_patterns("*.pyc")
    )
    return root / "vsp" / "components" / "runtime"


def test_a_planted_layer_violation_is_caught(tmp_path):
    runtime = staged_runtime(tmp_path / "staged")
    errors_module = runtime / "core" / "errors.py"
    errors_module.write_text(
        errors_module.read_text() + "\nfrom vsp.components.runtime.steps import delete_cluster\n"
    )
    config = tmp_path / "pyproject.toml"
    config.write_text((REPO / "pyproject.toml").read_text())
    done = lint_imports(config, tmp_path / "staged")
    assert done.returncode == 1, done.stdout[-3000:]
    said = " ".join(done.stdout.split())  # lint-imports wraps long lines
    assert "2 kept, 1 broken" in said
    assert (
        "vsp.components.runtime.core.errors -> vsp.components.runtime.steps.delete_cluster" in said
    )


def module_imports(sources: dict[str, str]) -> dict[str, set[str]]:
    """``{module: runtime modules it imports}`` for sources given as ``{dotted name: text}``."""
    found: dict[str, set[str]] = {}
    for name, source in sources.items():
        targets = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if not node.module.startswith(PREFIX):
                    continue
                dotted = node.module[len(PREFIX) :]
                if dotted in sources:
                    targets.add(dotted)
                targets.update(f"{dotted}.{a.name}" for a in node.names)
        found[name] = targets & set(sources)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(groups)


def runtime_sources() -> dict[str, str]:
    return {
        ".".join(p.relative_to(RUNTIME).with_suffix("").parts): p.read_text()
        for p in RUNTIME.rglob("*.py")
        if p.name != "__init__.py"
    }


def test_no_import_cycle_between_runtime_modules():
    sources = runtime_sources()
    assert len(sources) > 80
    assert cycles(module_imports(sources)) == []


def test_a_planted_module_cycle_is_caught():
    sources = runtime_sources()
    sources["training.goodput"] += "\nfrom vsp.components.runtime.training import metrics\n"
    assert cycles(module_imports(sources)) == [["training.goodput", "training.metrics"]]
