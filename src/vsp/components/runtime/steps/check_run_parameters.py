"""The ``check_run_parameters`` step: every later step's parameters, checked before anything.

``main`` is the component's entry (every parameter it received); ``vsp submit`` and ``vsp
schedule`` call ``check_component_params`` with the values the compiled template would pass to
that step, so a run is refused on the command line for exactly what its first step would
refuse.

Registration and teardown run after hours of training; a typo in ``model_id`` or the cron must
not surface only then, after the cluster and the GPUs were paid for. ``check_run`` validates
the parameters of ``register_model`` and of the teardown decision with the same rules those
steps apply, and reports every problem at once (``errors.SpecValidationError``, exit code 2).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from vsp.components.runtime.cluster import builder
from vsp.components.runtime.core import errors, gpu_machines, param_rules, step
from vsp.components.runtime.slurm import job_checks
from vsp.components.runtime.steps import run_checks
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import prewarm_intents
from vsp.components.runtime.training import code_check, options_check

T = TypeVar("T")

TRAINING_NAMES = (
    "command", "working_directory", "environment", "nodes", "gpus_per_node",
    "time_limit_minutes", "max_preemptions", "max_user_failures", "fallback_after_preemptions",
    "capacity_wait_seconds", "poll_seconds", "spot_price_per_node_hour",
    "ondemand_price_per_node_hour",
)  # fmt: skip


# The option groups a pipeline may pass and the component each fills, and the names their
# components give what this step checks under another name.
GROUPS = {
    "cluster_options": "create_cluster",
    "training_options": "train_on_cluster",
    "model_options": "register_model",
    "teardown_options": "decide_teardown",
}
RENAMED = {
    "model_options": {"labels": "model_labels"},
    "teardown_options": {"policy": "teardown_policy"},
}
# Pipeline parameters this step has no parameter of its own for (a group naming one is told
# to set the pipeline parameter instead).
TOP_LEVEL_ALSO = ("project", "location", "cluster_id", "policy")
# This step's own parameters under the component and name whose rule they follow
# (``param_rules.RULES``).
FLAT_RULES = {
    "model_dir": ("register_model", "model_dir"),
    "serving_image": ("register_model", "serving_image"),
    "model_labels": ("register_model", "labels"),
    "version_aliases": ("register_model", "version_aliases"),
    "checkpoint_dir": ("train_on_cluster", "checkpoint_dir"),
    "working_directory": ("train_on_cluster", "working_directory"),
    "environment": ("train_on_cluster", "environment"),
    "cluster_spec": ("create_cluster", "cluster_spec"),
    "spot_max_nodes": ("create_cluster", "spot_max_nodes"),
    "ondemand_max_nodes": ("create_cluster", "ondemand_max_nodes"),
    "schedule_cron": ("decide_teardown", "schedule_cron"),
    "interval_hours": ("decide_teardown", "interval_hours"),
    "price_file": ("decide_teardown", "price_file"),
    "notify_topic": ("finalize_cluster", "notify_topic"),
}


# What each later check reads (by the name a problem of the first pass gives it): a check whose
# values were already reported is not run.
TEARDOWN_READS = (
    "teardown_policy", "policy", "schedule_cron", "interval_hours", "idle_price_per_hour",
    "provisioning_minutes", "provisioning_price_per_hour", "delay_penalty_per_hour",
    "shrunk_price_per_hour", "scale_up_minutes", "prewarm_margin_minutes", "prewarm_dir",
)  # fmt: skip
CLUSTER_READS = ("cluster_spec", "machine_type", "spot_max_nodes", "ondemand_max_nodes")
REGISTER_READS = (
    "model_id", "serving_image", "model_dir", "version_aliases", "model_labels", "labels",
    "gate", "failure_keep_minutes", "price_file", "location", "checkpoint_dir",
)  # fmt: skip


# The flag of this step that says whether a pipeline runs the component at all.
CHECKED_BY = {
    "train_on_cluster": "check_training",
    "decide_teardown": "check_teardown",
}


def main(**params: Any) -> bool:
    """The component's entry: every parameter it received (see the component)."""
    return step.run_step("check_run_parameters", lambda: check_component_params(params))


