"""No folder or module of the repository shadows a package where the tests put it on ``sys.path``.

``python -m pytest`` puts the repository root first on ``sys.path``, and pytest (its default
``prepend`` import mode, with no ``__init__.py`` in ``tests/``) inserts the folder of every test
module and conftest. A folder there named like a package, ``docker/`` say, is imported in its
place: as a namespace package when the real one is not installed (``import docker`` then gives
an empty module), or before it when it has an ``__init__.py``. So no such folder or module may
carry the import name of an installed distribution, of a well-known package, or of the
standard library.
"""

from __future__ import annotations

import importlib.metadata
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]
OWN_DISTRIBUTION = "vertex-slurm-pipelines"
# Import names that must stay free even where the distribution is not installed here.
WELL_KNOWN = frozenset(
    "docker google kfp yaml requests numpy torch jax jaxlib grpc urllib3 click pydantic croniter "
    "pytest setuptools pip wheel six attr attrs certifi idna charset_normalizer packaging "
    "typing_extensions protobuf proto tensorflow keras scipy pandas sklearn matplotlib "
    "hypothesis jsonschema tabulate kubernetes boto3 botocore ruff mkdocs".split()
)


def shadowed_names() -> frozenset[str]:
    """Every import name a repository folder or module must not take."""
    installed = {
        name
        for name, distributions in importlib.metadata.packages_distributions().items()
        if OWN_DISTRIBUTION not in distributions
    }
    return frozenset(installed | WELL_KNOWN | set(sys.stdlib_module_names))


def import_roots(repo: pathlib.Path) -> set[pathlib.Path]:
    """The folders the test run puts on ``sys.path``: the root, and each test file's basedir.

    pytest's basedir of a file is the parent of its topmost enclosing package (the file's own
    folder when that folder has no ``__init__.py``).
    """
    roots = {repo}
    tests = repo / "tests"
    for path in tests.rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        if not (path.name.startswith("test_") or path.name == "conftest.py"):
            continue
        folder = path.parent
        while (folder / "__init__.py").is_file():
            folder = folder.parent
        roots.add(folder)
    return roots


def shadowing(repo: pathlib.Path, names: frozenset[str]) -> list[str]:
    """``folder/entry`` for every folder or ``*.py`` module that takes one of ``names``."""
    found = []
    for root in sorted(import_roots(repo)):
        for entry in sorted(root.iterdir()):
            if entry.name.startswith(".") or entry.name == "__pycache__":
                continue
            if entry.is_dir():
                name = entry.name
            elif entry.suffix == ".py":
                name = entry.stem
            else:
                continue
            if name in names:
                found.append(entry.relative_to(repo).as_posix())
    return found


def test_no_repository_name_shadows_a_package():
    assert shadowing(REPO, shadowed_names()) == []


def test_a_planted_yaml_folder_is_caught(tmp_path):
    (tmp_path / "yaml").mkdir()
    (tmp_path / "tests" / "pipelines" / "docker").mkdir(parents=True)
    (tmp_path / "tests" / "pipelines" / "test_x.py").write_text("")
    (tmp_path / "tests" / "logging.py").write_text("")
    (tmp_path / "tests" / "conftest.py").write_text("")
    (tmp_path / "ok").mkdir()
    assert shadowing(tmp_path, shadowed_names()) == [
        "yaml",
        "tests/logging.py",
        "tests/pipelines/docker",
    ]


def test_installed_distributions_count_too():
    # The names come from the environment, not only the fixed list: pytest's own is there.
    assert "_pytest" in shadowed_names() and "yaml" in shadowed_names()
