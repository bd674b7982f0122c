"""``@component``: the one way a component of this project is declared.

A declaration is a function whose signature is the component's interface (kfp reads its types,
defaults and docstring) and whose body hands its parameters to the component's entry module in
the runtime::

    @component
    def delete_cluster(project: str, location: str, cluster_id: str, ...) -> bool:
        \"\"\"Deletes a Vertex AI training cluster ... Args: ...\"\"\"
        params = dict(locals())
        from vsp.components.runtime.steps import delete_cluster

        return delete_cluster.main(**params)

``component`` returns the KFP component built for a stock Python image, with the runtime
modules the body imports embedded in it (``vsp.components.packaging``), and records the
declaration so ``vsp.components.catalog`` can build every component for another image.

Rules for declarations: only kfp and typing names in the signatures (the step evaluates them
before the runtime is unpacked), no postponed annotations in their modules (kfp cannot read
them), and a body of exactly the three statements above.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vsp.components import packaging

# Component name -> its declaration function, in declaration order.
DECLARED: dict[str, Callable[..., Any]] = {}


def component(func: Callable[..., Any]) -> Any:
    """Declares ``func`` a component of this project.

    Args:
        func: The declaration (see the module docstring).

    Returns:
        The KFP component built for the stock image (``packaging.STOCK_IMAGE``).

    Raises:
        ValueError: A component of that name is already declared.
    """
    if func.__name__ in DECLARED and DECLARED[func.__name__] is not func:
        raise ValueError(f"component {func.__name__!r} is declared twice")
    DECLARED[func.__name__] = func
    return packaging.build_component(func, packaging.STOCK_IMAGE)
