"""Every component of the project, built as KFP components for an image choice.

``component_set(options)`` returns ``{name: component}``; pipelines are built from such a set so
that a template can target a stock Python image (the default) or a prebuilt one.
"""

from __future__ import annotations

import functools

from vsp.components import (
    cluster,
    cluster_teardown,
    custom_job,
    packaging,
    preflight,
    registration,
    training,
)

# The plain declaration functions, by component name (the modules expose only the built ones).
COMPONENT_FUNCTIONS = dict(
    sorted(
        item
        for module in (cluster, cluster_teardown, custom_job, preflight, registration, training)
        for item in module.DECLARATIONS.items()
    )
)
# Requirements a component needs beyond the runtime's (pip specifiers), by component name. None
# today: ``register_model``'s ``google.VertexModel`` output type is embedded
# (``vsp.components.artifact_types``) rather than installed with GCPC.
EXTRA_PACKAGES: dict[str, tuple[str, ...]] = {}


def component_set(options: packaging.ImageOptions = packaging.STOCK_IMAGE) -> dict:
    """The KFP components, built once per image choice.

    Args:
        options: The image every step runs in (default: a stock Python image with the
            requirements pip-installed at step start, as ``compiled/components`` holds).

    Returns:
        ``{component name: component}`` for every name of ``COMPONENT_FUNCTIONS``.
    """
    return _built(options)


@functools.cache  # one key per image choice, however the caller passes it
def _built(options: packaging.ImageOptions) -> dict:
    return {
        name: packaging.build_component(func, options, EXTRA_PACKAGES.get(name, ()))
        for name, func in COMPONENT_FUNCTIONS.items()
    }
