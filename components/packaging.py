"""How components are built: a stock Python image plus the runtime embedded in the YAML.

Each component is a lightweight KFP Python component whose compiled YAML carries
``components/runtime`` as an embedded archive (kfp's ``embedded_artifact_path``), so a template
runs on a stock ``python`` image with only pip-installable dependencies and no image of ours.
``ImageOptions(base_image=..., install_packages=False)`` instead targets a prebuilt image that
already has the requirements (and kfp) installed; local runs use it with the current interpreter.

Only ``*.py`` files are staged, so caches and editor files never leak into templates. The
archive kfp writes is not byte-reproducible (tar and gzip record times); ``pipelines.compile``
normalises it after compiling.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import shutil
import tempfile
from collections.abc import Callable

from kfp import dsl

DEFAULT_BASE_IMAGE = "python:3.11-slim"
RUNTIME_REQUIREMENTS = (
    "google-auth>=2.20,<3",
    "google-api-core>=2.15,<3",
    "requests>=2.31,<3",
    "pydantic>=2.6,<3",
    "PyYAML>=6,<7",
)
_RUNTIME_DIR = pathlib.Path(__file__).resolve().parent / "runtime"
# Runtime modules no component uses yet, left out of the embedded archive: kfp passes the archive
# as one command argument, and Linux refuses a single argument over 128 KiB (E2BIG). The lasting
# fix is to embed only the modules each component imports.
NOT_EMBEDDED = frozenset({"model_registry.py", "teardown.py"})


@dataclasses.dataclass(frozen=True)
class ImageOptions:
    """The image a component runs in.

    Attributes:
        base_image: Container image of every step.
        install_packages: True for a stock image (kfp and the runtime requirements are
            pip-installed when the step starts); False for an image that already has them.
    """

    base_image: str = DEFAULT_BASE_IMAGE
    install_packages: bool = True


STOCK_IMAGE = ImageOptions()
PREINSTALLED = ImageOptions(install_packages=False)


@functools.lru_cache(maxsize=1)
def staged_runtime() -> str:
    """A directory holding ``components/__init__.py`` and the ``*.py`` of ``components/runtime``.

    Built once per process in a temporary directory removed at exit.
    """
    root = pathlib.Path(tempfile.mkdtemp(prefix="vsp-runtime-"))
    package = root / "components"
    package.mkdir()
    (package / "__init__.py").write_text('"""Embedded runtime of vertex-slurm-pipelines."""\n')
    for source in sorted(_RUNTIME_DIR.rglob("*.py")):
        if source.name in NOT_EMBEDDED:
            continue
        target = package / "runtime" / source.relative_to(_RUNTIME_DIR)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    import atexit  # noqa: PLC0415

    atexit.register(shutil.rmtree, root, True)
    return os.fspath(root)


def build_component(func: Callable, options: ImageOptions) -> Callable:
    """Turns a component function into a KFP component with the embedded runtime.

    Args:
        func: The component function (its body imports from ``components.runtime``).
        options: Image and install choice.
    """
    return dsl.component(
        func,
        base_image=options.base_image,
        packages_to_install=list(RUNTIME_REQUIREMENTS) if options.install_packages else [],
        install_kfp_package=options.install_packages,
        embedded_artifact_path=staged_runtime(),
    )
