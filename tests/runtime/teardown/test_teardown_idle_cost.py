"""``teardown_cost`` and ``teardown_price_book``: a cluster's idle cost from its node pools."""

from __future__ import annotations

import copy
import inspect
import json
import pathlib

import pytest
import yaml

from vsp.components.runtime.cluster import builder
from vsp.components.runtime.core import errors, gpu_machines
from vsp.components.runtime.teardown import cost as teardown_cost
from vsp.components.runtime.teardown import price_book
from vsp.components.runtime.teardown import prices as price_table

DATA = pathlib.Path(__file__).resolve().parents[2] / "data"
N2_8, A3_SPOT, A3_ON_DEMAND = 0.388472, 35.39575, 88.49  # us-central1, USD/node-hour


def local_cluster_body(**overrides) -> dict:
    """The body ``create_cluster`` sends for a local run: LOCAL_CLUSTER on the defaults."""
    from vsp.components import catalog  # noqa: PLC0415
    from vsp.pipelines.definitions import catalog as pipeline_catalog  # noqa: PLC0415

    accepted = inspect.signature(builder.build_cluster_spec).parameters
    defaults = inspect.signature(catalog.declarations()["create_cluster"]).parameters
    kwargs = {name: p.default for name, p in defaults.items() if name in accepted}
    kwargs.update({k: v for k, v in pipeline_catalog.LOCAL_CLUSTER.items() if k in accepted})
    fixed = gpu_machines.built_in(overrides.get("machine_type", ""))
    if fixed and "accelerator_type" not in overrides:  # the GPUs that machine comes with
        kwargs["accelerator_type"], kwargs["accelerator_count"] = fixed
    kwargs.update(overrides)
    return builder.build_cluster_spec(**kwargs).to_request_body()


def _lines(cost: teardown_cost.ClusterCost) -> list[tuple]:
    return [
        (line.pool_id, line.role, line.machine_type, line.provisioning_model, line.nodes)
        for line in cost.lines
    ]


def test_the_default_local_cluster_costs_its_login_spot_and_on_demand_nodes():
    cost = teardown_cost.cluster_cost(local_cluster_body(), location="us-central1")
    assert _lines(cost) == [
        ("login", "login", "n2-standard-8", "ON_DEMAND", 1),
        ("spot", "compute", "a3-highgpu-8g", "SPOT", 2),
        ("ondemand", "compute", "a3-highgpu-8g", "ON_DEMAND", 1),
    ]
    assert [line.unit_price_per_hour for line in cost.lines] == [N2_8, A3_SPOT, A3_ON_DEMAND]
    assert {line.source for line in cost.lines} == {"price table"}
    assert cost.total_per_hour == pytest.approx(159.669972, abs=1e-9)
    assert cost.provisioning_price_per_hour == pytest.approx(159.669972, abs=1e-9)
    assert "Idle cost 159.67 USD/h" in cost.describe()
    assert (
        "spot: 2 x a3-highgpu-8g SPOT at 35.40 USD/h = 70.79 USD/h (price table)" in cost.describe()
    )
    for text in ("2025-03-06", "retrieved 2026-12", "cloud.google.com/compute/vm-instance-pricing"):
        assert text in cost.source


@pytest.mark.parametrize(
    "name, load",
    [("cluster_full.yaml", yaml.safe_load), ("cluster_api_response.json", json.loads)],
)
def test_training_pools_scaling_from_zero_keep_only_the_login_node(name, load):
    # cluster_full.yaml is snake_case; the API answer is camelCase with int64 strings and
    # minimums left out (proto3 defaults).
    cost = teardown_cost.cluster_cost(load((DATA / name).read_text()))
    assert _lines(cost) == [
        ("login", "login", "n2-standard-8", "ON_DEMAND", 1),
        ("spot", "compute", "a3-highgpu-8g", "SPOT", 0),
        ("ondemand", "compute", "a3-highgpu-8g", "ON_DEMAND", 0),
    ]
    assert cost.total_per_hour == N2_8
    assert cost.lines[1].describe() == "spot: no nodes kept (a3-highgpu-8g SPOT)"


def test_an_unknown_machine_type_names_the_pool_and_both_fixes():
    body = local_cluster_body(machine_type="a9-hypergpu-8g")
    with pytest.raises(errors.UserError) as caught:
        teardown_cost.cluster_cost(body)
    text = str(caught.value)
    assert text.startswith("machine type 'a9-hypergpu-8g' (SPOT, node pool 'spot', which keeps")
    assert "a9-hypergpu-8g is not in the price table" in text
    assert "Only the teardown policies auto and shrink need it" in text
    assert "give it in a price file (the price_file parameter of decide_teardown" in text
    assert "teardown_options.price_file" in text and "idle_price_per_hour" in text
    assert "or use teardown_policy delete or keep" in text
    assert isinstance(caught.value, teardown_cost.MissingPriceError)
    assert caught.value.machine_type == "a9-hypergpu-8g"


