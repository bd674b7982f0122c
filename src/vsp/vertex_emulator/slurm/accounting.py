"""Emulated slurmdbd accounting: accounts, users, associations and their enforcement.

When ``AccountingStorageEnforce`` includes associations (or limits/qos/safe/wckeys, which imply
it), a submit is rejected like Slurm (error 2045 "Invalid account or account/partition
combination specified") unless the caller's user has an association with the job's account
(and partition, when the association names one). A job without ``account`` uses the user's
default account. The REST form of ``sacctmgr add User Accounts=A Partition=P U`` is
``POST /slurmdb/v0.0.42/associations {"associations": [{"account": A, "user": U,
"partition": P}]}``; it creates the user when missing. Every POST is idempotent. The
account must exist first (``POST /slurmdb/v0.0.42/accounts``). ``root`` exists from the start.
"""

from __future__ import annotations

from typing import Any

from vsp.vertex_emulator.slurm import context as slurm_context
from vsp.vertex_emulator.slurm import jobdesc as slurm_jobdesc

INVALID_ACCOUNT = "Invalid account or account/partition combination specified"

Reply = tuple[int, dict[str, Any]]


def database(ctx: slurm_context.ClusterContext) -> dict[str, Any]:
    """The cluster's accounting database (seeded with ``root``), stored in its state."""
    db = ctx.state.get("accounting")
    if db is None:
        db = {
            "accounts": {
                "root": {
                    "name": "root",
                    "description": "default root account",
                    "organization": "root",
                }
            },
            "users": {
                "root": {"name": "root", "default_account": "root", "admin": "Administrator"}
            },
            "associations": [],
            "next_id": 1,
        }
        ctx.state["accounting"] = db
        _add_association(ctx, db, {"account": "root", "user": "root"})
    return db


def resolve_account(
    ctx: slurm_context.ClusterContext, user: str, account: str, partition: str
) -> str:
    """The account a job runs under; checks associations when they are enforced.

    Raises:
        slurm_jobdesc.SlurmError: No association allows it (enforcement on).
    """
    db = database(ctx)
    account = account or db["users"].get(user, {}).get("default_account") or ""
    if not ctx.topo.enforce_associations:
        return account
    allowed = account in db["accounts"] and any(
        assoc["user"] == user
        and assoc["account"] == account
        and assoc["partition"] in ("", partition)
        and assoc["cluster"] in ("", ctx.topo.cluster_id)
        for assoc in db["associations"]
    )
    if not allowed:
        raise slurm_jobdesc.SlurmError(
            500,
            slurm_jobdesc.ESLURM_INVALID_ACCOUNT,
            INVALID_ACCOUNT,
            "Batch job submission failed",
            "slurm_submit_batch_job()",
        )
    return account


