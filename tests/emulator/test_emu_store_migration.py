"""A state directory of the JSON-file store is migrated into the SQLite store when opened."""

from __future__ import annotations

import json
import sqlite3
import time

import requests

from vsp.vertex_emulator import clock, store


def _export_to_json_files(state_dir):
    """Rewrites a state directory in the earlier layout (``store/{collection}.json``)."""
    database = store.database_path(state_dir)
    with sqlite3.connect(database) as connection:
        rows = connection.execute(
            "SELECT collection, key, document FROM documents ORDER BY rowid"
        ).fetchall()
    connection.close()
    collections = {}
    for collection, key, document in rows:
        collections.setdefault(collection, {})[key] = json.loads(document)
    for path in database.parent.glob(f"{database.name}*"):
        path.unlink()
    return collections


def test_json_state_is_migrated_with_its_operations(
    emulator_factory, tmp_path, cluster_body, emulator_api_for
):
    state_dir = tmp_path / "state"
    first = emulator_factory(state_dir, provisioning_delay_seconds=3600)
    frozen = [time.time()]
    first.app.clock = lambda: frozen[0]
    api = emulator_api_for(first)
    done_name = api.create_cluster("c1", cluster_body).json()["name"]
    frozen[0] += 3601
    assert api.wait_operation(done_name)["done"] is True
    pending_name = api.create_cluster("c2", cluster_body).json()["name"]
    first.stop()

    collections = _export_to_json_files(state_dir)
    operations = collections.pop("operations")
    assert set(collections.pop("operations_due")) == {pending_name}
    for record in operations.values():
        record.pop("done_at", None)  # the earlier layout had no done_at
    old = clock.rfc3339(time.time() - 8 * 24 * 3600)
    operations[done_name]["operation"]["metadata"]["genericMetadata"]["updateTime"] = old
    collections["operations"] = operations
    for collection, documents in collections.items():
        (state_dir / "store" / f"{collection}.json").write_text(json.dumps(documents))

    second = emulator_factory(state_dir, provisioning_delay_seconds=3600)
    api = emulator_api_for(second)
    assert requests.get(api.url(done_name)).status_code == 404  # finished 8 days ago
    assert requests.get(api.url(pending_name)).json()["done"] is False
    assert second.app.store.keys("operations_due") == [pending_name]
    states = {
        c["name"].rsplit("/", 1)[1]: c["clusterStatus"]["state"]
        for c in requests.get(api.clusters_url()).json()["modelDevelopmentClusters"]
    }
    assert states == {"c1": "RUNNING", "c2": "PROVISIONING"}
    migrated = sorted(p.name for p in (state_dir / "store").glob("*.json.migrated"))
    assert migrated == sorted(f"{c}.json.migrated" for c in collections)
    assert list((state_dir / "store").glob("*.json")) == []
