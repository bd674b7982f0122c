"""Slurm accounting through slurmdb REST: the idempotent ``sacctmgr add User`` equivalent.

``ensure_association`` is what an admin types on a login node as
``sudo sacctmgr add User Accounts=ACCOUNT Partition=PARTITION USER`` (needed when the cluster sets
``AccountingStorageEnforce=associations``: a user without an association gets
``Invalid account or account/partition combination specified``). Over REST it reads
``/slurmdb/v0.0.42/associations``, ``/accounts`` and ``/users`` and POSTs only what is missing:

* ``{"accounts": [{"name", "description", "organization"}]}``
* ``{"users": [{"name", "default": {"account"}}]}``
* ``{"associations": [{"account", "user", "partition"}]}`` (plus ``cluster`` when given)

Writing accounting needs Slurm AdminLevel Operator or higher for the caller's Linux account;
otherwise Slurm refuses and a ``SlurmRejectedError`` explains the fix.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import job_checks

log = logging.getLogger(__name__)


@dataclasses.dataclass
class AssociationReport:
    """What ``ensure_association`` added (all empty when everything already existed).

    Attributes:
        accounts: Account names created.
        users: User names created.
        associations: ``(account, user, partition)`` associations created.
    """

    accounts: list[str] = dataclasses.field(default_factory=list)
    users: list[str] = dataclasses.field(default_factory=list)
    associations: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when anything was added."""
        return bool(self.accounts or self.users or self.associations)


def _check_names(account: str, user: str, partitions: list[str]) -> None:
    named = [("account", account), ("user", user)]
    named += [(f"partitions[{i}]", p) for i, p in enumerate(partitions)]
    problems = [
        errors.SpecProblem(field, value, "is not a Slurm name.", "pass a valid name.")
        for field, value in named
        if not job_checks.is_slurm_name(value)
    ]
    if not partitions:
        problems.append(
            errors.SpecProblem("partitions", partitions, "is empty.", "name a partition.")
        )
    if problems:
        raise errors.SpecValidationError("Slurm association", problems)


def _names(payload: dict[str, Any], key: str) -> set[str]:
    return {str(r.get("name")) for r in payload.get(key) or [] if isinstance(r, dict)}


def ensure_association(
    client: Any,
    account: str,
    user: str,
    partitions: list[str],
    *,
    organization: str = "",
    description: str = "",
    cluster: str | None = None,
) -> AssociationReport:
    """Makes sure ``user`` may run under ``account`` on each partition; idempotent.

    An existing association of the (account, user) pair without a partition covers every
    partition. When no association is missing, only the associations list is read.

    Args:
        client: A ``slurm_api.SlurmClient``.
        account: Slurm account name.
        user: The Linux user name (``SlurmClient.whoami()`` for the caller).
        partitions: Partitions the user must be able to use.
        organization: Organization of a newly created account (default: the account name).
        description: Description of a newly created account.
        cluster: Slurm cluster name to put in the associations (None: slurmdbd's default).

    Returns:
        What was added.

    Raises:
        errors.SpecValidationError: A name is not a Slurm name, or no partition is given.
        slurm_errors.SlurmRejectedError: Slurm refused a change (e.g. not an operator).
    """
    _check_names(account, user, partitions)
    report = AssociationReport()
    listing = client.read(client.slurmdb_path("associations"), "listing of associations")
    have = {
        (a.get("account"), a.get("user"), a.get("partition") or "")
        for a in listing.get("associations") or []
        if isinstance(a, dict)
    }
    if (account, user, "") in have:
        return report
    missing = [p for p in dict.fromkeys(partitions) if (account, user, p) not in have]
    if not missing:
        return report
    accounts = client.read(client.slurmdb_path("accounts"), "listing of accounts")
    users = client.read(client.slurmdb_path("users"), "listing of users")
    if account not in _names(accounts, "accounts"):
        record = {
            "name": account,
            "description": description or f"{account} (added by vertex-slurm-pipelines)",
            "organization": organization or account,
        }
        client.write(client.slurmdb_path("accounts"), {"accounts": [record]}, f"account {account}")
        report.accounts.append(account)
    if user not in _names(users, "users"):
        body = {"users": [{"name": user, "default": {"account": account}}]}
        client.write(client.slurmdb_path("users"), body, f"user {user}")
        report.users.append(user)
    extra = {"cluster": cluster} if cluster else {}
    body = {
        "associations": [
            {"account": account, "user": user, "partition": p, **extra} for p in missing
        ]
    }
    client.write(client.slurmdb_path("associations"), body, f"association {user}/{account}")
    report.associations.extend((account, user, p) for p in missing)
    log.info("Slurm accounting: added %s", report)
    return report
