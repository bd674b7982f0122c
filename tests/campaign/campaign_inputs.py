"""Bad inputs: hypothesis strategies of invalid specs and parameters, and the check of one.

Each bad input is a call of a runtime entry point (cluster create from a full spec or from flat
parameters, training options, the exit task's ``failure_keep_minutes``, model registration,
project and location). It must raise ``errors.UserError`` whose message tells how to fix it
(contains "fix") before any request reaches the emulator (its journal does not grow).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from tests.campaign import campaign_world as cw
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors
from vsp.components.runtime.registry import client as model_registry
from vsp.components.runtime.steps import create_cluster
from vsp.components.runtime.teardown import exit_task
from vsp.components.runtime.training import options_check

NOT_NUMBERS = st.sampled_from(["x", "1e999x", [1], {"a": 1}, True, math.nan, math.inf])
BAD_IDS = st.sampled_from(
    ["", "Upper", "1abc", "a" * 11, "has-dash", "has_under", "sp ace", "new\nline", "é", "../x"]
)
RESERVED = st.sampled_from(["vsp-managed", "vsp-expires-at", "vsp-pipeline-run", "vsp-x"])
BAD_TEXT = st.sampled_from(["a\nb", "x\r", "ok\nPartitionName=evil", "\0"])


@dataclasses.dataclass(frozen=True)
class BadInput:
    """One invalid input: the entry point it goes to, what is wrong, and the value."""

    entry: str
    what: str
    value: Any


def _set(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    node: Any = body
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    node[int(leaf) if leaf.isdigit() else leaf] = value
    return body


SPEC_MUTATIONS: dict[str, st.SearchStrategy[Any]] = {
    "nodePools.1.scalingSpec.maxNodeCount": st.one_of(st.integers(-(10**6), -1), NOT_NUMBERS),
    "nodePools.1.scalingSpec.minNodeCount": st.one_of(st.integers(-(10**6), -1), NOT_NUMBERS),
    "nodePools.0.machineSpec.machineType": st.sampled_from(["", 7, None, "n2 standard", "a\nb"]),
    "nodePools": st.sampled_from(["pools", 3, None, []]),
    "labels": st.sampled_from(["team=ml", 1, ["a"]]),
    "orchestratorSpec.slurmSpec.config.PreemptMode": BAD_TEXT,
    "orchestratorSpec.slurmSpec.loginNodePoolId": st.sampled_from(["", "nosuch", 3]),
    "displayName": st.sampled_from(["x" * 200, "a\nb", 5]),
}


@st.composite
def bad_inputs(draw: Any) -> BadInput:
    """A random invalid input for one of the entry points."""
    entry = draw(
        st.sampled_from(
            ["cluster_spec", "reserved_label", "cluster_id", "flat_params", "training"]
            + ["keep_minutes", "register", "project", "location"]
        )
    )
    if entry == "cluster_spec":
        path = draw(st.sampled_from(sorted(SPEC_MUTATIONS)))
        return BadInput(entry, path, draw(SPEC_MUTATIONS[path]))
    if entry == "reserved_label":
        return BadInput(entry, "labels", {draw(RESERVED): draw(st.sampled_from(["1", "true"]))})
    if entry == "cluster_id":
        return BadInput(entry, "cluster_id", draw(BAD_IDS))
    if entry == "flat_params":
        name = draw(st.sampled_from(["login_node_count", "spot_max_nodes", "ondemand_max_nodes"]))
        value = draw(st.one_of(st.integers(-1000, -1), NOT_NUMBERS))
        return BadInput(entry, name, value)
    if entry == "training":
        name = draw(st.sampled_from(sorted(options_check.BOUNDS) + ["command", "working_dir"]))
        if name == "command":
            return BadInput(entry, name, draw(st.sampled_from([[], "python x", [1], ["a\0"]])))
        if name == "working_dir":
            return BadInput(entry, "working_directory", draw(st.sampled_from(["rel", "/a\nb", 3])))
        low, high, _ = options_check.BOUNDS[name]
        out = st.one_of(st.floats(max_value=low, exclude_max=True), st.floats(min_value=high + 1))
        return BadInput(entry, name, draw(st.one_of(out, NOT_NUMBERS)))
    if entry == "keep_minutes":
        value = draw(st.one_of(st.floats(max_value=-1e-9), st.floats(min_value=7 * 1440 + 1)))
        return BadInput(entry, "failure_keep_minutes", draw(st.one_of(st.just(value), NOT_NUMBERS)))
    if entry == "register":
        what = draw(st.sampled_from(["model_id", "alias", "label_key"]))
        values = {
            "model_id": ["", "Upper", "1x", "a" * 70, "a/b"],
            "alias": ["A", "x", "-bad", "a_b", "a" * 200],
            "label_key": ["Upper", "1a", "", "a" * 70],
        }
        return BadInput(entry, what, draw(st.sampled_from(values[what])))
    if entry == "project":
        return BadInput(
            entry, "project", draw(st.sampled_from(["", "P!", "a/b", "../x", "x" * 40]))
        )
    return BadInput(entry, "location", draw(st.sampled_from(["", "us central1", "x/y", "EU"])))


def _create(world: cw.World, **changes: Any) -> Callable[[], Any]:
    params = {
        "project": cw.PROJECT,
        "location": cw.LOCATION,
        "cluster_id": world.next_id("b"),
        "cluster_spec": cw.cluster_body(),
        "spec_params": {},
        "timeout_seconds": 5.0,
        "options": cw.fast_options(),
    }
    params.update(changes)
    return lambda: create_cluster.create_cluster(**params)


def _flat(world: cw.World, name: str, value: Any) -> Callable[[], Any]:
    spec_params = {
        "cluster_id": "flat",
        "project": cw.PROJECT,
        "network": "default",
        "subnetwork": "default",
        "zone": f"{cw.LOCATION}-b",
        "home_directory_storage": f"projects/{cw.PROJECT}/locations/{cw.LOCATION}-b/instances/h",
        "machine_type": "a3-highgpu-8g",
        "accelerator_type": "NVIDIA_H100_80GB",
        "accelerator_count": 8,
        "spot_max_nodes": 2,
        name: value,
    }
    return _create(world, cluster_id="flat", cluster_spec=None, spec_params=spec_params)


def _register(world: cw.World, what: str, value: Any) -> Callable[[], Any]:
    kwargs: dict[str, Any] = {
        "project": cw.PROJECT,
        "location": cw.LOCATION,
        "model_id": value if what == "model_id" else "good",
        "display_name": "bad",
        "artifact_uri": "gs://bucket/model",
        "serving_image": "us-docker.pkg.dev/p/r/serve:1",
        "version_aliases": [value] if what == "alias" else [],
        "labels": {value: "v"} if what == "label_key" else {},
        "run_label": "run-bad",
    }
    return lambda: model_registry.register_model(world.client(), **kwargs)


def _finalize(world: cw.World, value: Any) -> Callable[[], Any]:
    ref = world.ref("badkeep")
    client = world.client()
    resource = cluster_resource.ClusterResource(client, ref, options=cw.fast_options())
    return lambda: exit_task.finalize(
        client, ref, state="FAILED", failure_keep_minutes=value, delete=resource.delete
    )


def call_for(world: cw.World, bad: BadInput) -> Callable[[], Any]:
    """The entry-point call that receives ``bad``."""
    if bad.entry == "cluster_spec":
        return _create(world, cluster_spec=_set(cw.cluster_body(), bad.what, bad.value))
    if bad.entry == "reserved_label":
        body = cw.cluster_body()
        return _create(world, cluster_spec={**body, "labels": {**body["labels"], **bad.value}})
    if bad.entry == "cluster_id":
        return _create(world, cluster_id=bad.value)
    if bad.entry == "flat_params":
        return _flat(world, bad.what, bad.value)
    if bad.entry == "training":
        return lambda: options_check.check_training(**{bad.what: bad.value})
    if bad.entry == "keep_minutes":
        return _finalize(world, bad.value)
    if bad.entry == "register":
        return _register(world, bad.what, bad.value)
    return _create(world, **{bad.what: bad.value})


def check_bad_input(world: cw.World, bad: BadInput) -> list[str]:
    """Runs one bad input; returns the violations (empty when it failed early with a fix)."""
    mark = world.journal_mark()
    try:
        call_for(world, bad)()
    except errors.UserError as exc:
        problems = [] if "fix" in str(exc).lower() else [f"no_fix_message: {exc}"]
    except Exception as exc:  # noqa: BLE001 - any other failure is the finding
        problems = [f"not_a_user_error: {type(exc).__name__}: {exc}"]
    else:
        problems = ["accepted: the bad input raised nothing"]
    sent = world.journal_since(mark)
    if sent:
        problems.append(f"requests_sent: {[(e['method'], e['path']) for e in sent]}")
    return problems
