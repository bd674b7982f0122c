"""Validation of a training cluster spec before any request is sent.

Entry points:

* ``parse_cluster_spec(data)`` / ``load_cluster_spec(path)``: dict or JSON/YAML file to
  ``ClusterSpec``; shape and type errors (unknown keys, wrong types) become ``SpecValidationError``.
* ``validate_cluster(spec, cluster_id)``: every semantic rule; raises one ``SpecValidationError``
  listing *all* problems, each naming the field path, the value and the fix. It also logs
  warnings (``pool_size_warnings``) for what the reference discourages but the service may
  accept.

The rules are split by role: top-level fields here, node pools in ``cluster_rules_pools``, the
Slurm orchestrator in ``cluster_rules_slurm`` (values in ``cluster_slurm_values``). Sources are
in each module's docstring, by the tags listed in the package docstring (``cluster/__init__``).
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import pydantic
import yaml

from vsp.components.runtime.cluster import keys, rules_base, rules_pools, rules_slurm
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors

log = logging.getLogger(__name__)

WHAT = "cluster spec"
DAYS_OF_WEEK = ("MONDAY", "TUESDAY", "WEDNESDAY", "THURSDAY", "FRIDAY", "SATURDAY", "SUNDAY")


def parse_cluster_spec(data: Any) -> cluster_spec.ClusterSpec:
    """Parses a cluster body given as a dict (snake_case or camelCase keys).

    Args:
        data: The cluster body, or an already parsed ``ClusterSpec`` (returned as is).

    Returns:
        The typed spec (not yet checked by ``validate_cluster``).

    Raises:
        errors.SpecValidationError: Unknown keys or values of the wrong type, all listed.
    """
    if isinstance(data, cluster_spec.ClusterSpec):
        return data
    if not isinstance(data, dict):
        problem = errors.SpecProblem(
            "cluster", type(data).__name__, "The cluster spec must be a mapping (JSON object).",
            "Pass the cluster body as a dict / JSON object.",
        )  # fmt: skip
        raise errors.SpecValidationError(WHAT, [problem])
    try:
        return cluster_spec.ClusterSpec.model_validate(data)
    except pydantic.ValidationError as error:
        problems = keys.problems_from_validation_error(error, cluster_spec.ClusterSpec)
        raise errors.SpecValidationError(WHAT, problems) from None


def load_cluster_spec(path: str | os.PathLike[str]) -> cluster_spec.ClusterSpec:
    """Reads a cluster body from a JSON or YAML file and parses it.

    ``.json`` files are read as JSON, ``.yaml``/``.yml`` as YAML; any other extension is read as
    JSON when the text starts with ``{`` and as YAML otherwise.

    Raises:
        errors.SpecValidationError: The file is missing, unreadable, not JSON/YAML, or the
            spec has shape or type errors.
    """
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as error:
        problem = errors.SpecProblem(
            "file", path, f"Cannot read the cluster spec file ({error.strerror or error}).",
            "Check the path and permissions.",
        )  # fmt: skip
        raise errors.SpecValidationError(WHAT, [problem]) from None
    extension = os.path.splitext(path)[1].lower()
    as_json = extension == ".json" or (
        extension not in (".yaml", ".yml") and text.lstrip().startswith("{")
    )
    try:
        data = json.loads(text) if as_json else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        kind = "JSON" if as_json else "YAML"
        problem = errors.SpecProblem(
            "file", path, f"Not valid {kind}: {error}".rstrip(".") + ".",
            f"Fix the {kind} syntax at the reported position.",
        )  # fmt: skip
        raise errors.SpecValidationError(WHAT, [problem]) from None
    return parse_cluster_spec(data)


def validate_cluster(spec: cluster_spec.ClusterSpec, cluster_id: str | None) -> None:
    """Checks every rule on a cluster spec and its id.

    Args:
        spec: The parsed spec.
        cluster_id: The id the cluster will be created under; None skips the id check.

    Raises:
        errors.SpecValidationError: One or more rules failed; ``.problems`` lists all of them.
    """
    problems = rules_base.Problems()
    has_slurm = spec.slurm is not None
    if cluster_id is not None:
        check_cluster_id(problems, cluster_id, has_slurm)
    _check_display_name(problems, spec.display_name)
    rules_base.check_labels(problems, "labels", spec.labels)
    rules_base.check_reserved_labels(problems, "labels", spec.labels)
    _check_network(problems, spec.network)
    rules_pools.check_node_pools(problems, spec)
    rules_slurm.check_slurm(problems, spec)
    if spec.runtime_spec is not None and spec.runtime_spec.service_account is not None:
        account = spec.runtime_spec.service_account
        if not rules_base.EMAIL.fullmatch(account):
            problems.add(
                "runtime_spec.service_account", account, "Not a service account email.",
                "Use the account's email, e.g. NAME@PROJECT.iam.gserviceaccount.com.",
            )  # fmt: skip
    _check_lustre_export(problems, spec.lustre_export_config)
    problems.raise_if_any(WHAT)
    for warning in [*pool_size_warnings(spec), *rules_pools.accelerator_warnings(spec)]:
        log.warning("%s", warning)


def pool_size_warnings(spec: cluster_spec.ClusterSpec) -> list[str]:
    """Warnings for node pools that are not fixed-size (``min_node_count`` < ``max_node_count``).

    Google's create-cluster reference says a pool's MIN_NODE_COUNT must be the same as its
    MAX_NODE_COUNT [R CREATE]; its FLEX_START pages and the Terraform sample use min 0 / max N
    [R FLEX, MMEX], so FLEX_START pools are not warned about. Whether the service refuses the
    other pools is not known, hence a warning and not an error. The login pool is checked as an
    error by ``cluster_rules_slurm``; an unset minimum counts as 0 (the proto3 default).

    Returns:
        One message per pool, naming the field, the reference and the fix.
    """
    login = spec.slurm.login_node_pool_id if spec.slurm else None
    warnings = []
    for index, pool in enumerate(spec.node_pools or []):
        scaling = pool.scaling_spec
        if scaling is None or scaling.max_node_count is None or pool.id == login:
            continue
        low, high = scaling.min_node_count or 0, scaling.max_node_count
        if low >= high or rules_pools.effective_provisioning_model(pool) == "FLEX_START":
            continue
        warnings.append(
            f"node_pools[{index}].scaling_spec.min_node_count = {low} (pool {pool.id!r}, "
            f"max_node_count {high}): the create-cluster reference says a node pool's minimum "
            "node count must equal its maximum; the service may refuse the create or the node "
            f"pool update. Fix: set min_node_count to {high} (a fixed-size pool), or make the "
            "pool FLEX_START (min 0 / max N is documented for it)."
        )
    return warnings


def check_cluster_id(problems: rules_base.Problems, cluster_id: str, has_slurm: bool) -> None:
    """Records a problem when ``cluster_id`` is not an id the service takes (with a Slurm spec:
    no '-'); ``create_cluster`` and a pipeline's first step both call it."""
    pattern = rules_base.SLURM_CLUSTER_ID if has_slurm else rules_base.CLUSTER_ID
    if isinstance(cluster_id, str) and pattern.fullmatch(cluster_id):
        return
    if has_slurm and isinstance(cluster_id, str) and rules_base.CLUSTER_ID.fullmatch(cluster_id):
        problem = "A cluster with slurm_spec cannot have '-' in its id."
    else:
        problem = (
            "Cluster id must be 1-10 chars: a lowercase letter, then lowercase letters/digits."
        )
    named = rules_base.CLUSTER_NAME_TAIL.search(cluster_id) if isinstance(cluster_id, str) else None
    if named:  # a full cluster name: its id is its last part
        fix = f"Pass the id alone, {named[1]!r} (the last part of the cluster's name)."
    else:
        suggestion = "".join(c for c in str(cluster_id).lower() if c.isalnum())[:10]
        fix = "Use an id like 'train01'" + (
            f" (e.g. '{suggestion}')." if suggestion[:1].isalpha() else "."
        )
    problems.add("cluster_id", cluster_id, problem, fix)


def _check_display_name(problems: rules_base.Problems, name: str | None) -> None:
    if not name:
        problems.missing(
            "display_name", "Set a display name of at most 10 lowercase letters/digits."
        )
    elif not rules_base.DISPLAY_NAME.fullmatch(name):
        problems.add(
            "display_name", name,
            "Display name must be 1-10 chars, a lowercase letter then lowercase letters/digits "
            "(the documented limit for training clusters).",
            "Use a short name like the cluster id, e.g. 'train01'.",
        )  # fmt: skip


def _check_network(problems: rules_base.Problems, network: cluster_spec.Network | None) -> None:
    if network is None:
        return
    network_form = "projects/PROJECT/global/networks/NETWORK"
    subnet_form = "projects/PROJECT/regions/REGION/subnetworks/SUBNETWORK"
    if not network.network:
        problems.missing("network.network", f"Set the VPC network, {network_form}.")
        net_ok = False
    else:
        net_ok = rules_base.check_pattern(
            problems, "network.network", network.network, rules_base.NETWORK, network_form
        )
    if network.subnetwork is None:
        return
    if not rules_base.check_pattern(
        problems, "network.subnetwork", network.subnetwork, rules_base.SUBNETWORK, subnet_form
    ):
        return
    subnet_project = rules_base.SUBNETWORK.fullmatch(network.subnetwork).group(1)
    net_project = (
        rules_base.NETWORK.fullmatch(network.network).group(1) if net_ok else subnet_project
    )
    if subnet_project != net_project:
        problems.add(
            "network.subnetwork", network.subnetwork,
            f"The subnetwork is in project {subnet_project}, the network in {net_project}.",
            "Use a subnetwork of the network's (host) project.",
        )  # fmt: skip


def _check_lustre_export(
    problems: rules_base.Problems, export: cluster_spec.LustreExportConfig | None
) -> None:
    if export is None:
        return
    field = "lustre_export_config"
    bucket = export.destination_bucket
    if not bucket:
        problems.missing(f"{field}.destination_bucket", "Set the Cloud Storage bucket name.")
    elif bucket.startswith("gs://") or "/" in bucket:
        fixed = bucket.removeprefix("gs://").split("/")[0]
        problems.add(
            f"{field}.destination_bucket", bucket,
            "Give the bucket name only, without gs:// or a path.",
            f"Use '{fixed}'.",
        )  # fmt: skip
    for index, day in enumerate(export.days_of_week or []):
        if day not in DAYS_OF_WEEK or day in (export.days_of_week or [])[:index]:
            problems.add(
                f"{field}.days_of_week[{index}]", day, "Not a day of the week, or listed twice.",
                f"Use distinct values from {', '.join(DAYS_OF_WEEK)}.",
            )  # fmt: skip
    rules_base.check_resource_list(
        problems, f"{field}.lustres", export.lustres, rules_base.INSTANCE, rules_base.INSTANCE_FORM
    )
    start = export.start_time
    if start is not None:
        for name, limit in (("hours", 23), ("minutes", 59), ("seconds", 59)):
            value = getattr(start, name)
            if value is not None and not 0 <= value <= limit:
                problems.add(
                    f"{field}.start_time.{name}",
                    value,
                    f"Must be 0-{limit}.",
                    f"Use a value from 0 to {limit}.",
                )
