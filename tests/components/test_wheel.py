"""The built wheel installs exactly one import root, ``vsp``, holding every package of the tree,
ships the compiled templates, and its public API works from a fresh venv."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import venv
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SRC = REPO / "src"


def expected_packages() -> set[str]:
    """Every package directory of the source tree (src/vsp), as its path inside the wheel."""
    return {
        init.parent.relative_to(SRC).as_posix()
        for init in (SRC / "vsp").rglob("__init__.py")
        if "__pycache__" not in init.parts
    }


def layout_problems(names: list[str], expected: set[str]) -> list[str]:
    """What is wrong with a wheel's file list: other top-level names, missing packages."""
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    problems = [f"top-level name {t!r} besides vsp" for t in sorted(tops - {"vsp"})]
    packages = {n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")}
    problems += [f"package {p} missing" for p in sorted(expected - packages)]
    return problems


@pytest.fixture(scope="module")
def wheel_path(tmp_path_factory) -> pathlib.Path:
    # Built from a copy: setuptools writes build/ and egg-info next to the sources.
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(SRC / "vsp", source / "src" / "vsp", ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheel_names(wheel_path) -> list[str]:
    with zipfile.ZipFile(wheel_path) as archive:
        return archive.namelist()


@pytest.mark.slow
def test_the_wheel_has_one_root_and_every_package(wheel_names):
    expected = expected_packages()
    assert "vsp/components/runtime/core" in expected and len(expected) >= 14
    assert layout_problems(wheel_names, expected) == []
    assert "vsp/components/runtime/core/rest.py" in wheel_names
    assert not [n for n in wheel_names if n.startswith("vsp/tests") or "__pycache__" in n]


@pytest.mark.slow
def test_the_wheel_ships_every_compiled_template(wheel_names):
    shipped = sorted(
        n for n in wheel_names if n.startswith("vsp/compiled/") and n.endswith(".yaml")
    )
    committed = sorted(
        p.relative_to(SRC).as_posix() for p in (SRC / "vsp" / "compiled").rglob("*.yaml")
    )
    assert shipped == committed
    assert "vsp/compiled/components/train_on_cluster.yaml" in shipped


# Run from a folder outside the repository, in a venv holding the wheel: the components come
# from the installed package, the template from its package data.
PUBLIC_API_CHECK = """
import vsp.components
from vsp.components import train_on_cluster
print(train_on_cluster)
print(type(train_on_cluster).__name__, train_on_cluster.name)
loaded = vsp.components.load("train_on_cluster")
print(type(loaded).__name__, loaded.name)
print(vsp.components.__file__)
print(vsp.components.compiled_path("train_on_cluster"))
import kfp
print(kfp.__file__)
"""


@pytest.mark.slow
def test_the_installed_wheel_serves_the_public_api(wheel_path, tmp_path):
    # A venv of its own, holding the wheel and what the wheel itself requires, nothing else:
    # no system packages, no packages of the environment running the tests, not the repo.
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(system_site_packages=False, with_pip=False).create(env_dir)
    python = str(env_dir / "bin" / "python")
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "-q", str(wheel_path)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [python, "-c", PUBLIC_API_CHECK],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = out.stdout.strip().splitlines()
    assert lines[1:3] == ["PythonComponent train-on-cluster", "YamlComponent train-on-cluster"]
    site = str(env_dir)
    assert lines[3].startswith(site) and lines[3].endswith("vsp/components/__init__.py")
    assert lines[4].startswith(site)
    assert lines[4].endswith("vsp/compiled/components/train_on_cluster.yaml")
    assert lines[5].startswith(site), "kfp must come from the venv the test made"


def test_a_second_root_or_a_missing_package_is_caught():
    names = ["vsp/__init__.py", "pipelines/__init__.py", "x-0.1.dist-info/METADATA"]
    assert layout_problems(names, {"vsp", "vsp/components"}) == [
        "top-level name 'pipelines' besides vsp",
        "package vsp/components missing",
    ]
