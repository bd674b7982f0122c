"""One default per parameter: a pipeline, the components it feeds and the runtime they call agree.

A component reused on its own, or the runtime called directly, must behave as the pipeline does
when nobody sets the parameter. Pipeline and component defaults are read from the compiled
templates (what users run); runtime defaults from the signatures of the functions and
dataclasses each component calls (``RUNTIME_ENTRIES``). Only "not set" spellings are equated
(``None``, ``""``, empty containers; ``0`` where the component documents 0 as "not set" and
maps it to ``None``, listed in ``ZERO_MEANS_UNSET``).
"""

from __future__ import annotations

import dataclasses
import inspect
import pathlib

import yaml

from vsp.components import catalog
from vsp.components.runtime.steps import (
    create_cluster,
    delete_cluster,
    train_custom_job,
    train_on_cluster,
)
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.training import recovery
from vsp.components.runtime.training.backends import custom_job_spec

COMPILED = pathlib.Path(__file__).resolve().parents[2] / "src" / "vsp" / "compiled" / "pipelines"

# Component -> (runtime callable, {runtime parameter: component parameter it comes from}); a
# runtime parameter not in the map is compared with the component parameter of the same name.
RUNTIME_ENTRIES = {
    "decide_teardown": [(teardown_inputs.TeardownInputs, {})],
    "check_run_parameters": [(teardown_inputs.TeardownInputs, {})],
    "train_on_cluster": [(train_on_cluster.train_on_cluster, {}), (recovery.SpotRecovery, {})],
    "train_custom_job": [
        (train_custom_job.train_custom_job, {}),
        (custom_job_spec.CustomJobTraining, {"timeout_seconds": "attempt_timeout_seconds"}),
    ],
    "create_cluster": [(create_cluster.create_cluster, {})],
    "delete_cluster": [(delete_cluster.delete_cluster, {})],
}
# (component, parameter): the component turns 0 into None ("not set") before the runtime.
ZERO_MEANS_UNSET = {
    ("train_on_cluster", "time_limit_minutes"),
    ("decide_teardown", "shrunk_price_per_hour"),
    ("check_run_parameters", "shrunk_price_per_hour"),
}
# (pipeline input, component input) pairs whose defaults differ on purpose, and why.
INTENTIONAL = {
    # The Slurm pipeline has no on-demand pool unless asked (ondemand_max_nodes=0, as the
    # components); with one, it falls back after 5 preemptions or an hour without Spot
    # capacity. The training component alone never falls back unless asked.
    ("fallback_after_preemptions", "train-on-cluster.fallback_after_preemptions"),
    ("capacity_wait_seconds", "train-on-cluster.capacity_wait_seconds"),
    # The parameter check mirrors train_on_cluster's defaults (the pipeline passes its own).
    ("fallback_after_preemptions", "check-run-parameters.fallback_after_preemptions"),
    ("capacity_wait_seconds", "check-run-parameters.capacity_wait_seconds"),
    # The Slurm pipeline builds its nodes (8 GPUs on the default machine) and asks for all of
    # them; the training component alone does not know the nodes, so it asks for none, and the
    # check compares with the nodes only when the pipeline says how many GPUs they have.
    ("gpus_per_node", "train-on-cluster.gpus_per_node"),
    ("gpus_per_node", "check-run-parameters.gpus_per_node"),
    ("accelerator_count", "check-run-parameters.accelerator_count"),
    # Likewise the machine and its accelerators: compared only when the pipeline names them.
    ("accelerator_type", "check-run-parameters.accelerator_type"),
    # The check alone has no cluster to name ('' = not checked); the pipeline passes its own.
    ("cluster_id", "check-run-parameters.cluster_id"),
    # The CustomJob pipeline counts Vertex's in-place restarts and polls a slower API.
    ("max_preemptions", "check-run-parameters.max_preemptions"),
    ("poll_seconds", "check-run-parameters.poll_seconds"),
    # The CustomJob pipeline is the GPU training template; the component alone asks for no
    # accelerator, the cheapest shape to try it with.
    ("accelerator_count", "train-custom-job.accelerator_count"),
    ("accelerator_type", "train-custom-job.accelerator_type"),
}
_UNSET = object()