def _items(body: Any, key: str) -> list[dict[str, Any]]:
    items = body.get(key) if isinstance(body, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise slurm_jobdesc.parse_error(f"Expected a list of objects in {key}", f"#/{key}")
    return items


def _text(item: dict[str, Any], field: str, where: str, required: bool = True) -> str:
    value = item.get(field)
    if value is None or value == "":
        if required:
            raise slurm_jobdesc.parse_error(f"{field} is required", f"#/{where}/{field}")
        return ""
    if not isinstance(value, str):
        raise slurm_jobdesc.parse_error(f"{field} must be a string", f"#/{where}/{field}")
    return value


def _short(assoc: dict[str, Any]) -> dict[str, Any]:
    return {key: assoc[key] for key in ("account", "cluster", "partition", "user", "id")}


def _add_association(
    ctx: slurm_context.ClusterContext, db: dict[str, Any], item: dict[str, Any]
) -> dict[str, Any]:
    assoc = {
        "account": item["account"],
        "user": item["user"],
        "partition": item.get("partition") or "",
        "cluster": item.get("cluster") or ctx.topo.cluster_id,
    }
    for existing in db["associations"]:
        if all(existing[k] == assoc[k] for k in assoc):
            return existing
    assoc["id"] = db["next_id"]
    db["next_id"] += 1
    db["associations"].append(assoc)
    return assoc


def get_accounts(ctx: slurm_context.ClusterContext) -> Reply:
    """GET /slurmdb/v0.0.42/accounts."""
    db = database(ctx)
    accounts = []
    for account in db["accounts"].values():
        linked = [_short(a) for a in db["associations"] if a["account"] == account["name"]]
        accounts.append({**account, "associations": linked, "coordinators": [], "flags": []})
    return 200, {"accounts": accounts}


def post_accounts(ctx: slurm_context.ClusterContext, body: Any) -> Reply:
    """POST /slurmdb/v0.0.42/accounts ``{"accounts": [{"name", "description",
    "organization"}]}`` (adds or updates)."""
    db = database(ctx)
    for item in _items(body, "accounts"):
        name = _text(item, "name", "accounts")
        db["accounts"][name] = {
            "name": name,
            "description": _text(item, "description", "accounts", False) or name,
            "organization": _text(item, "organization", "accounts", False) or name,
        }
    return 200, {}


def get_users(ctx: slurm_context.ClusterContext) -> Reply:
    """GET /slurmdb/v0.0.42/users."""
    db = database(ctx)
    users = []
    for user in db["users"].values():
        users.append(
            {
                "administrator_level": [user.get("admin") or "None"],
                "associations": [
                    _short(a) for a in db["associations"] if a["user"] == user["name"]
                ],
                "coordinators": [],
                "default": {"account": user.get("default_account") or "", "wckey": ""},
                "flags": [],
                "name": user["name"],
                "wckeys": [],
            }
        )
    return 200, {"users": users}


def post_users(ctx: slurm_context.ClusterContext, body: Any) -> Reply:
    """POST /slurmdb/v0.0.42/users ``{"users": [{"name", "default": {"account"}}]}``."""
    db = database(ctx)
    for item in _items(body, "users"):
        name = _text(item, "name", "users")
        default = item.get("default") if isinstance(item.get("default"), dict) else {}
        user = db["users"].setdefault(name, {"name": name, "default_account": "", "admin": "None"})
        if default.get("account"):
            user["default_account"] = str(default["account"])
        levels = item.get("administrator_level")
        if isinstance(levels, list) and levels:
            user["admin"] = str(levels[0])
    return 200, {}


def get_associations(ctx: slurm_context.ClusterContext) -> Reply:
    """GET /slurmdb/v0.0.42/associations."""
    db = database(ctx)
    shown = []
    for assoc in db["associations"]:
        user = db["users"].get(assoc["user"], {})
        shown.append(
            {
                **_short(assoc),
                "flags": [],
                "is_default": user.get("default_account") == assoc["account"],
                "parent_account": "" if assoc["account"] == "root" else "root",
                "qos": ["normal"],
                "shares_raw": 1,
            }
        )
    return 200, {"associations": shown}


def post_associations(ctx: slurm_context.ClusterContext, body: Any) -> Reply:
    """POST /slurmdb/v0.0.42/associations ``{"associations": [{"account", "user",
    "partition"?, "cluster"?}]}``: ``sacctmgr add User Accounts=A Partition=P U``."""
    db = database(ctx)
    items = _items(body, "associations")
    for item in items:
        account = _text(item, "account", "associations")
        _text(item, "user", "associations")
        if account not in db["accounts"]:
            raise slurm_jobdesc.SlurmError(
                500,
                slurm_jobdesc.ESLURM_INVALID_ACCOUNT,
                "Invalid account",
                f"Account {account!r} does not exist; add it with POST "
                "/slurmdb/v0.0.42/accounts first",
                "slurmdb_associations_add()",
            )
    for item in items:
        _add_association(ctx, db, item)
        user = db["users"].setdefault(
            item["user"], {"name": item["user"], "default_account": "", "admin": "None"}
        )
        user["default_account"] = user["default_account"] or item["account"]
    return 200, {}
