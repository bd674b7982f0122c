"""Every component of the project, built for an image choice.

``component_set(options)`` returns ``{name: component}``; pipelines are built from such a set so
that a template can target a stock Python image (the default) or a prebuilt one.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from typing import Any

from vsp.components import declare, packaging

# The modules that declare components (``@declare.component``), each imported once here.
DECLARATION_MODULES = (
    "vsp.components.cluster",
    "vsp.components.cluster_teardown",
    "vsp.components.custom_job",
    "vsp.components.preflight",
    "vsp.components.registration",
    "vsp.components.training",
)


def declarations() -> dict[str, Callable[..., Any]]:
    """The declaration functions of every component, by name (sorted)."""
    for module in DECLARATION_MODULES:
        importlib.import_module(module)
    return dict(sorted(declare.DECLARED.items()))


def component_set(options: packaging.ImageOptions = packaging.STOCK_IMAGE) -> dict[str, Any]:
    """The KFP components, built once per image choice.

    Args:
        options: The image every step runs in (default: a stock Python image with the
            requirements pip-installed at step start, as ``src/vsp/compiled/components`` holds).

    Returns:
        ``{component name: component}`` for every declared component.
    """
    return _built(options)


@functools.cache  # one key per image choice, however the caller passes it
def _built(options: packaging.ImageOptions) -> dict[str, Any]:
    declared = declarations()
    if options == packaging.STOCK_IMAGE:
        return {name: _declared_component(name) for name in declared}
    return {name: packaging.build_component(f, options) for name, f in declared.items()}


def _declared_component(name: str) -> Any:
    """The component a declaration module holds under ``name`` (built for the stock image)."""
    for module in DECLARATION_MODULES:
        found = getattr(importlib.import_module(module), name, None)
        if found is not None:
            return found
    raise LookupError(name)
