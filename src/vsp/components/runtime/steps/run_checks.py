"""The rules of a run checked together before anything is created: the model to register, the
checkpoint folder, the teardown decision's inputs and the cluster's prices.

``check_run`` lists every problem at once (``errors.SpecValidationError``); the
``check_run_parameters`` step calls it after merging the pipeline's option groups, and each
``*_problems`` function applies the rule its component applies when it starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from vsp.components.runtime.cluster import builder, rules_base
from vsp.components.runtime.cluster import rules as cluster_rules
from vsp.components.runtime.core import errors, gcp_labels
from vsp.components.runtime.registry import client
from vsp.components.runtime.registry import gate as registry_gate
from vsp.components.runtime.steps import register_model
from vsp.components.runtime.teardown import cost, price_book
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.trainer import manifests
from vsp.components.runtime.training import options_check


def _problem(field: str, value: Any, message: str) -> errors.SpecProblem:
    """Splits a runtime check's ``"... Fix: ..."`` message into a spec problem."""
    problem, _, fix = message.partition(" Fix: ")
    return errors.SpecProblem(field, value, problem.strip(), fix.strip() or "see the docs.")


def model_problems(
    *,
    model_id: str,
    serving_image: str,
    model_dir: str,
    version_aliases: Iterable[str],
    labels: Mapping[str, str],
    gate: Any = "",
) -> list[errors.SpecProblem]:
    """What ``register_model`` would refuse, found now (``gate``: its evaluation gate)."""
    problems = []
    try:
        if not isinstance(gate, str):
            raise errors.UserError("the gate is not a string. Fix: write e.g. 'eval_loss <= 0.35'.")
        registry_gate.Gate.parse(gate)
    except errors.UserError as exc:
        problems.append(_problem("model_options.gate", gate, str(exc)))
    if not client.MODEL_ID.match(model_id or ""):
        problems.append(
            errors.SpecProblem(
                "model_id",
                model_id,
                "is not a Model Registry id.",
                "use lowercase letters, digits, _ and -, starting with a letter, at most 63.",
            )
        )
    if not (serving_image or "").strip():
        problems.append(
            errors.SpecProblem(
                "serving_image", serving_image, "is empty.", "pass a serving container image URI."
            )
        )
    for index, alias in enumerate(version_aliases):
        if not isinstance(alias, str) or not client.ALIAS.match(alias):
            problems.append(
                errors.SpecProblem(
                    f"version_aliases[{index}]",
                    alias,
                    "is not a version alias.",
                    f"use {client.ALIAS_RULE}.",
                )
            )
    for key in labels:
        if str(key).startswith("vsp-"):
            problems.append(
                errors.SpecProblem(
                    f"model_labels.{key}", key, "uses the reserved prefix 'vsp-'.", "rename it."
                )
            )
        elif not gcp_labels.KEY.match(str(key)):
            problems.append(
                errors.SpecProblem(
                    f"model_labels.{key}",
                    key,
                    "is not a label key.",
                    "use lowercase letters, digits, _ and -, starting with a letter.",
                )
            )
    try:
        register_model.to_gcs_uri(model_dir)
    except errors.UserError as exc:
        problems.append(_problem("model_dir", model_dir, str(exc)))
    return problems


def checkpoint_problems(checkpoint_dir: str, model_dir: str) -> list[errors.SpecProblem]:
    """What the training step would refuse about the default checkpoint directory, found now."""
    if checkpoint_dir:
        return []
    try:
        manifests.default_checkpoint_dir(model_dir, "RUN_KEY")
    except errors.UserError as exc:
        return [_problem("checkpoint_dir", checkpoint_dir, str(exc))]
    return []


def teardown_problems(
    inputs: teardown_inputs.TeardownInputs, failure_keep_minutes: float
) -> list[errors.SpecProblem]:
    """What ``decide_teardown`` and ``finalize_cluster`` would refuse, found now (the
    decision's ``policy`` named ``teardown_policy``, as the run's parameters name it)."""
    problems = []
    try:
        inputs.validate()
    except errors.SpecValidationError as exc:
        problems += [
            dataclasses.replace(q, field="teardown_policy") if q.field == "policy" else q
            for q in exc.problems
        ]
    try:
        teardown_inputs.check_failure_keep_minutes(failure_keep_minutes)
    except errors.UserError:
        problems.append(
            errors.SpecProblem(
                "failure_keep_minutes",
                failure_keep_minutes,
                f"must be a number of minutes from 0 to "
                f"{teardown_inputs.MAX_FAILURE_KEEP_MINUTES:g} (a week).",
                "use 0 to delete a failed run's cluster, or the minutes to keep it for a retry.",
            )
        )
    return problems


