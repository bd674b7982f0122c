"""The teardown decision priced from the cluster: runner, reason, metrics, report, preflight."""

from __future__ import annotations

import json

import pytest

from tests.runtime.teardown.test_teardown_idle_cost import local_cluster_body
from vsp.components.runtime.core import errors, rest
from vsp.components.runtime.steps import decide_teardown, run_checks
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import report

PROJECT, LOCATION, CLUSTER = "test-project", "us-central1", "vsplocal"
CLUSTER_PATH = f"v1beta1/projects/{PROJECT}/locations/{LOCATION}/modelDevelopmentClusters/{CLUSTER}"
NOW = 1_800_000_000.0
DERIVE = {"idle_price_per_hour": 0.0, "provisioning_price_per_hour": 0.0}


class ClusterClient:
    """Answers GETs of one cluster (or NOT_FOUND) and records the paths read."""

    def __init__(self, cluster=None):
        self.cluster, self.paths = cluster, []

    def get(self, path, params=None):
        self.paths.append(path)
        if self.cluster is None:
            raise errors.NotFoundError("no such cluster", http_status=404, status="NOT_FOUND")
        return self.cluster


def _inputs(**prices) -> teardown_inputs.TeardownInputs:
    return teardown_inputs.TeardownInputs(
        **{**DERIVE, **prices},
        provisioning_minutes=20.0,
        schedule_cron="0 * * * *",
        now=NOW,
    )


def _decide(client, inputs, **kw):
    return decide_teardown.decide_teardown(
        inputs, client=client, project=PROJECT, location=LOCATION, cluster_id=CLUSTER, **kw
    )


def test_a_zero_idle_price_prices_the_cluster_and_says_where_from():
    client = ClusterClient(local_cluster_body())
    weighed, decision = _decide(client, _inputs())
    assert client.paths == [CLUSTER_PATH]
    assert weighed.idle_price_per_hour == pytest.approx(159.669972)
    assert weighed.provisioning_price_per_hour == pytest.approx(159.669972)
    assert weighed.idle_cost is not None and len(weighed.idle_cost.lines) == 3
    # The login pool (1 x n2-standard-8 on demand) is what a shrunk cluster keeps.
    assert weighed.shrunk_price_per_hour == pytest.approx(0.388472)
    # Next run in 1 h: keeping costs 159.67; shrinking 0.39 + a 10 min scale-up at
    # (159.67 + 10 delay)/h = 28.67; re-creating 20 min x 169.67/h = 56.56.
    assert decision.action == "shrink"
    assert decision.cost_if_kept == pytest.approx(159.669972 * decision.idle_seconds / 3600)
    assert decision.cost_if_shrunk == pytest.approx(
        0.388472 * decision.idle_seconds / 3600 + 169.669972 / 6
    )
    assert decision.cost_if_deleted == pytest.approx(169.669972 / 3)
    assert "Shrunk (compute pools at no nodes): 0.39 USD/h." in decision.reason
    assert "Idle cost 159.67 USD/h" in decision.reason
    assert "ondemand: 1 x a3-highgpu-8g ON_DEMAND at 88.49 USD/h" in decision.reason
    assert "price table: us-central1 prices as listed on 2025-03-06" in decision.reason
    metrics = decide_teardown.decision_metrics(weighed, decision)
    assert metrics["teardown_input_idle_price_from_cluster"] == 1.0
    assert metrics["teardown_input_idle_price_per_hour"] == pytest.approx(159.669972)


def test_an_explicit_idle_price_wins_and_the_cluster_is_not_read():
    client = ClusterClient(local_cluster_body())
    weighed, decision = _decide(
        client, _inputs(idle_price_per_hour=2.0, provisioning_price_per_hour=3.0)
    )
    assert client.paths == []
    assert (weighed.idle_price_per_hour, weighed.provisioning_price_per_hour) == (2.0, 3.0)
    assert weighed.idle_cost is None
    assert "Idle price 2.00 USD/h: parameter idle_price_per_hour." in decision.reason
    metrics = decide_teardown.decision_metrics(weighed, decision)
    assert metrics["teardown_input_idle_price_from_cluster"] == 0.0


