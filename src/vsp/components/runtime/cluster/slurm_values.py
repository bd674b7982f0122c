"""Slurm knob knowledge for the cluster rules: refused keys and legal values.

Keys are compared case- and underscore-insensitively (``PreemptMode`` == ``preempt_mode``), the way
the service matches them [R CREATE]. Value sets are from Slurm's slurm.conf documentation.
"""

from __future__ import annotations

import re

# Legacy scheduling/accounting field -> normalized slurm.conf key.
LEGACY_TO_CONFIG = {
    "priority_type": "PriorityType",
    "priority_weight_age": "PriorityWeightAge",
    "priority_weight_assoc": "PriorityWeightAssoc",
    "priority_weight_fairshare": "PriorityWeightFairshare",
    "priority_weight_job_size": "PriorityWeightJobSize",
    "priority_weight_partition": "PriorityWeightPartition",
    "priority_weight_qos": "PriorityWeightQOS",
    "priority_weight_tres": "PriorityWeightTRES",
    "preempt_type": "PreemptType",
    "preempt_mode": "PreemptMode",
    "preempt_exempt_time": "PreemptExemptTime",
    "accounting_storage_enforce": "AccountingStorageEnforce",
}

PREEMPT_MODES = ("OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "WITHIN")
_EXCLUSIVE_MODES = ("OFF", "CANCEL", "REQUEUE", "SUSPEND")
PREEMPT_TYPES = ("preempt/none", "preempt/partition_prio", "preempt/qos")
PRIORITY_TYPES = ("priority/basic", "priority/multifactor")
ENFORCE_FLAGS = ("all", "associations", "limits", "nojobs", "nosteps", "qos", "safe", "wckeys")
_WEIGHTS = ("age", "assoc", "fairshare", "jobsize", "partition", "qos")
_EXEMPT_TIME = re.compile(r"^([0-9]+-)?([0-9]{1,2}):([0-5][0-9]):([0-5][0-9])\Z")
_TRES_ITEM = r"[A-Za-z][A-Za-z0-9/:._-]*=[0-9]+(\.[0-9]+)?"
_TRES_WEIGHTS = re.compile(rf"^{_TRES_ITEM}(,{_TRES_ITEM})*\Z")

_SCRIPTS_FIX = "Remove it; put the script text in orchestrator_spec.slurm_spec.{}_bash_scripts."
_SLURMDBD_PREFIXES = ("storage", "dbd", "archive", "purge")
_SLURMDBD_KEYS = ("commitdelay", "maxquerytimerange", "trackslurmctlddown", "allownodefacct")


def normalize_key(key: str) -> str:
    """The comparison form of a slurm.conf key: lower case, no underscores."""
    return str(key).replace("_", "").lower()


def refused_key(norm: str, scope: str) -> tuple[str, str] | None:
    """Why the service refuses a (normalized) key at this scope, as ``(problem, fix)``, or None."""
    if norm in ("prolog", "epilog"):
        return (
            "Prolog/Epilog are set by the service, not through config.",
            _SCRIPTS_FIX.format(norm),
        )
    if norm.startswith("healthcheck"):
        return (
            "HealthCheck* parameters are refused: the service runs its own node health checks.",
            "Remove it; node health and repair are handled by the service.",
        )
    if norm in ("requeueexit", "requeueexithold"):
        return (
            "RequeueExit/RequeueExitHold are refused: the service owns requeueing.",
            "Remove it; requeue jobs with PreemptMode=REQUEUE or sbatch --requeue instead.",
        )
    if norm.startswith(_SLURMDBD_PREFIXES) or norm in _SLURMDBD_KEYS:
        return (
            "slurmdbd.conf parameters are refused: the accounting database is managed.",
            "Remove it; accounting storage is configured by the service.",
        )
    if scope == "partition" and norm == "default":
        return (
            "Default is refused in a partition config: the default partition is cluster-scoped.",
            "Remove it and set orchestrator_spec.slurm_spec.default_partition_id instead.",
        )
    return None


def check_value(key: str, value: object, scope: str) -> tuple[str, str] | None:
    """Checks the value of a known key, as ``(problem, fix)``; None when fine or not known.

    Args:
        key: The key, in any case/underscore spelling.
        value: The value (a string in config maps; an int for legacy weights).
        scope: ``cluster``, ``partition`` or ``node``.
    """
    norm = normalize_key(key)
    text = str(value).strip()
    if norm == "preemptmode":
        return check_preempt_mode(text, cluster_scope=scope == "cluster")
    if scope != "cluster":
        return None
    if norm == "preempttype" and text not in PREEMPT_TYPES:
        return ("Not a Slurm preemption plugin.", f"Use one of {', '.join(PREEMPT_TYPES)}.")
    if norm == "prioritytype" and text not in PRIORITY_TYPES:
        return ("Not a Slurm priority plugin.", f"Use one of {', '.join(PRIORITY_TYPES)}.")
    if norm == "preemptexempttime" and not _valid_exempt_time(text):
        return ("Not a Slurm time of the form [D-]HH:MM:SS.", 'Write it like "00:10:00".')
    if norm in {f"priorityweight{w}" for w in _WEIGHTS} and not _non_negative_int(value):
        return ("Priority weights must be non-negative whole numbers.", 'Use e.g. "1000" or "0".')
    if norm == "priorityweighttres" and text and not _TRES_WEIGHTS.fullmatch(text):
        return ("Not a comma-separated TRES=weight list.", 'Write it like "CPU=1000,Mem=2000".')
    if norm == "accountingstorageenforce":
        flags = [f.strip().lower() for f in text.split(",")]
        unknown = [f for f in flags if f not in ENFORCE_FLAGS]
        if unknown:
            return (
                f"Unknown AccountingStorageEnforce flag(s): {', '.join(unknown)}.",
                f"Use a comma-separated subset of {', '.join(ENFORCE_FLAGS)}, "
                "e.g. associations,limits,qos.",
            )  # fmt: skip
    return None


def check_preempt_mode(text: str, cluster_scope: bool = True) -> tuple[str, str] | None:
    """Checks a PreemptMode value such as ``REQUEUE`` or ``SUSPEND,GANG``.

    Tokens come from Slurm's set; at most one of OFF/CANCEL/REQUEUE/SUSPEND; at cluster scope
    SUSPEND needs GANG.
    """
    tokens = [t.strip().upper() for t in text.split(",")]
    unknown = [t for t in tokens if t not in PREEMPT_MODES]
    if unknown or not text:
        return (
            f"Unknown PreemptMode value(s): {', '.join(unknown) or '(empty)'}.",
            f"Use {', '.join(PREEMPT_MODES)} or a comma-separated combination like SUSPEND,GANG.",
        )  # fmt: skip
    exclusive = [t for t in tokens if t in _EXCLUSIVE_MODES]
    if len(exclusive) > 1:
        return (
            f"PreemptMode combines {', '.join(exclusive)}; only one of them may be set.",
            "Keep one of OFF, CANCEL, REQUEUE or SUSPEND (optionally with GANG and WITHIN).",
        )  # fmt: skip
    if cluster_scope and "SUSPEND" in tokens and "GANG" not in tokens:
        return ("PreemptMode SUSPEND needs GANG at cluster scope.", "Use SUSPEND,GANG.")
    return None


def _valid_exempt_time(text: str) -> bool:
    match = _EXEMPT_TIME.fullmatch(text)
    return bool(match) and (not match.group(1) or int(match.group(2)) < 24)


def _non_negative_int(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    return isinstance(value, str) and value.strip().isdigit()