def with_groups(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters with each option group's values applied, every value checked first.

    Each group's names are checked against ``option_names`` and its values against its
    component's rules (``param_rules.RULES``), as the component will check them when it
    starts; this step's own parameters meet the rule of the parameter they feed
    (``FLAT_RULES``). A value that breaks a rule is not applied.

    Raises:
        errors.SpecValidationError: A group is not a dict, names what its component does
            not take (every such name listed, with the names it does take), or a value
            breaks its rule.
    """
    merged, problems = _merged(params)
    if problems:
        raise errors.SpecValidationError("the run's parameter set", problems)
    return merged


def _merged(params: Mapping[str, Any]) -> tuple[dict[str, Any], list[errors.SpecProblem]]:
    """``with_groups``'s parameters and the problems it found, without raising."""
    merged = {k: v for k, v in params.items() if k not in (*GROUPS, "option_names")}
    allowed_by_group = params.get("option_names") or {}
    problems = []
    overridden = set()
    for group, component in GROUPS.items():
        options = params.get(group) or {}
        if not isinstance(options, Mapping):
            fix = 'give {"NAME": VALUE, ...}.'
            problems.append(errors.SpecProblem(group, options, "is not a dict.", fix))
            continue
        allowed = allowed_by_group.get(group)
        for name in sorted(options):
            if allowed is not None and name not in allowed:
                fix = step.did_you_mean(name, list(allowed)) + f"use one of {', '.join(allowed)}."
                if name in merged or name in TOP_LEVEL_ALSO:  # the pipeline sets it itself
                    fix = f"set the pipeline parameter {RENAMED.get(group, {}).get(name, name)}."
                    problem = "is set by the pipeline, not by this group."
                else:
                    problem = "is not known."
                problems.append(errors.SpecProblem(f"{group}.{name}", options[name], problem, fix))
                continue
            broken = param_rules.problems(component, {name: options[name]}, f"{group}.")
            problems += broken
            checked = RENAMED.get(group, {}).get(name, name)
            if checked in merged and not broken:  # the rest is its component's to check
                merged[checked] = step.like(options[name], merged[checked])
                overridden.add(checked)
    for name, (component, rule_name) in FLAT_RULES.items():
        # A pipeline without that step (a CustomJob pipeline trains no Slurm job, keeps no
        # cluster) turns its check off; the step's defaults then need not meet its rules.
        # '' is this step's "not given" (no working directory in a CustomJob pipeline, the
        # default checkpoint folder, no price file); register_model's are checked by check_run.
        needed = merged.get(CHECKED_BY.get(component, ""), True)
        given = name in merged and merged[name] != ""
        if given and name not in overridden and needed is not False:
            found = param_rules.problems(component, {rule_name: merged[name]})
            problems += [dataclasses.replace(p, field=name) for p in found]
    return merged, problems


def check_component_params(params: Mapping[str, Any]) -> bool:
    """Raises ``errors.SpecValidationError`` listing every problem; returns True otherwise.

    The checks run one after the other, each on the values the ones before accepted, and every
    problem of every check is reported at once: the groups' and flat values' rules, the
    teardown inputs, the training bounds, GPUs and staged code, then registration. A check that
    breaks on a value an earlier one already reported is left out (its error would repeat it).

    Args:
        params: Every parameter of the ``check_run_parameters`` component by name (see its
            docstring), as the step receives them.
    """
    p, problems = _merged(params)
    notes: list[str] = []

    def gather(check: Callable[[], T], reads: Collection[str]) -> T | None:
        reported = {problem.field.rpartition(".")[2] for problem in problems}
        if reported & set(reads):
            return None  # it would say again what is said: its value is not applied
        try:
            return check()
        except errors.SpecValidationError as exc:
            problems.extend(exc.problems)
            notes.extend(exc.notes)
        except errors.UserError as exc:
            notes.append(str(exc))
        except Exception:
            if not (problems or notes):
                raise
        return None

    inputs = None
    if p["check_teardown"]:
        inputs = gather(lambda: _teardown_inputs(params, p), TEARDOWN_READS)
    gather(
        lambda: _check_machine_gpus(p),
        ("machine_type", "accelerator_type", "accelerator_count", "gpus_per_node", "cluster_spec"),
    )
    gather(
        lambda: run_checks.check_cluster_place(params, p["cluster_spec"]),
        (*builder.PLACE_VALUES, "cluster_spec"),
    )
    gather(lambda: run_checks.check_cluster_id(p.get("cluster_id", "")), ("cluster_id",))
    cluster = None
    if p["check_teardown"] and 0 in (p["idle_price_per_hour"], p["provisioning_price_per_hour"]):
        cluster = gather(lambda: _cluster_body(p), CLUSTER_READS)
    training = {}
    if p["check_training"]:
        # The group's bounded names this step has no parameter for (timeout_seconds, ...).
        options = params.get("training_options") or {}
        grouped = dict(options) if isinstance(options, Mapping) else {}  # else: reported
        training = gather(
            lambda: options_check.component_params(
                {**grouped, **{k: p[k] for k in TRAINING_NAMES}}
            ),
            (*TRAINING_NAMES, *grouped),
        )
        gather(lambda: _check_gpus(p), ("gpus_per_node", "accelerator_count", "cluster_spec"))
        gather(lambda: _check_spot_nodes(p), ("nodes", "spot_max_nodes", "cluster_spec"))
        gather(lambda: _check_code(grouped), ("code_uri", "code_sha256", "code_cache_dir"))
        gather(lambda: _check_launch(grouped), ("launcher", "nccl_env_file", "container_image"))
    extra: dict[str, Any] = {}
    if p["check_checkpoint_dir"]:
        extra["checkpoint_dir"] = p["checkpoint_dir"]
    gather(
        lambda: run_checks.check_run(
            {
                "model_id": p["model_id"],
                "serving_image": p["serving_image"],
                "model_dir": p["model_dir"],
                "version_aliases": list(p["version_aliases"] or []),
                "labels": dict(p["model_labels"] or {}),
                "gate": (params.get("model_options") or {}).get("gate", ""),
            },
            inputs,
            failure_keep_minutes=p["failure_keep_minutes"],
            price_file=p["price_file"],
            cluster=cluster,
            location=p["location"],
            training=training or {},
            **extra,
        ),
        REGISTER_READS,
    )
    if len(notes) == 1 and not problems:
        raise errors.UserError(notes[0])
    if problems or notes:
        raise errors.SpecValidationError("the run's parameter set", problems, notes)
    return True


def _teardown_inputs(params: Mapping[str, Any], p: Mapping[str, Any]) -> Any:
    """The teardown decision's inputs, checked as ``decide_teardown`` checks them."""
    inputs = teardown_inputs.component_inputs(
        policy=p["teardown_policy"],
        schedule_cron=p["schedule_cron"],
        interval_hours=p["interval_hours"],
        idle_price_per_hour=p["idle_price_per_hour"],
        provisioning_minutes=p["provisioning_minutes"],
        provisioning_price_per_hour=p["provisioning_price_per_hour"],
        delay_penalty_per_hour=p["delay_penalty_per_hour"],
        shrunk_price_per_hour=p["shrunk_price_per_hour"],
        scale_up_minutes=p["scale_up_minutes"],
        prewarm_margin_minutes=_prewarm_option(params, "prewarm_margin_minutes", 0.0),
    )
    prewarm_intents.check_folder_given(
        inputs.prewarm_margin_minutes,
        _prewarm_option(params, "prewarm_dir", ""),
        group="teardown_options.",
    )
    return inputs


def _cluster_body(p: Mapping[str, Any]) -> dict[str, Any]:
    """The cluster the teardown prices: the spec given, else the flat parameters' one."""
    return dict(p["cluster_spec"] or {}) or (
        builder.build_cluster_spec(
            machine_type=p["machine_type"],
            spot_max_nodes=p["spot_max_nodes"],
            ondemand_max_nodes=p["ondemand_max_nodes"],
            validate=False,  # create_cluster validates the spec itself
        ).to_request_body()
    )


def _prewarm_option(params: Mapping[str, Any], name: str, default: Any) -> Any:
    """A pre-warm parameter of ``teardown_options`` (checked by ``with_groups`` already)."""
    options = params.get("teardown_options") or {}
    return options.get(name, default) if isinstance(options, Mapping) else default


def _check_code(options: Any) -> None:
    """Staged code named in ``training_options`` must be a gs:// package with a valid sha256
    (the object's digest itself is checked by the training step, before it submits)."""
    if not isinstance(options, Mapping):
        return  # reported by with_groups
    if options.get("code_uri") or options.get("code_sha256"):
        code_check.resolve(
            str(options.get("code_uri") or ""),
            str(options.get("code_sha256") or ""),
            str(options.get("code_cache_dir") or ""),
        )


def _check_launch(options: Mapping[str, Any]) -> None:
    """``training_options``' launcher, NCCL file and image, by the rules the training step
    applies before it submits (``job_checks.launch_problems``; the step's defaults for the
    names not given)."""
    if not {"launcher", "nccl_env_file", "container_image"} & set(options):
        return
    found: list[errors.SpecProblem] = []
    job_checks.launch_problems(
        options.get("launcher", "none"),
        options.get("nccl_env_file", ""),
        lambda field, *rest: found.append(errors.SpecProblem(f"training_options.{field}", *rest)),
        container_image=options.get("container_image", ""),
    )
    if found:
        raise errors.SpecValidationError("the run's parameter set", found)


def _check_machine_gpus(p: Mapping[str, Any]) -> None:
    """The flat parameters' machine type must be one Compute Engine has
    (``gpu_machines.unknown_type``) and come with (or take) their accelerators
    (``gpu_machines.mismatch``), as ``create_cluster`` will check; skipped when
    ``cluster_spec`` gives the cluster (the accelerators also when the pipeline passes no
    ``accelerator_type``)."""
    kind, count, machine = p["accelerator_type"], p["accelerator_count"], p["machine_type"]
    if p["cluster_spec"] or not isinstance(machine, str):
        return
    wrong = gpu_machines.unknown_type(machine)
    if wrong is None and (not kind or not isinstance(count, int) or count < 0):
        return
    wrong = wrong or gpu_machines.mismatch(machine, str(kind), count)
    if wrong is None:
        return
    problems = [errors.SpecProblem(wrong.field, wrong.value, wrong.problem, wrong.fix)]
    fixed, gpus = gpu_machines.built_in(machine), p["gpus_per_node"]
    known = wrong.field != "machine_type"
    if known and fixed is not None and isinstance(gpus, int) and gpus > fixed[1]:
        # Said now, so that the accelerator's fix is not followed by this refusal next run.
        problems.append(
            errors.SpecProblem(
                "gpus_per_node",
                gpus,
                f"{machine} has {fixed[1]} GPU(s) per node; the job would ask Slurm for more.",
                f"set gpus_per_node to {fixed[1]} or fewer.",
            )
        )
    raise errors.SpecValidationError("the run's parameter set", problems)


def _check_spot_nodes(p: Mapping[str, Any]) -> None:
    """A job of more nodes than the flat parameters' Spot pool has would never start (with
    ``spot_max_nodes`` 0 the cluster has no ``spot`` partition at all); refused before the
    cluster is created, unless ``cluster_spec`` gives the cluster."""
    nodes, spot = p["nodes"], p["spot_max_nodes"]
    if p["cluster_spec"] or not isinstance(nodes, int) or not isinstance(spot, int):
        return
    if nodes <= spot:
        return
    if spot == 0:
        problem = (
            f"the cluster would have no Spot pool, so no spot partition for the training job "
            f"of {nodes} node(s) to start on."
        )
    else:
        problem = (
            f"the Spot pool would have {spot} node(s), fewer than the training job's {nodes}: "
            "the job would never start."
        )
    fix = f"set spot_max_nodes to at least nodes ({nodes})" + (
        f", or nodes to at most {spot}." if spot else "."
    )
    raise errors.SpecValidationError(
        "the run's parameter set", [errors.SpecProblem("spot_max_nodes", spot, problem, fix)]
    )


def _check_gpus(p: Mapping[str, Any]) -> None:
    """A job asking for more GPUs per node than the flat parameters' nodes have would wait
    in the queue forever; refused before the cluster is created."""
    gpus, count = p["gpus_per_node"], p["accelerator_count"]
    if p["cluster_spec"] or not isinstance(count, int) or count < 0:
        return
    if isinstance(gpus, int) and gpus > count:
        raise errors.UserError(
            f"gpus_per_node = {gpus} asks Slurm for more GPUs than a training node has "
            f"(accelerator_count = {count}): the job would never start. Fix: set gpus_per_node "
            "to accelerator_count (every GPU of a node) or fewer; 0 for nodes without GPUs."
        )
