"""Create-or-reuse and delete of clusters, against the in-process Vertex emulator."""

from __future__ import annotations

import copy
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest
import requests

from vsp.components.runtime.cluster import ops, resource, rules
from vsp.components.runtime.core import errors, gcp_resources, polling, rest

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "llmtrain"
CREATE_PATH = f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters"
CLUSTER_PATH = f"{CREATE_PATH}/{CLUSTER}"
LABELS = {"vsp-managed": "true", "vsp-pipeline-run": "run-1", "vsp-created-at": "20261202t000000z"}
FAST = resource.ClusterOptions(
    timeout=30, backoff=polling.Backoff(initial=0.05, maximum=0.2, jitter=0)
)


def spec(**changes):
    """The full example spec, with dotted-path changes applied to its dict form."""
    data = rules.load_cluster_spec(DATA / "cluster_full.yaml").to_request_body()
    for path, value in changes.items():
        node = data
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[int(part)] if part.isdigit() else node[part]
        node[leaf] = value
    return rules.parse_cluster_spec(data)


def manager(tmp_path, **option_changes) -> ops.ClusterManager:
    options = copy.deepcopy(FAST)
    for key, value in option_changes.items():
        setattr(options, key, value)
    client = rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))
    ref = resource.ClusterRef(PROJECT, LOCATION, CLUSTER)
    return ops.ClusterManager(
        resource.ClusterResource(
            client, ref, gcp_resources_path=str(tmp_path / "gcp_resources"), options=options
        )
    )


def calls(emulator, method, path=CLUSTER_PATH):
    return [e for e in emulator.journal() if e["method"] == method and e["path"] == path]


def creates(emulator):
    return calls(emulator, "POST", CREATE_PATH)


def make_existing(emulator, body, *, labels=None, wait=True):
    """Creates a cluster directly through the API (as another run or a person would)."""
    body = {**body, "labels": {**body.get("labels", {}), **(labels or {})}}
    url = f"http://{emulator.address}{CREATE_PATH}"
    response = requests.post(url, params={"model_development_cluster_id": CLUSTER}, json=body)
    assert response.status_code == 200, response.text
    if wait:
        deadline = time.monotonic() + 10
        while (
            requests.get(f"http://{emulator.address}{CLUSTER_PATH}")
            .json()
            .get("clusterStatus", {})
            .get("state")
            != "RUNNING"
        ):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    return response.json()


def test_missing_cluster_is_created_with_the_exact_body(emulator, tmp_path):
    desired = spec()
    result = manager(tmp_path).ensure(desired, LABELS)
    assert result.action == "created" and not result.reused
    assert (
        result.name == f"projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters/{CLUSTER}"
    )
    assert ops.cluster_state(result.cluster) == "RUNNING"
    (create,) = creates(emulator)
    expected = desired.to_request_body()
    expected["labels"] = {**expected["labels"], **LABELS}
    assert create["body"] == expected
    assert create["query"] == {"model_development_cluster_id": CLUSTER}
    recorded = gcp_resources.read(str(tmp_path / "gcp_resources"))
    assert [r.resource_type for r in recorded] == ["VertexLro", "ModelDevelopmentCluster"]
    assert recorded[1].name.endswith(f"modelDevelopmentClusters/{CLUSTER}")
    assert recorded[0].name.startswith(f"projects/{PROJECT}/locations/{LOCATION}/operations/")


def test_running_cluster_with_same_spec_is_reused_without_writes(emulator, tmp_path):
    manager(tmp_path).ensure(spec(), LABELS)
    again = manager(tmp_path / "second").ensure(spec(), {**LABELS, "vsp-pipeline-run": "run-2"})
    assert again.action == "reused" and again.reused
    assert len(creates(emulator)) == 1
    assert calls(emulator, "PATCH") == []


@pytest.mark.slow
def test_provisioning_cluster_of_this_run_is_waited_for_not_recreated(emulator, tmp_path):
    emulator.update_settings(provisioning_delay_seconds=1.0)
    make_existing(emulator, spec().to_request_body(), labels=LABELS, wait=False)
    result = manager(tmp_path).ensure(spec(), LABELS)
    assert result.action == "attached"
    assert ops.cluster_state(result.cluster) == "RUNNING"
    assert len(creates(emulator)) == 1  # only the one made above


