"""KFP components for Vertex AI training clusters and Spot training: the public API.

Use them in your own pipeline::

    from kfp import dsl
    from vsp.components import create_cluster, train_on_cluster, register_model

    @dsl.pipeline(name="my-training")
    def my_training(project: str):
        create = create_cluster(project=project, location="us-central1", cluster_id="mine")
        train_on_cluster(..., cluster_name=create.outputs["cluster_name"])

Every name of ``COMPONENTS`` is the built KFP component (declared with ``@component`` in
``vsp.components.cluster``, ``.training`` and the other declaration modules, with the runtime
it calls embedded, for a stock ``python`` image), the same one the project's pipelines and
``src/vsp/compiled/components/NAME.yaml`` use. ``load(name)`` loads that compiled YAML,
shipped in the wheel, and ``compiled_path(name)`` gives its path. ``component_set(options)``
builds every component for another image (e.g. ``packaging.PREINSTALLED`` for an environment
that already has the requirements).

The names load lazily (PEP 562 ``__getattr__``): the trainer library and the steps import
``vsp.components.runtime``, which runs this file, and must not import kfp.
"""

from __future__ import annotations

import importlib
import importlib.resources
import pathlib
from typing import Any

# Component name -> the module that declares it.
_DECLARED_IN = {
    "check_run_parameters": "preflight",
    "create_cluster": "cluster",
    "decide_teardown": "cluster_teardown",
    "delete_cluster": "cluster",
    "ensure_slurm_account": "training",
    "finalize_cluster": "cluster_teardown",
    "finalize_custom_jobs": "custom_job",
    "keep_cluster": "cluster_teardown",
    "reap_expired_clusters": "cluster_teardown",
    "register_model": "registration",
    "shrink_cluster": "cluster_teardown",
    "train_custom_job": "custom_job",
    "train_on_cluster": "training",
}
COMPONENTS = tuple(_DECLARED_IN)
__all__ = [*COMPONENTS, "COMPONENTS", "compiled_path", "component_set", "load"]


def _check_name(name: str) -> str:
    if name not in COMPONENTS:
        raise ValueError(f"no component named {name!r}. Fix: use one of {', '.join(COMPONENTS)}.")
    return name


def compiled_path(name: str) -> pathlib.Path:
    """The compiled YAML of a component, as shipped in the package (``vsp/compiled``).

    Args:
        name: Component name, e.g. ``train_on_cluster``.

    Returns:
        The path of ``components/NAME.yaml`` in the installed ``vsp.compiled`` package.

    Raises:
        ValueError: ``name`` is not a component of this package.
        FileNotFoundError: The package holds no compiled YAML for it (a source checkout
            without ``vsp compile``).
    """
    folder = importlib.resources.files("vsp.compiled") / "components"
    resource = folder / f"{_check_name(name)}.yaml"
    path = pathlib.Path(str(resource))
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist. Fix: run `vsp compile` in the source checkout, or "
            "reinstall vertex-slurm-pipelines."
        )
    return path


def load(name: str) -> Any:
    """The component loaded from its compiled YAML (``kfp.components.load_component_from_file``).

    The result behaves like the built component (``from vsp.components import NAME``) in a
    pipeline, and is exactly the template the release shipped.

    Args:
        name: Component name, e.g. ``train_on_cluster``.

    Raises:
        ValueError: ``name`` is not a component of this package.
        FileNotFoundError: Its compiled YAML is missing (see ``compiled_path``).
    """
    from kfp import components as kfp_components  # noqa: PLC0415 - kfp import is slow

    return kfp_components.load_component_from_file(str(compiled_path(name)))


def component_set(options: Any = None) -> dict[str, Any]:
    """Every component built for an image choice (``vsp.components.packaging.ImageOptions``).

    Args:
        options: Image and install choice; None = a stock Python image with pip installs.

    Returns:
        ``{name: component}`` for every name of ``COMPONENTS``.
    """
    from vsp.components import catalog, packaging  # noqa: PLC0415 - imports kfp

    return catalog.component_set(options or packaging.STOCK_IMAGE)


def __getattr__(name: str) -> Any:
    if name in _DECLARED_IN:
        module = importlib.import_module(f"{__name__}.{_DECLARED_IN[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *COMPONENTS})
