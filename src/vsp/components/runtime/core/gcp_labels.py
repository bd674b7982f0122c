"""Labels: the ``vsp-`` vocabulary, Google Cloud's label rules, and making values fit them.

Every label the project writes (on clusters, CustomJobs and model versions) is named here, so
the vocabulary is in one place; so are the rules a label must follow (keys: a lowercase letter
first, then lowercase letters, digits, ``_`` and ``-``, at most 63; values: the same characters,
at most 63; at most 64 labels, https://cloud.google.com/resource-manager/docs/labels-overview).
"""

from __future__ import annotations

import datetime
import hashlib
import re
import time
from collections.abc import Mapping

PREFIX = "vsp-"  # labels the project manages; users' own labels never start with it
KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}\Z")
VALUE = re.compile(r"^[a-z0-9_-]{0,63}\Z")
MAX_LABELS = 64

# On clusters.
MANAGED = "vsp-managed"  # created by this project
CREATED_AT = "vsp-created-at"
PIPELINE_RUN = "vsp-pipeline-run"  # the run that created the resource (also on jobs, models)
TEARDOWN = "vsp-teardown"  # the teardown decision: keep, in-use, failed-run...
SHRUNK = "shrink"  # the TEARDOWN value of a cluster whose GPU pools were scaled to no nodes

EXPIRES_AT = "vsp-expires-at"  # a kept cluster may be deleted after this time
LAST_RUN = "vsp-last-run"  # the last run that reused the cluster
LAST_USED_AT = "vsp-last-used-at"
# A run's claim on a cluster it reuses: vsp-lease-<12 hex of the run's identity> = its expiry.
LEASE_PREFIX = "vsp-lease-"
# On CustomJobs.
RUN_KEY = "vsp-run-key"
ATTEMPT = "vsp-attempt"
# On model versions.
DATA_VERSION = "vsp-data-version"
CODE_VERSION = "vsp-code-version"
CODE_SHA256 = "vsp-code-sha256"  # the staged code's sha256, cut to a label value's 63 chars
CHECKPOINT_STEP = "vsp-checkpoint-step"
JOB_COUNT = "vsp-job-count"
JOBS = "vsp-jobs"
PREEMPTIONS = "vsp-preemptions"
GATE = "vsp-gate"  # a model version's evaluation gate: passed or failed

_BAD_VALUE_CHARACTERS = re.compile(r"[^a-z0-9_-]+")
_TIMESTAMP = "%Y%m%dt%H%M%Sz"


def is_managed(key: str) -> bool:
    """Whether a label key is one this project manages."""
    return key.startswith(PREFIX)


def value(text: str) -> str:
    """``text`` made into a valid label value (lowercase, [a-z0-9_-], at most 63 chars)."""
    return _BAD_VALUE_CHARACTERS.sub("-", text.lower()).strip("-")[:63]


def unique_value(text: str) -> str:
    """``text`` as a label value that stays as distinct as ``text``.

    ``value`` cuts at 63 characters, so two texts that share their first 63 (a long pipeline
    name followed by a timestamp) would get one value. Here, when making ``text`` a label value
    cut it or changed more than its case, the value keeps a hash of the whole text instead:
    50 characters of it, ``-``, then 12 hex digits of its SHA-256. A text with no usable
    character at all gives '' (the callers refuse it).
    """
    cleaned = value(text)
    if not cleaned or (len(cleaned) < 63 and cleaned == text.lower()):
        return cleaned
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{cleaned[:50].rstrip('-_')}-{digest}"


def run_value(pipeline_run: str) -> str:
    """The identity of a pipeline run as it is recorded on clusters, jobs and model versions.

    The pipelines pass the run's own unique id (``dsl.PIPELINE_JOB_ID_PLACEHOLDER``); the value
    is ``unique_value`` of it, so a long one is never cut into another run's value. '' stays ''.
    """
    return unique_value(pipeline_run) if pipeline_run else ""


def lease_key(pipeline_run: str) -> str:
    """The label key of the claim ``pipeline_run`` holds on a cluster (``vsp-lease-<hex>``)."""
    digest = hashlib.sha256(run_value(pipeline_run).encode()).hexdigest()[:12]
    return f"{LEASE_PREFIX}{digest}"


def timestamp(moment: datetime.datetime) -> str:
    """A UTC time as a label value, e.g. ``20261202t181600z``."""
    return moment.astimezone(datetime.timezone.utc).strftime(_TIMESTAMP)


def parse_timestamp(text: str) -> datetime.datetime:
    """Inverse of ``timestamp``."""
    return datetime.datetime.strptime(text, _TIMESTAMP).replace(tzinfo=datetime.timezone.utc)


def is_shrunk(labels: dict[str, str] | None) -> bool:
    """Whether a cluster's labels say this tool shrank it (``vsp-teardown=shrink``)."""
    return (labels or {}).get(TEARDOWN) == SHRUNK


def format_label_time(epoch: float) -> str:
    """Format epoch seconds as a label value, ``%Y%m%dt%H%M%Sz`` in UTC."""
    return timestamp(datetime.datetime.fromtimestamp(epoch, tz=datetime.timezone.utc))


def parse_label_time(value: str) -> float:
    """Parse a ``%Y%m%dt%H%M%Sz`` UTC label value into epoch seconds."""
    return parse_timestamp(value).timestamp()


def expired(labels: Mapping[str, str] | None, now: float | None = None) -> bool:
    """Whether a reaper may delete a cluster: its ``vsp-expires-at`` is in the past.

    Clusters without the label (or with an unreadable one) are never expired, so the reaper
    never deletes what this module did not mark.
    """
    value = (labels or {}).get(EXPIRES_AT)
    if not value:
        return False
    try:
        expires_at = parse_label_time(value)
    except ValueError:
        return False
    return (time.time() if now is None else now) > expires_at