def test_error_cluster_is_deleted_then_created_again(emulator, tmp_path):
    emulator.add_fault(action="lro_error", method="POST", path=f"{CREATE_PATH}$")
    make_existing(emulator, spec().to_request_body(), wait=False)
    deadline = time.monotonic() + 5
    while (
        requests.get(f"http://{emulator.address}{CLUSTER_PATH}").json()["clusterStatus"]["state"]
        != "ERROR"
    ):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    result = manager(tmp_path).ensure(spec(), LABELS)
    assert result.action == "recreated"
    writes = [
        e["method"]
        for e in emulator.journal()
        if e["method"] in ("POST", "DELETE") and not e["path"].endswith(":wait")
    ]
    assert writes == ["POST", "DELETE", "POST"]


def test_immutable_difference_fails_naming_the_field(emulator, tmp_path):
    manager(tmp_path).ensure(spec(), LABELS)
    changed = spec(
        **{
            "nodePools.1.machineSpec.machineType": "a4-highgpu-8g",
            "nodePools.1.machineSpec.acceleratorType": "NVIDIA_B200",
        }
    )
    with pytest.raises(errors.UserError, match=r"machine_type.*a3-highgpu-8g.*a4-highgpu-8g"):
        manager(tmp_path).ensure(changed, LABELS)
    assert calls(emulator, "PATCH") == []


def test_mutable_difference_is_patched_with_an_exact_mask(emulator, tmp_path):
    manager(tmp_path).ensure(spec(), LABELS)
    config = {"PreemptMode": "REQUEUE", "PreemptType": "preempt/partition_prio"}
    changed = spec(**{"orchestratorSpec.slurmSpec.config": config})
    result = manager(tmp_path).ensure(changed, {**LABELS, "vsp-pipeline-run": "run-2"})
    assert result.action == "updated"
    assert result.update_mask == ["orchestrator_spec.slurm_spec.config"]
    (patch,) = calls(emulator, "PATCH")
    assert patch["query"] == {
        "updateMask": "orchestrator_spec.slurm_spec.config",
        "updateMode": "USER_AND_SERVICE",
    }
    assert patch["body"]["orchestratorSpec"]["slurmSpec"]["config"] == config
    # The labels of the first run stay: a reuse does not rewrite the creation labels.
    assert patch["body"]["labels"]["vsp-pipeline-run"] == "run-1"
    assert result.cluster["orchestratorSpec"]["slurmSpec"]["config"] == config


def test_report_policy_only_logs_mutable_differences(emulator, tmp_path):
    manager(tmp_path).ensure(spec(), LABELS)
    changed = spec(**{"orchestratorSpec.slurmSpec.config": {"PreemptMode": "OFF"}})
    result = manager(tmp_path, update_policy="report").ensure(changed, LABELS)
    assert result.update_mask == ["orchestrator_spec.slurm_spec.config"]
    assert calls(emulator, "PATCH") == []


def test_failed_create_deletes_what_it_left_behind(emulator, tmp_path):
    emulator.add_fault(action="lro_error", method="POST", path=f"{CREATE_PATH}$", code=8)
    with pytest.raises(errors.TransientOperationError, match="code 8"):
        manager(tmp_path).ensure(spec(), LABELS)
    assert requests.get(f"http://{emulator.address}{CLUSTER_PATH}").status_code == 404
    assert len(calls(emulator, "DELETE")) == 1


def test_invalid_spec_is_rejected_before_any_request(emulator, tmp_path):
    bad = spec(**{"nodePools.1.provisioningModel": "STANDARD"})
    with pytest.raises(errors.SpecValidationError) as info:
        manager(tmp_path).ensure(bad, LABELS)
    assert "node_pools[1].provisioning_model" in info.value.fields
    assert emulator.journal() == []


OPERATION_PATH = f"/v1beta1/projects/{PROJECT}/locations/{LOCATION}/operations/"


