"""Arguments of a template run locally are checked before kfp.local sees them.

A required parameter left out made kfp.local fail deep inside its executor with
``ValueError: Unknown value type:``; ``coerce_arguments`` names it first.
"""

import pytest
from kfp import compiler, components, dsl

from vsp.components.runtime.core import errors
from vsp.pipelines.local import run


@dsl.component(base_image="python:3.11")
def _echo(zone: str, rate: float) -> str:
    return f"{zone} {rate}"


@dsl.pipeline(name="arguments-check")
def _pipeline(zone: str, network: str, rate: float = 0.5):
    _echo(zone=zone, rate=rate)
    _echo(zone=network, rate=rate)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("template") / "arguments_check.yaml"
    compiler.Compiler().compile(_pipeline, str(path))
    return components.load_component_from_file(str(path))


def test_a_missing_required_parameter_is_named_with_its_fix(template):
    with pytest.raises(errors.UserError) as caught:
        run.coerce_arguments(template, {"rate": 1})
    assert str(caught.value) == (
        "missing parameters ['network', 'zone']: the pipeline has no default for them. Fix: "
        "give each a value (`--param NAME=VALUE` with vsp run-local, or the arguments mapping)."
    )


def test_given_parameters_pass_and_whole_numbers_become_floats(template):
    assert run.coerce_arguments(template, {"zone": "z", "network": "n", "rate": 1}) == {
        "zone": "z",
        "network": "n",
        "rate": 1.0,
    }
    assert run.coerce_arguments(template, {"zone": "z", "network": "n"}) == {
        "zone": "z",
        "network": "n",
    }


def test_an_unknown_parameter_is_refused_before_a_missing_one(template):
    with pytest.raises(errors.UserError, match=r"unknown parameters \['zon'\]"):
        run.coerce_arguments(template, {"zon": "z"})