def price_problems(
    cluster: Mapping[str, Any] | None, *, location: str = "", price_file: str = ""
) -> list[errors.SpecProblem]:
    """What ``decide_teardown`` would refuse when it prices the cluster, found now.

    Args:
        cluster: The cluster's body as it will be created (REST JSON, camelCase or
            snake_case), or None to check only the price file.
        location: The cluster's Vertex region.
        price_file: The price file the decision will read ('' = the price table alone).
    """
    try:
        book = price_book.PriceBook.load(price_file)
    except errors.UserError as exc:
        return [_problem("price_file", price_file, str(exc))]
    if cluster is None:
        return []
    region = cost.region_of(cluster, location)
    try:
        cost.cluster_cost(cluster, book=price_book.PriceBook(book.overrides, price_file, region))
    except cost.MissingPriceError as exc:
        return [_problem("machine_type", exc.machine_type, str(exc))]
    except errors.UserError as exc:
        return [_problem("price_file", price_file, str(exc))]
    return []


def check_run(
    model: Mapping[str, Any],
    teardown_inputs: teardown_inputs.TeardownInputs | None = None,
    **extra: Any,
) -> None:
    """Raises ``errors.SpecValidationError`` listing every problem, or returns.

    Args:
        model: Keyword arguments of ``model_problems``.
        teardown_inputs: The teardown decision's inputs (None: no teardown in this pipeline).
        **extra: ``failure_keep_minutes`` when there is a teardown; ``checkpoint_dir`` when
            the run trains with checkpoints in a directory it may default; ``cluster`` (the
            body to create), ``location`` and ``price_file`` when the teardown prices the
            cluster (an idle or provisioning price of 0); ``training`` (the training step's
            parameters, ``training.options_check``) when the run trains.
    """
    problems = model_problems(**model)
    if extra.get("training"):
        problems += options_check.problems(**extra["training"])
    if "checkpoint_dir" in extra:
        problems += checkpoint_problems(extra["checkpoint_dir"], model["model_dir"])
    if teardown_inputs is not None:
        problems += teardown_problems(teardown_inputs, extra.get("failure_keep_minutes", 0.0))
        priced = teardown_inputs.policy in cost.PRICED_POLICIES and 0 in (
            teardown_inputs.idle_price_per_hour,
            teardown_inputs.provisioning_price_per_hour,
        )
        if priced and (extra.get("cluster") is not None or extra.get("price_file")):
            problems += price_problems(
                extra.get("cluster"),
                location=extra.get("location", ""),
                price_file=extra.get("price_file", ""),
            )
    if problems:
        raise errors.SpecValidationError("the run's parameter set", problems)


def check_cluster_id(cluster_id: str) -> None:
    """The id create_cluster will refuse (a Slurm cluster's: no '-'), before anything runs
    ('' = not checked)."""
    if not cluster_id:
        return
    problems = rules_base.Problems()
    cluster_rules.check_cluster_id(problems, cluster_id, has_slurm=True)
    problems.raise_if_any("cluster_id")


def check_cluster_place(params: Mapping[str, Any], cluster_spec: Any) -> None:
    """A pipeline with ``cluster_options`` and no ``cluster_spec`` must give the network, zone
    and home storage there: ``create_cluster`` has no default for them.

    Args:
        params: The first step's parameters as received (``option_names`` and the groups).
        cluster_spec: The full cluster spec given, if any (then nothing is checked).
    """
    if cluster_spec or "cluster_options" not in (params.get("option_names") or {}):
        return
    options = params.get("cluster_options") or {}
    if not isinstance(options, Mapping):  # reported by with_groups
        return
    if problems := builder.place_problems(options, "cluster_options."):
        raise errors.SpecValidationError("cluster_options", problems)
