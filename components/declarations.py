"""Keeps the plain component functions out of reach: their names resolve to the built components.

The functions in ``vsp.components.cluster``, ``.training`` and the other declaration modules are
not usable components by themselves: ``vsp.components.catalog`` builds each with the runtime
modules its body imports embedded in the template (see ``vsp.components.packaging``). Wrapping
one with ``dsl.component`` directly would compile, then fail in the step with
``ModuleNotFoundError: vsp.components.runtime``. So each declaration module keeps its functions
in ``DECLARATIONS`` (what the catalog builds from) and removes the module-level names; this
module's ``forward`` then makes ``from vsp.components.cluster import create_cluster`` give the
same built component as ``from vsp.components import create_cluster``.

Hand-written because it is a dozen lines of PEP 562 (module ``__getattr__``); no library
covers it.
"""

from __future__ import annotations

from collections.abc import Callable


def collect(*functions: Callable) -> dict[str, Callable]:
    """The declaration functions by name (their ``__name__`` is the component name)."""
    return {function.__name__: function for function in functions}


def forward(module_name: str, names: dict[str, Callable]) -> Callable[[str], object]:
    """A module ``__getattr__`` that serves ``names`` as the built components.

    Args:
        module_name: The declaration module's ``__name__`` (for the error message).
        names: The module's declarations, by component name.
    """

    def __getattr__(name: str) -> object:  # noqa: N807 - PEP 562 module hook
        if name in names:
            import vsp.components as public  # noqa: PLC0415 - imports kfp on first use

            return getattr(public, name)
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    return __getattr__
