"""How the Model Registry is stored: a small document per model, and one per version.

``models`` holds, keyed by the model name (without ``@``), ``{"next": <next version number>,
"createTime": ..., "aliases": {alias: versionId}}``; ``model_versions`` holds each version's
public JSON keyed by ``{model name}@{versionId as 20 digits}``, so the keys of a model sort in
version order and adding a version writes two small documents whatever the model's size.

State directories of the earlier layout (one ``models`` document holding every version under
``"versions"``) are converted when the service starts (``migrate``).
"""

from __future__ import annotations

from typing import Any

MODELS = "models"
VERSIONS = "model_versions"
DEFAULT_ALIAS = "default"


def version_key(model_name: str, version_id: str | int) -> str:
    """The ``model_versions`` key of a version (its id padded so keys sort numerically)."""
    return f"{model_name}@{int(version_id):020d}"


def new_model(create_time: str) -> dict[str, Any]:
    """The record of a model with no version yet."""
    return {"next": 1, "createTime": create_time, "aliases": {}}


def load(store: Any, model_name: str) -> dict[str, Any] | None:
    """The model's record, or None."""
    return store.get(MODELS, model_name)


def version(store: Any, model_name: str, version_id: str) -> dict[str, Any] | None:
    """One version's public JSON, or None (also for an id that is not a number)."""
    if not _is_id(version_id):
        return None
    return store.get(VERSIONS, version_key(model_name, version_id))


def version_keys(store: Any, model_name: str) -> list[str]:
    """The ``model_versions`` keys of a model, oldest version first."""
    return sorted(store.keys(VERSIONS, prefix=f"{model_name}@"))


def put_version(store: Any, document: dict[str, Any]) -> None:
    """Stores a version's public JSON (its ``name`` and ``versionId`` give the key)."""
    store.put(VERSIONS, version_key(document["name"], document["versionId"]), document)


def resolve(store: Any, record: dict[str, Any], model_name: str, wanted: str) -> str | None:
    """The version id ``wanted`` names (a version id or an alias), or None."""
    if _is_id(wanted) and store.contains(VERSIONS, version_key(model_name, wanted)):
        return wanted
    return record["aliases"].get(wanted)


def give_aliases(
    store: Any,
    record: dict[str, Any],
    target: dict[str, Any],
    aliases: list[str],
    stamp: str,
) -> None:
    """Gives ``aliases`` to ``target``, taking each one from the version holding it.

    The other versions are written here; ``target`` and ``record`` are the caller's to store.
    """
    model_name, version_id = target["name"], target["versionId"]
    for alias in aliases:
        holder = record["aliases"].get(alias)
        if holder is not None and holder != version_id:
            other = version(store, model_name, holder)
            if other is not None:
                other["versionAliases"] = [a for a in other["versionAliases"] if a != alias]
                other["versionUpdateTime"] = other["updateTime"] = stamp
                put_version(store, other)
        record["aliases"][alias] = version_id
        if alias not in target["versionAliases"]:
            target["versionAliases"].append(alias)


def take_aliases(record: dict[str, Any], target: dict[str, Any], aliases: list[str]) -> None:
    """Removes ``aliases`` from ``target`` (and from the model's alias map)."""
    for alias in aliases:
        if record["aliases"].get(alias) == target["versionId"]:
            del record["aliases"][alias]
    target["versionAliases"] = [a for a in target["versionAliases"] if a not in aliases]


def migrate(store: Any) -> int:
    """Converts models stored in the earlier one-document layout; returns how many."""
    with store.transaction():
        legacy = store.select(MODELS, lambda record: "versions" in record)
        for name, record in legacy:
            aliases = {}
            for version_id, document in record["versions"].items():
                for alias in document.get("versionAliases") or []:
                    aliases[alias] = version_id
                put_version(store, document)
            store.put(
                MODELS,
                name,
                {"next": record["next"], "createTime": record["createTime"], "aliases": aliases},
            )
    return len(legacy)


def _is_id(text: str) -> bool:
    """Whether ``text`` is a version id as the service writes it (decimal, no leading 0)."""
    return text.isascii() and text.isdigit() and text == str(int(text))