def normal(value, zero_unset: bool = False):
    if value is None or value == "" or value == [] or value == {} or value == ():
        return _UNSET
    if zero_unset and value == 0:
        return _UNSET
    return value


def template_drift(spec: dict) -> list[str]:
    """Pipeline inputs whose default differs from that of a component input they feed."""
    roots = spec["root"]["inputDefinitions"]["parameters"]
    found = []

    def walk(dag: dict, mapping: dict[str, str]) -> None:
        for task_name, task in dag["tasks"].items():
            component = spec["components"][task["componentRef"]["name"]]
            forwarded = {}
            for name, source in task.get("inputs", {}).get("parameters", {}).items():
                root = mapping.get(source.get("componentInputParameter", ""))
                if root is not None:
                    forwarded[name] = root
            if "dag" in component:
                walk(component["dag"], forwarded)
                continue
            inputs = component.get("inputDefinitions", {}).get("parameters", {})
            for name, root in forwarded.items():
                mine, theirs = roots[root].get("defaultValue"), inputs[name].get("defaultValue")
                both = "defaultValue" in inputs[name] and "defaultValue" in roots[root]
                if both and (root, f"{task_name}.{name}") not in INTENTIONAL:
                    if normal(mine) != normal(theirs):
                        found.append(
                            f"{task_name}.{name}: pipeline {root}={mine!r}, component {theirs!r}"
                        )

    walk(spec["root"]["dag"], {name: name for name in roots})
    return found


def runtime_defaults(entry) -> dict:
    if dataclasses.is_dataclass(entry):
        return {
            f.name: f.default
            for f in dataclasses.fields(entry)
            if f.default is not dataclasses.MISSING
        }
    return {
        p.name: p.default
        for p in inspect.signature(entry).parameters.values()
        if p.default is not inspect.Parameter.empty
    }


def runtime_drift(component: str, entries: list) -> list[str]:
    mine = {
        p.name: p.default
        for p in inspect.signature(catalog.declarations()[component]).parameters.values()
        if p.default is not inspect.Parameter.empty
    }
    found = []
    for entry, renamed in entries:
        for runtime_name, theirs in runtime_defaults(entry).items():
            name = renamed.get(runtime_name, runtime_name)
            if name not in mine:
                continue
            zero = (component, name) in ZERO_MEANS_UNSET
            if normal(mine[name], zero) != normal(theirs, zero):
                found.append(f"{component}.{name}={mine[name]!r}, {entry.__qualname__} {theirs!r}")
    return found


def test_pipelines_and_their_components_agree():
    for path in sorted(COMPILED.glob("*.yaml")):
        assert template_drift(yaml.safe_load(path.read_text())) == [], path.name


def test_components_and_the_runtime_they_call_agree():
    drift = [
        line for name, entries in RUNTIME_ENTRIES.items() for line in runtime_drift(name, entries)
    ]
    assert drift == []


def test_planted_drift_is_caught():
    spec = yaml.safe_load((COMPILED / "slurm_spot_training.yaml").read_text())
    spec["root"]["inputDefinitions"]["parameters"]["failure_keep_minutes"]["defaultValue"] = 5.0
    assert template_drift(spec) == [
        f"{task}.failure_keep_minutes: pipeline failure_keep_minutes=5.0, component 60.0"
        for task in ("check-run-parameters", "finalize-cluster")
    ]

    @dataclasses.dataclass
    class Drifted:
        delay_penalty_per_hour: float = 0.0

    assert runtime_drift("decide_teardown", [(Drifted, {})]) == [
        "decide_teardown.delay_penalty_per_hour=10.0, "
        "test_planted_drift_is_caught.<locals>.Drifted 0.0"
    ]
