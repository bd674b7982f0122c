"""The decide step priced from the cluster: prices per hour of 0 are derived from its node pools.

``decide`` is the entry point of the ``decide_teardown`` component. An idle or provisioning
price per hour of 0 means "price the cluster": the cluster is read and its node pools priced
(``teardown_cost``: the shipped price table, a price file merged over it); a price > 0 is used
as given and wins over the table and the file. The rest of the decision (run history, the
ski-rental rule) is ``teardown_runner.decide``.

Kept apart from ``teardown_runner`` (which the keep and exit-task components embed) so that only
the decide component carries the price table.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, rest
from vsp.components.runtime.teardown import cost as teardown_cost
from vsp.components.runtime.teardown import decision as teardown
from vsp.components.runtime.teardown import runner as teardown_runner

log = logging.getLogger(__name__)


def needs_prices(inputs: teardown.TeardownInputs) -> bool:
    """Whether a price per hour is 0, to be derived from the cluster."""
    return inputs.idle_price_per_hour == 0 or inputs.provisioning_price_per_hour == 0


def priced_inputs(
    inputs: teardown.TeardownInputs,
    cluster: Mapping[str, Any],
    *,
    location: str = "",
    price_file: str = "",
    storage_price_per_hour: float = 0.0,
) -> teardown.TeardownInputs:
    """The inputs with each price per hour that is 0 derived from the cluster's node pools.

    The idle price becomes the kept nodes' price plus ``storage_price_per_hour`` (and the
    breakdown is attached as ``idle_cost``); the provisioning price becomes the same nodes'
    price (re-creating brings them up again); an unknown shrunk price becomes the login nodes'
    plus the storage when a compute pool keeps nodes. A price > 0 is kept as given. With the
    idle price given, the shrunk price is not derived (the two could be in different
    currencies): shrinking is weighed only when ``shrunk_price_per_hour`` is given too.

    Args:
        inputs: The decision's inputs.
        cluster: The cluster's REST JSON.
        location: Its Vertex region.
        price_file: JSON or YAML prices merged over the table ('' = the table alone).
        storage_price_per_hour: Storage added to the idle price, USD/hour.

    Raises:
        errors.UserError: A pool that keeps nodes has no price, or the price file is invalid.
    """
    cost = teardown_cost.cluster_cost(
        cluster,
        location=location,
        price_file=price_file,
        storage_price_per_hour=storage_price_per_hour,
    )
    changes: dict[str, Any] = {}
    if inputs.idle_price_per_hour == 0:
        changes.update(idle_price_per_hour=cost.total_per_hour, idle_cost=cost)
    if inputs.provisioning_price_per_hour == 0:
        changes["provisioning_price_per_hour"] = cost.provisioning_price_per_hour
    if inputs.shrunk_price_per_hour is None and cost.shrinkable:
        changes["shrunk_price_per_hour"] = cost.shrunk_price_per_hour
    log.info("cluster prices: %s", cost.describe())
    return dataclasses.replace(inputs, **changes)


def read_cluster(
    client: rest.VertexRestClient | None, ref: cluster_resource.ClusterRef
) -> dict[str, Any]:
    """The cluster to price.

    Raises:
        errors.UserError: No cluster is given, or it does not exist.
    """
    if client is None or not ref.cluster_id:
        raise errors.UserError(
            "idle_price_per_hour or provisioning_price_per_hour is 0 (price the cluster), but no "
            "cluster is given. Fix: pass the cluster id, or both prices > 0 (currency/hour)."
        )
    cluster = cluster_resource.ClusterResource(client, ref).get()
    if cluster is None:
        raise errors.UserError(
            f"cluster {ref.name} does not exist, so its prices cannot be read. Fix: pass "
            "idle_price_per_hour > 0 and provisioning_price_per_hour > 0 (currency/hour)."
        )
    return cluster


def decide(
    inputs: teardown.TeardownInputs,
    *,
    client: rest.VertexRestClient | None = None,
    project: str = "",
    location: str = "",
    pipeline_name: str = "",
    cluster_id: str = "",
    price_file: str = "",
    storage_price_per_hour: float = 0.0,
) -> tuple[teardown.TeardownInputs, teardown.TeardownDecision]:
    """The keep-or-delete decision, with the prices that are 0 taken from the cluster.

    Args:
        inputs: Prices (0 = price the cluster), policy and cadence.
        client: REST client of the cluster's location (None: no cluster, no run history).
        project: Google Cloud project id.
        location: Vertex region of the cluster.
        pipeline_name: This pipeline's name, to list its earlier runs when there is no cron
            or interval ('' = none).
        cluster_id: The cluster to price when a price per hour is 0.
        price_file: JSON or YAML prices (USD per node-hour) merged over the price table: a
            local path or gs://BUCKET/PATH ('' = the table alone).
        storage_price_per_hour: Storage cost added to a derived idle price, USD/hour.

    Returns:
        The inputs as weighed (derived prices and their breakdown, run history) and the
        decision, whose reason names the idle price and where it came from.

    Raises:
        errors.UserError: An input is invalid (checked before any request), or the cluster
            cannot be priced (the message names the pool, its machine type and the fixes).
    """
    inputs.validate()
    ref = cluster_resource.ClusterRef(project, location, cluster_id)
    pricing = {
        "location": location,
        "price_file": price_file,
        "storage_price_per_hour": storage_price_per_hour,
    }
    if needs_prices(inputs):
        inputs = priced_inputs(inputs, read_cluster(client, ref), **pricing)
    return teardown_runner.decide(
        inputs, client=client, project=project, location=location, pipeline_name=pipeline_name
    )
