"""The table of value rules shared by the pipeline's first step and each component.

``RULES`` maps a component to its parameters' rules. A component applies its own rules when
it starts (``step.accepts_options``, after its ``options`` group is applied); the first step
(``check_run_parameters``) applies them to every value the pipeline passes, option groups
included, so a value a later step would refuse stops the run before a cluster exists.

These rules are about a value's shape (type, one line, an absolute path, no ``.`` or ``..``,
a count); the rules that need a domain (cron calendars, teardown prices, Model Registry ids,
the training bounds) stay with their domain and are called by both too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from vsp.components.runtime.core import errors, gcp_labels

# A rule returns (problem, fix) for a bad value, or None.
Rule = Callable[[Any], "tuple[str, str] | None"]

BREAKS = ("\n", "\r", "\0")
# "can be up to 128 characters long" (Vertex AI REST reference, Model.displayName).
MAX_DISPLAY_NAME = 128
# Provenance labels ``register_model`` adds to every version (run, jobs, job count,
# preemptions, checkpoint step, data and code version): the user's share of the 64.
MODEL_PROVENANCE_LABELS = 7
MAX_MODEL_LABELS = gcp_labels.MAX_LABELS - MODEL_PROVENANCE_LABELS
# Environment variables the training step sets for the trainer (``trainer.contract``,
# ``training.beacon``): a value given for them would be overridden or would split the run's
# directories from what the step records.
STEP_ENV = frozenset(
    {"VSP_CHECKPOINT_DIR", "VSP_MODEL_DIR", "VSP_ATTEMPT", "VSP_RUN_KEY", "VSP_BEACON_DIR"}
)
# Compute Engine's largest disk, 64 TiB (``cluster.rules_pools.MAX_BOOT_DISK_GB``).
MAX_BOOT_DISK_GB = 65536
# Node counts are int32 in the cluster request (``cluster.rules_pools.MAX_NODE_COUNT``).
MAX_NODE_COUNT = 2**31 - 1
# "projects/PROJECT/topics/TOPIC": a topic name starts with a letter, holds letters, digits and
# - . _ ~ + %, has 3-255 characters and does not start with "goog" (Pub/Sub resource names); a
# project id is 6-30 lowercase letters, digits and hyphens (domain-scoped ids hold "." and ":").
PUBSUB_TOPIC = re.compile(
    r"projects/[a-z][a-z0-9.:-]{4,61}[a-z0-9]/topics/(?!goog)[A-Za-z][A-Za-z0-9._~+%-]{2,254}"
)
# Ten years: the longest expected gap between scheduled runs (a time past it overflows).
MAX_INTERVAL_HOURS = 10 * 365 * 24.0


def one_line(value: Any) -> tuple[str, str] | None:
    """A string without line breaks or NUL."""
    if not isinstance(value, str):
        return "is not a string.", "give a string."
    if any(c in value for c in BREAKS):
        return "holds a line break or NUL.", "give it on one line."
    return None


def _dot_segments(path: str) -> bool:
    return any(part in (".", "..") for part in path.split("/"))


def path_rule(*, gcs: bool, optional: bool) -> Rule:
    """An absolute path (or, with ``gcs``, a ``gs://BUCKET/PATH`` URI) on one line.

    ``.`` and ``..`` segments are refused: ``gs://b/run/../../other`` would write into
    bucket ``other`` through GCS FUSE while the step records the literal URI.
    """
    shape = "gs://BUCKET/PATH or an absolute path" if gcs else "an absolute path"

    def rule(value: Any) -> tuple[str, str] | None:
        if optional and value == "":
            return None
        if bad := one_line(value):
            return bad
        body = value[len("gs://") :] if gcs and value.startswith("gs://") else None
        if body is None and not value.startswith("/"):
            return f"is not {shape}.", f"give {shape}, e.g. /gcs/BUCKET/run."
        if _dot_segments(body if body is not None else value):
            return "has a '.' or '..' segment.", f"give {shape} without '.' or '..'."
        return None

    return rule


def display_name(value: Any) -> tuple[str, str] | None:
    """One line of at most 128 characters (Vertex AI display names; '' = the default)."""
    if bad := one_line(value):
        return bad
    if len(value) > MAX_DISPLAY_NAME:
        return f"has {len(value)} characters; Vertex AI allows {MAX_DISPLAY_NAME}.", "shorten it."
    return None


def image_uri(value: Any) -> tuple[str, str] | None:
    """A container image reference: no whitespace or control characters."""
    if not isinstance(value, str) or any(c.isspace() or ord(c) < 32 for c in value):
        return (
            "is not a container image reference (it holds whitespace or control characters).",
            "give the image as REGISTRY/PATH:TAG or REGISTRY/PATH@sha256:DIGEST.",
        )
    return None


def gcs_uri(value: Any) -> tuple[str, str] | None:
    """A ``gs://BUCKET/PATH`` URI on one line, without ``.`` or ``..`` segments."""
    if bad := one_line(value):
        return bad
    if not value.startswith("gs://") or not value[len("gs://") :].strip("/"):
        return "is not a gs://BUCKET/PATH URI.", "give gs://BUCKET/PATH."
    if _dot_segments(value[len("gs://") :]):
        return "has a '.' or '..' segment.", "give gs://BUCKET/PATH without '.' or '..'."
    return None


def pubsub_topic(value: Any) -> tuple[str, str] | None:
    """A Pub/Sub topic ``projects/PROJECT/topics/TOPIC`` ('' = none)."""
    if value == "":
        return None
    if not isinstance(value, str) or not PUBSUB_TOPIC.fullmatch(value):
        return (
            "is not a Pub/Sub topic name.",
            "give projects/PROJECT/topics/TOPIC (PROJECT: a project id, 6-30 lowercase letters, "
            "digits and hyphens; TOPIC: 3-255 letters, digits and - . _ ~ + %, starting with a "
            "letter, not with 'goog'), or '' for none.",
        )
    return None


def mapping(value: Any) -> tuple[str, str] | None:
    """A dict (JSON object)."""
    if not isinstance(value, Mapping):
        return "is not a dict.", 'give {"NAME": VALUE, ...}.'
    return None


def string_list(value: Any) -> tuple[str, str] | None:
    """A list of strings."""
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        return "is not a list of strings.", 'give ["A", "B", ...].'
    return None


def labels_rule(limit: int) -> Rule:
    """A dict of at most ``limit`` labels."""

    def rule(value: Any) -> tuple[str, str] | None:
        if bad := mapping(value):
            return bad
        if len(value) > limit:
            return (
                f"holds {len(value)} labels; at most {limit} fit beside the labels the step "
                f"adds (GCP allows {gcp_labels.MAX_LABELS}).",
                f"keep {limit} or fewer.",
            )
        return None

    return rule


def environment(value: Any) -> tuple[str, str] | None:
    """A dict without the variables the training step sets itself."""
    if bad := mapping(value):
        return bad
    if taken := sorted(STEP_ENV & set(value)):
        return (
            f"sets {', '.join(taken)}, which the training step sets for the trainer.",
            "drop it; use the step's checkpoint_dir or model_dir parameter instead.",
        )
    return None


def interval_hours(value: Any) -> tuple[str, str] | None:
    """Hours between runs: 0 (unknown) up to ten years."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not 0 <= value <= MAX_INTERVAL_HOURS:
        return (
            f"must be a number of hours from 0 to {MAX_INTERVAL_HOURS:g} (ten years).",
            "give the expected hours between runs, or 0 when unknown.",
        )
    return None


def non_negative(value: Any) -> tuple[str, str] | None:
    """A finite number >= 0."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value < 0:
        return "must be a finite number >= 0.", "give a non-negative number."
    return None


def whole_number(low: int, high: int, unit: str) -> Rule:
    """A whole number from ``low`` to ``high`` (a whole float, as JSON gives it, counts)."""

    def rule(value: Any) -> tuple[str, str] | None:
        whole = isinstance(value, float) and value.is_integer()
        number = (isinstance(value, int) and not isinstance(value, bool)) or whole
        if not number or not low <= value <= high:
            return f"must be a whole number of {unit} from {low} to {high}.", f"use {low}-{high}."
        return None

    return rule


STORAGE = path_rule(gcs=True, optional=False)
RULES: dict[str, dict[str, Rule]] = {
    "create_cluster": {
        "cluster_spec": mapping,
        "slurm_config": mapping,
        "labels": labels_rule(gcp_labels.MAX_LABELS),
        "display_name": one_line,
        "boot_disk_size_gb": whole_number(0, MAX_BOOT_DISK_GB, "GB"),
        "spot_max_nodes": whole_number(0, MAX_NODE_COUNT, "nodes"),
        "ondemand_max_nodes": whole_number(0, MAX_NODE_COUNT, "nodes"),
        "login_node_count": whole_number(1, MAX_NODE_COUNT, "nodes"),
    },
    "train_on_cluster": {
        "model_dir": STORAGE,
        "checkpoint_dir": path_rule(gcs=True, optional=True),
        "log_directory": path_rule(gcs=True, optional=True),
        "working_directory": path_rule(gcs=False, optional=False),
        "environment": environment,
        "progress_topic": pubsub_topic,
        "tasks_per_node": whole_number(1, 65535, "tasks per node"),
    },
    "train_custom_job": {
        "base_output_directory": gcs_uri,
        "env": environment,
        "labels": mapping,
        "command": string_list,
        "args": string_list,
        "package_uris": string_list,
        "display_name": display_name,
        "accelerator_count": whole_number(0, 64, "accelerators per replica"),
        "replica_count": whole_number(1, MAX_NODE_COUNT, "replicas"),
    },
    "register_model": {
        "model_dir": STORAGE,
        "labels": labels_rule(MAX_MODEL_LABELS),
        "version_aliases": string_list,
        "display_name": display_name,
        "serving_image": image_uri,
        "metrics_file": path_rule(gcs=True, optional=True),
    },
    "decide_teardown": {
        "schedule_cron": one_line,
        "interval_hours": interval_hours,
        "price_file": one_line,
        "expiry_slack_fraction": non_negative,
        "storage_price_per_hour": non_negative,
        "prewarm_margin_minutes": non_negative,
        "prewarm_dir": path_rule(gcs=True, optional=True),
    },
    "finalize_cluster": {
        "notify_topic": pubsub_topic,
    },
}


def problems(
    component: str, params: Mapping[str, Any], prefix: str = ""
) -> list[errors.SpecProblem]:
    """The problems of ``params`` (names without a rule are skipped), in the given order.

    Args:
        component: The component whose rules apply (a key of ``RULES``).
        params: Parameter name -> value.
        prefix: Put before each field name in the problems (``"model_options."``).
    """
    rules = RULES.get(component, {})
    found = []
    for name, value in params.items():
        if name in rules and (bad := rules[name](value)) is not None:
            found.append(errors.SpecProblem(prefix + name, value, *bad))
    return found


def check(component: str, params: Mapping[str, Any]) -> None:
    """Raises ``errors.SpecValidationError`` listing every problem of ``params``."""
    found = problems(component, params)
    if found:
        raise errors.SpecValidationError(f"{component}'s parameters", found)
