"""Pipeline parameters taken from the components they feed, so each default is defined once.

A pipeline parameter that only passes a value on to a component takes that component's default
(read from the built component's spec, which kfp took from the declaration's signature), and an
option group (``training_options`` ...) may hold exactly the names its component takes from
``options`` (``step.option_names``).
"""

from __future__ import annotations

from typing import Any

from vsp.components.runtime.core import step


def defaults(component: Any) -> dict[str, Any]:
    """A built component's parameter defaults, by name (required parameters left out)."""
    inputs = component.component_spec.inputs or {}
    return {name: spec.default for name, spec in inputs.items() if spec.default is not None}


def option_names(component: Any) -> list[str]:
    """The names a component's ``options`` group may hold, sorted."""
    return step.option_names(component.component_spec.inputs or {})
