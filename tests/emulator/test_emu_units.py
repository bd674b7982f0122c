"""Building blocks: casing, router, store, settings, fault rules, extensions and ticks."""

from __future__ import annotations

import json

import pytest
import requests

from vsp.vertex_emulator import (
    app,
    casing,
    clock,
    config,
    errors,
    fault_rules,
    router,
    server,
    store,
)
from vsp.vertex_emulator.clusters import api as clusters
from vsp.vertex_emulator.pubsub import subscriptions as pubsub_subscriptions
from vsp.vertex_emulator.pubsub import topics as pubsub_topics


def test_case_conversion_keeps_map_keys():
    body = {
        "node_pools": [{"machine_spec": {"machine_type": "x"}, "labels": {"my_label": "v"}}],
        "orchestratorSpec": {"slurm_spec": {"config": {"Preempt_Mode": "REQUEUE"}}},
        "@type": "t",
    }
    camel = casing.to_camel(body)
    assert camel == {
        "nodePools": [{"machineSpec": {"machineType": "x"}, "labels": {"my_label": "v"}}],
        "orchestratorSpec": {"slurmSpec": {"config": {"Preempt_Mode": "REQUEUE"}}},
        "@type": "t",
    }
    assert casing.to_snake(camel)["orchestrator_spec"]["slurm_spec"]["config"] == {
        "Preempt_Mode": "REQUEUE"
    }
    assert casing.snake_to_camel("boot_disk_size_gb") == "bootDiskSizeGb"
    assert casing.camel_to_snake("bootDiskSizeGb") == "boot_disk_size_gb"
    with pytest.raises(casing.CaseConflictError, match="scaling_spec"):
        casing.to_camel({"node_pools": [{"scaling_spec": {}, "scalingSpec": {}}]})


def test_router_serves_both_versions_and_named_groups():
    routes = router.Router()

    def handler(request):
        return router.Response()

    routes.add_api("GET", r"projects/(?P<project>[^/]+)/things/(?P<thing>[^/:]+)", handler)
    routes.add_api("POST", r"projects/(?P<project>[^/]+)/things/(?P<thing>[^/:]+):run", handler)
    route, params = routes.match("get", "/v1/projects/p/things/t")
    assert params == {"api_version": "v1", "project": "p", "thing": "t"}
    assert routes.match("POST", "/v1beta1/projects/p/things/t:run")[1]["thing"] == "t"
    assert routes.match("POST", "/v1beta1/projects/p/things/t") is None
    assert routes.match("GET", "/v2/projects/p/things/t") is None


def test_store_persists_atomically_and_rolls_back(tmp_path):
    state = store.StateStore(tmp_path)
    document = {"a": [1]}
    state.put("things", "k", document)
    document["a"].append(2)
    assert state.get("things", "k") == {"a": [1]}
    with pytest.raises(RuntimeError), state.transaction():
        state.put("things", "k", {"a": "changed"})
        state.put("things", "k2", {})
        raise RuntimeError("boom")
    assert state.items("things") == [("k", {"a": [1]})]
    assert store.StateStore(tmp_path).get("things", "k") == {"a": [1]}
    assert store.StateStore(tmp_path).keys("things") == ["k"]
    assert state.delete("things", "k") and not state.delete("things", "k")
    assert store.StateStore(tmp_path).items("things") == []
    assert sorted(p.name for p in (tmp_path / "store").iterdir() if "-" not in p.name) == [
        "state.sqlite3"
    ]
    with pytest.raises(ValueError):
        state.get("../escape", "k")


def test_store_keeps_insertion_order_across_reopening(tmp_path):
    state = store.StateStore(tmp_path)
    for key in ("b", "a", "c"):
        state.put("things", key, {"key": key})
    state.put("things", "a", {"key": "a", "changed": True})
    with state.transaction():
        state.delete("things", "b")
        state.put("things", "b", {"key": "b", "again": True})
    assert state.keys("things") == ["a", "c", "b"]
    reopened = store.StateStore(tmp_path)
    assert reopened.items("things") == [
        ("a", {"key": "a", "changed": True}),
        ("c", {"key": "c"}),
        ("b", {"key": "b", "again": True}),
    ]
    assert reopened.keys("things", prefix="c") == ["c"]
    assert reopened.count("things") == 3


def test_store_migrates_json_collection_files(tmp_path):
    legacy = tmp_path / "store"
    legacy.mkdir()
    (legacy / "things.json").write_text(json.dumps({"z": {"n": 1}, "y": {"n": 2}}))
    state = store.StateStore(tmp_path)
    assert state.items("things") == [("z", {"n": 1}), ("y", {"n": 2})]
    assert not (legacy / "things.json").exists()
    assert json.loads((legacy / "things.json.migrated").read_text()) == {
        "z": {"n": 1},
        "y": {"n": 2},
    }
    assert store.StateStore(tmp_path).keys("things") == ["z", "y"]


def test_store_refuses_json_files_beside_a_filled_database(tmp_path):
    store.StateStore(tmp_path).put("things", "k", {})
    (tmp_path / "store" / "things.json").write_text("{}")
    with pytest.raises(store.StoreError, match=r"things\.json.*Fix: remove those files"):
        store.StateStore(tmp_path)
    (tmp_path / "store" / "things.json").write_text("[]")
    (tmp_path / "store" / "state.sqlite3").unlink()
    with pytest.raises(store.StoreError, match="must hold a JSON object"):
        store.StateStore(tmp_path)


