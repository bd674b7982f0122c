"""The runtime's dependency rules (written in ``vsp/components/runtime/__init__.py``).

Read from the sources with ``ast`` (every import, function bodies included), so a rule broken
anywhere fails here with the file and the import named. Each rule is also shown to catch a
planted violation.
"""

from __future__ import annotations

import ast
import pathlib

RUNTIME = pathlib.Path(__file__).resolve().parents[2] / "components" / "runtime"
PREFIX = "vsp.components.runtime."

# Subpackage -> the subpackages it may import (besides itself).
ALLOWED = {
    "core": set(),
    "trainer": {"core"},
    "training": {"core", "trainer"},
    "teardown": {"core", "cluster"},
    "registry": {"core", "trainer", "teardown", "training", "cluster"},
    "slurm": {"core", "cluster", "trainer", "training"},
    "cluster": {"core", "slurm", "teardown"},
}
# What step code (everything but ``trainer``) may import from ``trainer``: the numpy-free files.
TRAINER_FOR_STEPS = {"contract", "history", "manifests", "policy"}


def imports(source: str) -> list[str]:
    """Every module a source imports, as dotted names (``from a import b`` gives ``a.b``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def violations(sources: dict[str, str]) -> list[str]:
    """Broken rules of runtime sources given as ``{"SUB/NAME.py": source}``."""
    found = []
    for path, source in sorted(sources.items()):
        sub = path.split("/")[0] if "/" in path else ""
        for name in imports(source):
            top = name.split(".")[0]
            if top == "kfp":
                found.append(f"{path}: imports kfp ({name}); the runtime never does")
            if top == "numpy" and sub != "trainer":
                found.append(f"{path}: imports numpy ({name}); only trainer/ may")
            if not name.startswith(PREFIX):
                continue
            target = name[len(PREFIX) :].split(".")
            other = target[0]
            if sub == "" or other == sub:
                continue
            if other not in ALLOWED.get(sub, set()):
                found.append(f"{path}: imports {other}/ ({name}); {sub}/ may import {ALLOWED[sub]}")
            if other == "trainer" and len(target) > 1 and target[1] not in TRAINER_FOR_STEPS:
                found.append(
                    f"{path}: imports trainer.{target[1]}; steps use contract, manifests, policy"
                )
    return found


def runtime_sources() -> dict[str, str]:
    return {str(p.relative_to(RUNTIME)): p.read_text() for p in RUNTIME.rglob("*.py")}


def test_every_module_sits_in_a_known_subpackage():
    subpackages = {p.parent.name for p in RUNTIME.rglob("*.py") if p.parent != RUNTIME}
    assert subpackages == set(ALLOWED)
    assert [p.name for p in RUNTIME.glob("*.py")] == ["__init__.py"]


def test_the_runtime_keeps_its_dependency_rules():
    assert violations(runtime_sources()) == []


def test_the_rules_are_written_where_the_runtime_says():
    text = (RUNTIME / "__init__.py").read_text()
    assert "Dependency rules" in text and "test_layers.py" in text


def test_planted_violations_are_caught():
    planted = {
        "core/errors.py": "from vsp.components.runtime.cluster import spec\n",
        "training/runner.py": "def f():\n    import kfp\n",
        "slurm/api.py": "import numpy as np\n",
        "registry/runner.py": "from vsp.components.runtime.trainer import checkpoint\n",
        "training/metrics.py": "from vsp.components.runtime.slurm.api import SlurmClient\n",
        "trainer/checkpoint.py": "import numpy\nfrom vsp.components.runtime.core import errors\n",
    }
    found = violations(planted)
    assert len(found) == 5, found
    assert [line.split(":")[0] for line in found] == [
        "core/errors.py",
        "registry/runner.py",
        "slurm/api.py",
        "training/metrics.py",
        "training/runner.py",
    ]