def test_an_explicit_idle_price_wins_over_a_price_file_and_storage(tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"a3-highgpu-8g": {"SPOT": 1.0, "ON_DEMAND": 2.0}}))
    weighed, _ = _decide(
        ClusterClient(local_cluster_body()),
        _inputs(idle_price_per_hour=5.0),
        price_file=str(prices),
        storage_price_per_hour=1.0,
    )
    assert weighed.idle_price_per_hour == 5.0 and weighed.idle_cost is None
    # Only the provisioning price was 0, so only it comes from the cluster (storage excluded).
    assert weighed.provisioning_price_per_hour == pytest.approx(0.388472 + 2 * 1.0 + 2.0)


def test_a_price_file_and_storage_shape_the_derived_idle_price(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("a3-highgpu-8g:\n  SPOT: 30\n  STANDARD: 80\n")
    weighed, decision = _decide(
        ClusterClient(local_cluster_body()),
        _inputs(),
        price_file=str(prices),
        storage_price_per_hour=0.5,
    )
    assert weighed.idle_price_per_hour == pytest.approx(0.388472 + 60.0 + 80.0 + 0.5)
    assert weighed.provisioning_price_per_hour == pytest.approx(0.388472 + 60.0 + 80.0)
    assert f"price file {prices}" in decision.reason


def test_pricing_needs_an_existing_cluster():
    with pytest.raises(errors.UserError, match="no cluster is given"):
        decide_teardown.decide_teardown(_inputs(), client=ClusterClient(), project=PROJECT)
    with pytest.raises(errors.UserError, match="does not exist.*idle_price_per_hour > 0"):
        _decide(ClusterClient(None), _inputs())


def test_a_cluster_without_prices_fails_with_the_pool_and_the_fixes():
    body = local_cluster_body(machine_type="a4-highgpu-8g")
    with pytest.raises(errors.UserError) as caught:
        _decide(ClusterClient(body), _inputs())
    assert "node pool 'spot'" in str(caught.value) and "'a4-highgpu-8g'" in str(caught.value)


@pytest.mark.parametrize("machine", ["a3-edgegpu-8g", "a9-hypergpu-8g"])
@pytest.mark.parametrize("policy", ["delete", "keep"])
def test_delete_and_keep_need_no_price(machine, policy):
    """A machine without a price is no reason to fail a policy that weighs no cost."""
    body = local_cluster_body(machine_type=machine)
    run_checks.check_run(GOOD_MODEL, _inputs(policy=policy), cluster=body)
    weighed, decision = _decide(ClusterClient(body), _inputs(policy=policy))
    assert decision.action == policy
    assert weighed.unpriced == f"machine type {machine} has no price."
    assert decision.reason.endswith(
        f"Prices unknown, and not needed by policy '{policy}': machine type {machine} has no price."
    )


@pytest.mark.parametrize("policy", ["auto", "shrink"])
def test_auto_and_shrink_still_refuse_a_machine_without_a_price(policy):
    body = local_cluster_body(machine_type="a3-edgegpu-8g")
    with pytest.raises(errors.SpecValidationError) as caught:
        run_checks.check_run(GOOD_MODEL, _inputs(policy=policy), cluster=body)
    assert [(p.field, p.value) for p in caught.value.problems] == [
        ("machine_type", "a3-edgegpu-8g")
    ]
    with pytest.raises(errors.UserError, match="machine type 'a3-edgegpu-8g' \\(SPOT"):
        _decide(ClusterClient(body), _inputs(policy=policy))


@pytest.mark.parametrize(
    ("machine", "spot", "ondemand"),
    [
        ("a4-highgpu-8g", None, 148.21),
        ("a3-ultragpu-8g", 50.0856, 83.492),
        ("a3-megagpu-8g", 37.391837, 92.937588),
        ("a3-highgpu-8g", 35.39575, 88.49),
        ("a2-ultragpu-1g", 2.027468, 5.068798),
        ("a2-highgpu-8g", 10.34684, 29.38708),
        ("a2-megagpu-16g", None, 55.739504),
        ("g2-standard-48", 1.574384, 4.001665),
    ],
)
def test_the_table_prices_the_training_cluster_machines(machine, spot, ondemand):
    from vsp.components.runtime.teardown import prices  # noqa: PLC0415

    assert prices.HOURLY_USD[machine].get("SPOT") == spot
    assert prices.HOURLY_USD[machine]["ON_DEMAND"] == ondemand
    # A cluster of on-demand nodes of it (the Spot pool keeping none) is priced from the table.
    body = local_cluster_body(machine_type=machine)
    body["nodePools"][1]["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 2}
    weighed, _ = _decide(ClusterClient(body), _inputs())
    assert weighed.idle_price_per_hour == pytest.approx(0.388472 + ondemand)


def test_the_report_lists_each_pool_and_the_sources():
    weighed, decision = _decide(ClusterClient(local_cluster_body()), _inputs())
    page = report.html_page(weighed, decision)
    assert "Idle cost of the kept cluster" in page
    assert "<td>spot</td><td>compute</td><td>a3-highgpu-8g</td><td>SPOT</td><td>2</td>" in page
    assert "<td>total</td><td></td><td></td><td></td><td></td><td></td><td>159.67</td>" in page
    assert "cloud.google.com/spot-vms/pricing" in page
    assert "the cluster&#x27;s node pools (below)" in page
    explicit, plain = _decide(
        ClusterClient(), _inputs(idle_price_per_hour=1.0, provisioning_price_per_hour=1.0)
    )
    assert "Idle cost of the kept cluster" not in report.html_page(explicit, plain)


GOOD_MODEL = {
    "model_id": "digits",
    "serving_image": "us-docker.pkg.dev/p/r/serve:1",
    "model_dir": "gs://bucket/run/model",
    "version_aliases": [],
    "labels": {},
}


def test_preflight_finds_a_cluster_it_cannot_price_before_it_exists(tmp_path):
    unknown = local_cluster_body(machine_type="a9-hypergpu-8g")
    with pytest.raises(errors.SpecValidationError) as caught:
        run_checks.check_run(GOOD_MODEL, _inputs(), failure_keep_minutes=60.0, cluster=unknown)
    # The problem names the machine type, not a price parameter.
    [problem] = caught.value.problems
    assert (problem.field, problem.value) == ("machine_type", "a9-hypergpu-8g")
    assert "teardown_options.price_file" in problem.fix
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"a9-hypergpu-8g": {"SPOT": 1, "ON_DEMAND": 2}}))
    run_checks.check_run(GOOD_MODEL, _inputs(), cluster=unknown, price_file=str(prices))
    # Explicit prices need no price for the cluster.
    explicit = _inputs(idle_price_per_hour=1.0, provisioning_price_per_hour=1.0)
    run_checks.check_run(GOOD_MODEL, explicit, cluster=unknown)


def test_preflight_reports_an_invalid_price_file(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("a3-highgpu-8g: {SPOT: -2}\n")
    with pytest.raises(errors.SpecValidationError) as caught:
        run_checks.check_run(GOOD_MODEL, _inputs(), price_file=str(prices))
    assert [p.field for p in caught.value.problems] == ["price_file"]


def test_the_local_cluster_is_priced_through_the_emulator(emulator, emulator_api):
    emulator_api.create_running(CLUSTER, local_cluster_body())
    client = rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))
    weighed, decision = decide_teardown.decide_teardown(
        _inputs(), client=client, project=PROJECT, location=LOCATION, cluster_id=CLUSTER
    )
    assert weighed.idle_price_per_hour == pytest.approx(159.669972)
    assert [line.nodes for line in weighed.idle_cost.lines] == [1, 2, 1]
    assert "Idle cost 159.67 USD/h" in decision.reason