def test_settings_validation_and_round_trip(tmp_path):
    settings = config.EmulatorSettings.from_dict({"provisioning_delay_seconds": 1, "time_scale": 2})
    assert settings.provisioning_delay_seconds == 1.0
    assert settings.scaled(settings.provisioning_delay_seconds) == 2.0
    with pytest.raises(ValueError, match="unknown settings"):
        config.EmulatorSettings.from_dict({"provisioning_delay": 1})
    with pytest.raises(ValueError):
        config.EmulatorSettings(update_delay_seconds=-1)
    with pytest.raises(ValueError):
        config.EmulatorSettings(reject_unknown_fields="yes")
    assert config.load_settings(tmp_path) is None
    config.save_settings(tmp_path, settings)
    assert config.load_settings(tmp_path) == settings


def test_fault_rule_aliases_and_defaults():
    rule = fault_rules.FaultRule.from_dict({"action": "reset_after", "status": 500})
    assert (rule.action, rule.when, rule.http_status, rule.times, rule.skip) == (
        "reset",
        "after",
        500,
        1,
        0,
    )
    request = fault_rules.RequestInfo("POST", "/v1/x:callSlurmRestApi", {"a": ["1", "2"]}, "{}")
    assert fault_rules.FaultRule("status", path=r":callSlurmRestApi$", method="post").matches(
        request
    )
    assert fault_rules.FaultRule("status", query={"a": "^2$"}).matches(request)
    assert not fault_rules.FaultRule("status", method="GET|DELETE").matches(request)
    assert not fault_rules.FaultRule("status", body="job").matches(request)


def test_a_freeze_rule_may_name_one_rank():
    from vsp.vertex_emulator.slurm import freeze  # registers slurm_freeze

    rule = fault_rules.FaultRule.from_dict({"action": freeze.FAULT_ACTION, "step": 5, "rank": 1})
    assert (rule.step, rule.rank) == (5, 1)
    assert fault_rules.FaultRule(freeze.FAULT_ACTION, step=5).rank is None
    with pytest.raises(ValueError, match="'rank' must not be negative"):
        fault_rules.FaultRule(freeze.FAULT_ACTION, rank=-1)


def test_resource_modules_can_declare_fault_actions(emulator, monkeypatch):
    monkeypatch.setattr(fault_rules, "_RESOURCE_ACTIONS", set(fault_rules._RESOURCE_ACTIONS))
    with pytest.raises(ValueError):
        fault_rules.FaultRule.from_dict({"action": "test_preempt"})
    fault_rules.register_action("test_preempt")
    rule = emulator.add_fault(action="test_preempt", path="never")
    assert rule.action == "test_preempt"
    with pytest.raises(ValueError):
        fault_rules.register_action("reset")


def test_error_helpers_render_google_json():
    exc = errors.invalid_argument("bad", [errors.FieldViolation("node_pools", "required")])
    assert exc.http_status == 400
    assert exc.to_body() == {
        "error": {
            "code": 400,
            "message": "bad",
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"field": "node_pools", "description": "required"}],
                }
            ],
        }
    }
    assert errors.rpc_status("RESOURCE_EXHAUSTED", "stockout") == {
        "code": 8,
        "message": "stockout",
    }


def test_timestamps_round_trip():
    assert clock.rfc3339(0) == "1970-01-01T00:00:00.000000Z"
    assert clock.parse_rfc3339("2025-01-31T12:00:00.123456789Z") == pytest.approx(
        clock.parse_rfc3339("2025-01-31T12:00:00.123456Z")
    )


def test_every_service_is_in_the_table():
    assert clusters.register in app.services()
    assert pubsub_topics.register in app.services()
    assert pubsub_subscriptions.register in app.services()
    assert len(app.services()) == 8


def test_an_extension_adds_routes_ticks_and_operation_kinds(tmp_path):
    ticks = []

    def register(emulator_app):
        def submit(request):
            body = {"status": 200, "structuredBody": {"job_id": 1}, "echo": request.body}
            return router.Response(body)

        def start_job(request):
            operation = request.app.operations.create(
                parent="projects/p/locations/l",
                kind="demo.start",
                metadata={"@type": "demo"},
                due=request.app.now(),
                now=request.app.now(),
            )
            return router.Response(operation)

        emulator_app.router.add_api(
            "POST",
            r"projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
            r"/modelDevelopmentClusters/(?P<cluster>[^/:]+):callSlurmRestApi",
            submit,
        )
        emulator_app.router.add_api("POST", r"demo:start", start_job)
        emulator_app.operations.register_kind("demo.start", lambda record, at: ({"ok": 1}, None))
        emulator_app.add_tick(lambda a, now: ticks.append(now), name="demo")

    with server.EmulatorServer(tmp_path, extensions=[clusters.register, register]) as emulator:
        url = f"{emulator.base_url}/v1beta1/projects/p/locations/l/modelDevelopmentClusters/c"
        answer = requests.post(url + ":callSlurmRestApi", json={"method": "HTTP_METHOD_GET"})
        assert answer.json()["echo"] == {"method": "HTTP_METHOD_GET"}
        assert requests.get(url).status_code == 404
        operation = requests.post(f"{emulator.base_url}/v1/demo:start").json()
        done = requests.get(f"{emulator.base_url}/v1/{operation['name']}").json()
        assert done["response"] == {"ok": 1}
        assert ticks