@pytest.mark.parametrize(
    ("method", "path", "action", "status"),
    [
        (method, path, action, status)
        for method, path in [
            ("POST", f"{CREATE_PATH}$"),
            ("GET", f"{CLUSTER_PATH}$"),
            ("GET", OPERATION_PATH),
            ("DELETE", f"{CLUSTER_PATH}$"),
        ]
        for action, status in [
            ("status", 429),
            ("status", 503),
            ("reset", None),
            ("reset_after", None),
        ]
    ],
)
def test_transient_faults_on_every_call_type_are_survived(
    emulator, tmp_path, method, path, action, status
):
    rule = {"action": action, "method": method, "path": path, "times": 2}
    if status:
        rule["http_status"] = status
    emulator.add_fault(**rule)
    created = manager(tmp_path).ensure(spec(), LABELS)
    assert ops.cluster_state(created.cluster) == "RUNNING"
    assert manager(tmp_path).delete() is True
    assert requests.get(f"http://{emulator.address}{CLUSTER_PATH}").status_code == 404
    # A write whose answer was lost after it took effect is looked up, never sent again.
    lost_write = action == "reset_after" and method in ("POST", "DELETE")
    assert [r.fired for r in emulator.faults()] == [1 if lost_write else 2]
    # Exactly one create took effect: answered 200, or reset after the emulator handled it.
    took_effect = [
        e
        for e in creates(emulator)
        if e["status"] == 200 or (e["status"] == "reset" and action == "reset_after")
    ]
    assert len(took_effect) == 1, creates(emulator)


def test_delete_of_a_missing_cluster_is_success(emulator, tmp_path):
    assert manager(tmp_path).delete() is False
    assert [e["method"] for e in emulator.journal()] == ["GET"]


def test_delete_waits_until_the_cluster_is_gone(emulator, tmp_path):
    manager(tmp_path).ensure(spec(), LABELS)
    assert manager(tmp_path).delete() is True
    assert requests.get(f"http://{emulator.address}{CLUSTER_PATH}").status_code == 404
    assert len(calls(emulator, "DELETE")) == 1


STEP_SCRIPT = """
import json, sys
from vsp.components.runtime.steps import create_cluster
from vsp.components.runtime.core import step
step.configure_logging()
result = create_cluster.create_cluster(
    project=sys.argv[1], location=sys.argv[2], cluster_id=sys.argv[3],
    cluster_spec=json.load(open(sys.argv[4])), spec_params={}, pipeline_run="run-1",
    timeout_seconds=60, gcp_resources_path=sys.argv[5],
)
print(result.action)
"""


@pytest.mark.slow
def test_step_killed_after_its_create_reattaches_when_rerun(emulator, tmp_path):
    emulator.update_settings(provisioning_delay_seconds=2.0)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec().to_request_body()))
    outputs = str(tmp_path / "gcp_resources")
    argv = [sys.executable, "-c", STEP_SCRIPT, PROJECT, LOCATION, CLUSTER, str(spec_file), outputs]
    first = subprocess.Popen(argv, env=dict(os.environ), start_new_session=True)
    deadline = time.monotonic() + 20
    while not (creates(emulator) and os.path.exists(outputs)):
        assert time.monotonic() < deadline, "the step never sent its create"
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    recorded = gcp_resources.read(outputs)
    assert [r.resource_type for r in recorded] == ["VertexLro"]
    rerun = subprocess.run(argv, env=dict(os.environ), capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    assert rerun.stdout.strip() == "attached"
    assert "re-attaching to recorded operation" in rerun.stderr
    assert len(creates(emulator)) == 1


@pytest.mark.parametrize("action", ["status", "reset", "reset_after"])
def test_transient_faults_on_the_update_are_survived(emulator, tmp_path, action):
    manager(tmp_path).ensure(spec(), LABELS)
    emulator.add_fault(action=action, http_status=503, method="PATCH", path=f"{CLUSTER_PATH}$")
    changed = spec(**{"orchestratorSpec.slurmSpec.config": {"PreemptMode": "OFF"}})
    result = manager(tmp_path).ensure(changed, LABELS)
    assert result.cluster["orchestratorSpec"]["slurmSpec"]["config"] == {"PreemptMode": "OFF"}
    patches = [e["status"] for e in calls(emulator, "PATCH")]
    # A PATCH whose answer was lost after it took effect is not sent again.
    assert patches == (["reset"] if action == "reset_after" else [patches[0], 200])