def test_a_machine_type_without_a_listed_figure_says_so():
    with pytest.raises(errors.UserError, match="a3-edgegpu-8g: no listed figure"):
        teardown_cost.cluster_cost(local_cluster_body(machine_type="a3-edgegpu-8g"))


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_price_file_is_merged_over_the_table(tmp_path, suffix):
    entries = {"a3-highgpu-8g": {"SPOT": 30.0}, "a9-hypergpu-8g": {"standard": 99.5, "SPOT": 40}}
    path = tmp_path / f"prices{suffix}"
    path.write_text(json.dumps(entries) if suffix == ".json" else yaml.safe_dump(entries))
    cost = teardown_cost.cluster_cost(local_cluster_body(), price_file=str(path))
    assert [line.unit_price_per_hour for line in cost.lines] == [N2_8, 30.0, A3_ON_DEMAND]
    assert [line.source for line in cost.lines] == [
        "price table",
        f"price file {path}",
        "price table",
    ]
    assert f"price file {path}" in cost.source and "price table" in cost.source
    unknown = teardown_cost.cluster_cost(
        local_cluster_body(machine_type="a9-hypergpu-8g"), price_file=str(path)
    )
    assert unknown.total_per_hour == pytest.approx(N2_8 + 2 * 40.0 + 99.5)


def test_a_price_file_on_cloud_storage_is_read_through_the_fuse_mount(tmp_path, monkeypatch):
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(tmp_path))
    (tmp_path / "bucket").mkdir()
    (tmp_path / "bucket" / "prices.yaml").write_text("n2-standard-8: {ON_DEMAND: 0.5}\n")
    cost = teardown_cost.cluster_cost(local_cluster_body(), price_file="gs://bucket/prices.yaml")
    assert cost.lines[0].unit_price_per_hour == 0.5
    assert cost.lines[0].source == "price file gs://bucket/prices.yaml"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("- a\n- b\n", "not a mapping"),
        ("n2-standard-8: 0.5\n", "not to a mapping of models"),
        ("n2-standard-8: {PREEMPTIBLE: 0.5}\n", "is not a provisioning model"),
        ("n2-standard-8: {SPOT: -1}\n", "is not a price >= 0"),
        ("n2-standard-8: {SPOT: true}\n", "is not a price >= 0"),
        ("n2-standard-8: {SPOT: [\n", "does not parse"),
    ],
)
def test_an_invalid_price_file_is_a_user_error(tmp_path, text, problem):
    path = tmp_path / "prices.yaml"
    path.write_text(text)
    with pytest.raises(errors.UserError, match=problem):
        price_book.load_price_file(str(path))


def test_a_missing_price_file_is_a_user_error(tmp_path):
    with pytest.raises(errors.UserError, match="cannot be read"):
        teardown_cost.cluster_cost(local_cluster_body(), price_file=str(tmp_path / "none.json"))


def test_reservation_nodes_cost_nothing_while_the_reservation_is_paid_anyway():
    body = local_cluster_body(reservation="h100-pool")
    cost = teardown_cost.cluster_cost(body)
    assert cost.lines[2].provisioning_model == "RESERVATION"
    assert cost.lines[2].unit_price_per_hour == 0.0
    assert cost.total_per_hour == pytest.approx(N2_8 + 2 * A3_SPOT)
    assert "RESERVATION nodes at 0" in cost.source


def test_a_flex_start_pool_needs_a_price_only_when_it_keeps_nodes(tmp_path):
    body = local_cluster_body()
    pool = body["nodePools"][2]
    pool["provisioningModel"] = "FLEX_START"
    with pytest.raises(errors.UserError, match="no FLEX_START"):
        teardown_cost.cluster_cost(body)
    prices = tmp_path / "flex.json"
    prices.write_text(json.dumps({"a3-highgpu-8g": {"FLEX_START": 41.0}}))
    assert teardown_cost.cluster_cost(body, price_file=str(prices)).lines[2].price_per_hour == 41.0
    scaling_from_zero = copy.deepcopy(body)
    scaling_from_zero["nodePools"][2]["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 4}
    assert teardown_cost.cluster_cost(scaling_from_zero).lines[2].price_per_hour == 0.0


def _in_region(region: str) -> dict:
    subnetwork = f"projects/local-project/regions/{region}/subnetworks/default"
    return local_cluster_body(zone=f"{region}-b", subnetwork=subnetwork)


def test_other_regions_get_the_table_figures_with_a_note():
    cost = teardown_cost.cluster_cost(_in_region("europe-west4"))
    assert cost.total_per_hour == pytest.approx(159.669972)
    assert "us-central1 figure used for europe-west4" in cost.lines[0].note
    assert "europe-west4 priced with us-central1 figures" in cost.source
    same = teardown_cost.cluster_cost(_in_region("us-east1"))
    assert all(not line.note for line in same.lines)
    assert teardown_cost.region_of({"nodePools": [{}]}, "asia-east1") == "asia-east1"


def test_storage_adds_to_the_idle_cost_only():
    cost = teardown_cost.cluster_cost(local_cluster_body(), storage_price_per_hour=0.25)
    assert cost.total_per_hour == pytest.approx(159.919972)
    assert cost.provisioning_price_per_hour == pytest.approx(159.669972)
    assert "storage 0.25 USD/h (parameter)" in cost.describe()
    with pytest.raises(errors.UserError, match="storage_price_per_hour"):
        teardown_cost.cluster_cost(local_cluster_body(), storage_price_per_hour=-1.0)


def test_the_table_covers_the_documented_machine_types_and_models():
    for machine, row in price_table.HOURLY_USD.items():
        assert set(row) <= {price_table.ON_DEMAND, price_table.SPOT}, machine
        assert all(price > 0 for price in row.values()), machine
        assert row or machine in price_table.NOTES, machine
    # N2 shapes are linear in vCPUs: the derived ones agree with the listed ones.
    for size in (2, 4, 8, 16, 32):
        row = price_table.HOURLY_USD[f"n2-standard-{size}"]
        assert row["ON_DEMAND"] == pytest.approx(size / 2 * 0.097118, abs=1e-9)
        assert row["SPOT"] == pytest.approx(size / 2 * 0.029976, abs=1e-9)
