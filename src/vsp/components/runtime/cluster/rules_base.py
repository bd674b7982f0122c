"""Shared pieces of the cluster rules: the problem collector, patterns and small checks.

Patterns follow [R MM] and [R CREATE] (sources listed in ``cluster/__init__``) and the
general Google Cloud naming rules; where the reference is silent the choice is documented here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.core import errors, gcp_labels

# Cluster id [R MM]; with a slurm_spec no hyphen is allowed.
CLUSTER_ID = re.compile(r"^[a-z]([a-z0-9-]{0,8}[a-z0-9])?\Z")
SLURM_CLUSTER_ID = re.compile(r"^[a-z][a-z0-9]{0,9}\Z")
# A full cluster name where an id was expected: its id is the part after the last "/".
CLUSTER_NAME_TAIL = re.compile(r"/modelDevelopmentClusters/([^/]+)\Z")
# display_name: MM allows 128 UTF-8 chars, CREATE says lowercase alphanumeric and <= 10 chars.
# We enforce the strict reading, plus a leading letter (same shape as a Slurm cluster id).
DISPLAY_NAME = re.compile(r"^[a-z][a-z0-9]{0,9}\Z")
# Node pool and partition ids (our choice, the reference gives none): a lowercase letter first,
# then lowercase letters, digits or hyphens, no trailing hyphen, 1-16 chars. Node VMs are named
# "{CLUSTER_ID}-{POOL}-{INDEX}" [R RESIL]; 10 + 1 + 16 + 1 + index stays far below the 63-char
# Compute Engine limit, and the id is also a Slurm partition/nodeset name.
POOL_ID = re.compile(r"^[a-z]([a-z0-9-]{0,14}[a-z0-9])?\Z")
POOL_ID_RULE = (
    "1-16 chars: a lowercase letter, then lowercase letters, digits or '-', not ending in '-'"
)
ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]\Z")
MACHINE_TYPE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+\Z")
ACCELERATOR_TYPE = re.compile(r"^[A-Z][A-Z0-9_]*\Z")
NETWORK = re.compile(r"^projects/([^/\s]+)/global/networks/([^/\s]+)\Z")
SUBNETWORK = re.compile(r"^projects/([^/\s]+)/regions/([^/\s]+)/subnetworks/([^/\s]+)\Z")
INSTANCE = re.compile(r"^projects/[^/\s]+/locations/[^/\s]+/instances/[^/\s]+\Z")
RESERVATION = re.compile(
    r"^projects/[^/\s]+/zones/([^/\s]+)/reservations/[^/\s]+"
    r"(/reservationBlocks/[^/\s]+(/reservationSubBlocks/[^/\s]+)?)?\Z"
)
NODE_IMAGE = re.compile(r"^projects/[^/\s]+/global/images/(family/)?[^/\s]+\Z")
EMAIL = re.compile(r"^[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}\Z")
DURATION = re.compile(r"^([0-9]+(\.[0-9]{1,9})?)s\Z")

INSTANCE_FORM = "projects/PROJECT/locations/ZONE_OR_REGION/instances/INSTANCE"
RESERVATION_FORM = (
    "projects/PROJECT/zones/ZONE/reservations/NAME[/reservationBlocks/B[/reservationSubBlocks/S]]"
)


class Problems:
    """Collects every SpecProblem found; raises them together at the end."""

    def __init__(self) -> None:
        self.items: list[errors.SpecProblem] = []

    def add(self, field: str, value: Any, problem: str, fix: str) -> None:
        """Records one problem.

        Args:
            field: Dotted path of the field, e.g. ``node_pools[1].zone``.
            value: The offending value (None when missing).
            problem: What is wrong.
            fix: How to fix it.
        """
        self.items.append(errors.SpecProblem(field, value, problem, fix))

    def missing(self, field: str, fix: str) -> None:
        """Records a required field that is missing."""
        self.add(field, None, "Required field is missing or empty.", fix)

    def raise_if_any(self, what: str) -> None:
        """Raises ``SpecValidationError(what, problems)`` when anything was recorded."""
        if self.items:
            raise errors.SpecValidationError(what, self.items)


def check_pattern(
    problems: Problems, field: str, value: Any, pattern: re.Pattern[str], form: str
) -> bool:
    """Checks that ``value`` is a string matching ``pattern``; records a problem if not.

    Returns:
        True when the value matches.
    """
    if isinstance(value, str) and pattern.fullmatch(value):
        return True
    problems.add(field, value, f"Does not have the expected form {form}.", f"Use the form {form}.")
    return False


def check_labels(problems: Problems, field: str, labels: Mapping[str, Any] | None) -> None:
    """Checks a label map against the Google Cloud label rules.

    Keys start with a lowercase letter and hold lowercase letters, digits, ``_`` or ``-`` (at most
    63 chars); values hold the same characters (at most 63, may be empty); at most 64 labels.
    """
    if not labels:
        return
    if len(labels) > gcp_labels.MAX_LABELS:
        problems.add(
            field, f"{len(labels)} labels", f"At most {gcp_labels.MAX_LABELS} labels are allowed.",
            "Remove labels until 64 or fewer remain.",
        )  # fmt: skip
    for key, value in labels.items():
        if not gcp_labels.KEY.fullmatch(str(key)):
            problems.add(
                f"{field}.{key}", key,
                "Label key is invalid (a lowercase letter first, then lowercase letters, digits, "
                "'_' or '-', at most 63 chars).",
                f"Rename the key, e.g. to {_label_hint(str(key))!r}.",
            )  # fmt: skip
        if not isinstance(value, str) or not gcp_labels.VALUE.fullmatch(value):
            problems.add(
                f"{field}.{key}", value,
                "Label value is invalid (lowercase letters, digits, '_' or '-', at most 63 chars).",
                f"Use a value like {_label_hint(str(value))!r}.",
            )  # fmt: skip


def check_reserved_labels(problems: Problems, field: str, labels: Mapping[str, Any] | None) -> None:
    """Refuses user label keys with the ``vsp-`` prefix: this tool's own labels (an expiry, a
    teardown decision, a run) that a user value would fake, e.g. getting a new cluster reaped."""
    for key in labels or {}:
        if str(key).startswith(gcp_labels.PREFIX):
            problems.add(
                f"{field}.{key}", key,
                f"Label keys starting with {gcp_labels.PREFIX!r} are reserved for this tool.",
                f"Rename the key without the {gcp_labels.PREFIX!r} prefix.",
            )  # fmt: skip


def _label_hint(text: str) -> str:
    hint = re.sub(r"[^a-z0-9_-]", "-", text.lower()).strip("-")[:63]
    return hint if hint[:1].isalpha() else f"x{hint}"[:63]


def parse_duration(value: str) -> float | None:
    """Seconds in a protobuf duration string like ``"3600s"``, or None when malformed."""
    match = DURATION.fullmatch(value.strip()) if isinstance(value, str) else None
    return float(match.group(1)) if match else None


def check_resource_list(
    problems: Problems, field: str, values: list[str] | None, pattern: re.Pattern[str], form: str
) -> None:
    """Checks every entry of a list of resource names and that none repeats."""
    seen: set[str] = set()
    for index, value in enumerate(values or []):
        check_pattern(problems, f"{field}[{index}]", value, pattern, form)
        if value in seen:
            problems.add(f"{field}[{index}]", value, "Listed twice.", "Remove the duplicate entry.")
        seen.add(value)
