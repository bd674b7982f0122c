"""Compiles every pipeline and component into reproducible YAML templates.

``compile_all(out_dir)`` writes ``{out_dir}/pipelines/<name>.yaml`` and
``{out_dir}/components/<name>.yaml``. The output is a pure function of the sources: the
embedded runtime archive has fixed names, times, owners and modes
(``vsp.components.packaging.runtime_archive``).
"""

from __future__ import annotations

import os
import pathlib

from kfp import compiler

from vsp.components import catalog, packaging
from vsp.pipelines.definitions import catalog as pipeline_catalog


def _compile_one(obj, path: pathlib.Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(obj, str(path))


def compile_all(
    out_dir: str | os.PathLike, options: packaging.ImageOptions = packaging.STOCK_IMAGE
) -> list[pathlib.Path]:
    """Compiles all pipelines and components.

    Args:
        out_dir: Destination folder (``compiled/`` in the repository).
        options: Base image choice; the default is a stock Python image with pip installs.

    Returns:
        The written files, sorted.
    """
    out = pathlib.Path(out_dir)
    components = catalog.component_set(options)
    written = []
    for name, component in sorted(components.items()):
        path = out / "components" / f"{name}.yaml"
        _compile_one(component, path)
        written.append(path)
    for name, build in sorted(pipeline_catalog.PIPELINES.items()):
        path = out / "pipelines" / f"{name.replace('-', '_')}.yaml"
        _compile_one(build(components), path)
        written.append(path)
    return sorted(written)
