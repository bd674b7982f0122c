"""What a training cluster costs per hour while it is kept idle, priced from its node pools.

Idle cost per hour = sum over node pools of nodes kept x unit price(machine type, provisioning
model) + an optional storage price per hour. The login pool is one of the node pools, so its
nodes count like the others.

Nodes kept = the pool's ``minNodeCount``: those nodes run (and bill) for as long as the cluster
exists, while nodes above it are started by Slurm for jobs and stopped when idle. Google's
create-cluster reference has ``minNodeCount`` equal ``maxNodeCount`` for its pools (fixed-size,
what ``cluster_builder`` writes), where the minimum is also the maximum; a FLEX_START pool
scaling from 0 keeps none. An unset minimum is 0 (the proto3 default the API omits).

Shrinking the cluster scales its compute pools to no nodes and keeps the login pool and the
storage, so the shrunk price per hour is theirs.

Re-creating the cluster brings the same nodes up again, so the provisioning price per hour
defaults to the same pools' price per hour (storage excluded: it is not re-created).

Unit prices come from a ``price_book.PriceBook``: a price file's entry, else 0 for RESERVATION,
else the shipped table (``prices``). A pool that keeps nodes and has no price is a
``MissingPriceError`` naming the machine type, the pool and the parameters or file that supply
a price; a pool that keeps no nodes costs nothing and needs no price. Only the policies that
weigh costs (``PRICED_POLICIES``: auto and shrink) need the prices at all.

The cluster is the REST JSON of a ``modelDevelopmentClusters`` resource (GET answer or create
body): ``nodePools[].machineSpec.machineType``, ``.provisioningModel``,
``.scalingSpec.minNodeCount`` (int64, so possibly a string) and
``orchestratorSpec.slurmSpec.loginNodePoolId``; snake_case keys are read too.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.core import errors, money
from vsp.components.runtime.teardown import price_book, prices

# The teardown policies that weigh costs, and so need the cluster's prices; delete and keep
# act the same whatever the cluster costs.
PRICED_POLICIES = ("auto", "shrink")


@dataclasses.dataclass(frozen=True)
class PoolPrice:
    """One node pool's part of the idle cost.

    Attributes:
        pool_id: Node pool id.
        role: ``login`` (the Slurm login pool) or ``compute``.
        machine_type: Machine type of its nodes.
        provisioning_model: ON_DEMAND, SPOT, FLEX_START or RESERVATION.
        nodes: Nodes kept while the cluster idles (its minimum node count).
        unit_price_per_hour: USD per node-hour (0 when it keeps no nodes).
        source: Where the unit price came from (``price table``, ``price file PATH``...).
        note: Why the figure may not fit (another region...), or ''.
    """

    pool_id: str
    role: str
    machine_type: str
    provisioning_model: str
    nodes: int
    unit_price_per_hour: float
    source: str
    note: str = ""

    @property
    def price_per_hour(self) -> float:
        """The pool's idle cost, USD/hour."""
        return self.nodes * self.unit_price_per_hour

    def describe(self) -> str:
        """``spot: 2 x a3-highgpu-8g SPOT at 35.40 USD/h = 70.79 USD/h (price table)``."""
        if self.nodes == 0:
            return f"{self.pool_id}: no nodes kept ({self.machine_type} {self.provisioning_model})"
        note = f"; {self.note}" if self.note else ""
        return (
            f"{self.pool_id}: {self.nodes} x {self.machine_type} {self.provisioning_model} at "
            f"{money.per_hour(self.unit_price_per_hour)} = {money.per_hour(self.price_per_hour)} "
            f"({self.source}{note})"
        )


@dataclasses.dataclass(frozen=True)
class ClusterCost:
    """The idle cost of a cluster, pool by pool.

    Attributes:
        lines: One entry per node pool, in the cluster's order.
        storage_price_per_hour: Storage counted on top of the nodes, USD/hour.
        source: Where the prices came from, table date and URLs included.
    """

    lines: tuple[PoolPrice, ...]
    storage_price_per_hour: float = 0.0
    source: str = ""

    @property
    def nodes_price_per_hour(self) -> float:
        """The kept nodes' cost, USD/hour."""
        return math.fsum(line.price_per_hour for line in self.lines)

    @property
    def total_per_hour(self) -> float:
        """Idle cost of the kept cluster: nodes plus storage, USD/hour."""
        return self.nodes_price_per_hour + self.storage_price_per_hour

    @property
    def shrinkable(self) -> bool:
        """Whether shrinking saves anything: a compute pool keeps nodes."""
        return any(line.role == "compute" and line.nodes for line in self.lines)

    @property
    def shrunk_price_per_hour(self) -> float:
        """Idle cost once the compute pools are scaled to no nodes: login nodes plus storage."""
        login = math.fsum(line.price_per_hour for line in self.lines if line.role == "login")
        return login + self.storage_price_per_hour

    @property
    def provisioning_price_per_hour(self) -> float:
        """What re-creating it costs per hour: the same nodes (storage excluded), USD/hour."""
        return self.nodes_price_per_hour

    def describe(self) -> str:
        """One sentence: the total, each pool's part and the sources."""
        parts = [line.describe() for line in self.lines]
        if self.storage_price_per_hour:
            parts.append(f"storage {money.per_hour(self.storage_price_per_hour)} (parameter)")
        shrunk = ""
        if self.shrinkable:
            rate = money.per_hour(self.shrunk_price_per_hour)
            shrunk = f" Shrunk (compute pools at no nodes): {rate}."
        return (
            f"Idle cost {money.per_hour(self.total_per_hour)} = {'; '.join(parts)}.{shrunk} "
            f"Prices: {self.source}"
        )


def _get(obj: Mapping[str, Any] | None, camel: str) -> Any:
    """A field by its camelCase name, or its snake_case one."""
    if not isinstance(obj, Mapping):
        return None
    if camel in obj:
        return obj[camel]
    return obj.get("".join(f"_{c.lower()}" if c.isupper() else c for c in camel))


def _count(value: Any, field: str) -> int:
    if value is None:
        return 0
    try:
        count = int(value)
    except (TypeError, ValueError):
        count = -1
    if isinstance(value, bool) or count < 0 or str(count) != str(value).strip():
        raise errors.UserError(
            f"{field} = {value!r} is not a node count. Fix: give a whole number >= 0."
        )
    return count


def provisioning_model(pool: Mapping[str, Any]) -> str | None:
    """The pool's provisioning model as the service applies it (``rules_pools`` rules).

    Unset (or ``..._UNSPECIFIED``) with a reservation affinity is RESERVATION; unset on a GPU
    pool is unknown (None); otherwise unset is ON_DEMAND.
    """
    model = price_book.canonical_model(_get(pool, "provisioningModel") or "")
    if model and not model.endswith("UNSPECIFIED"):
        return model
    machine = _get(pool, "machineSpec") or {}
    if _get(machine, "reservationAffinity"):
        return prices.RESERVATION
    if _get(machine, "acceleratorType") or _get(machine, "acceleratorCount"):
        return None
    return prices.ON_DEMAND


def region_of(cluster: Mapping[str, Any], location: str = "") -> str:
    """The nodes' region: from the first pool zone (``us-central1-b``), else ``location``."""
    for pool in _get(cluster, "nodePools") or []:
        zone = str(_get(pool, "zone") or "")
        if zone.count("-") >= 2:
            return zone.rsplit("-", 1)[0]
    return location


class MissingPriceError(errors.UserError):
    """A node pool that keeps nodes has a machine type without a price.

    Attributes:
        machine_type: The machine type without a price.
        provisioning_model: Its pool's provisioning model ('' = unknown).
    """

    def __init__(self, message: str, machine_type: str, provisioning_model: str):
        super().__init__(message)
        self.machine_type = machine_type
        self.provisioning_model = provisioning_model


def _no_price(pool_id: str, machine: str, model: str | None, why: str) -> MissingPriceError:
    entry = f'{{"{machine}": {{"{model or "ON_DEMAND"}": <USD per node-hour>}}}}'
    return MissingPriceError(
        f"machine type {machine!r} ({model or 'no provisioning model'}, node pool {pool_id!r}, "
        f"which keeps nodes) has no price: {why}. Only the teardown policies auto and shrink "
        "need it. Fix: give it in a price file (the price_file parameter of decide_teardown, "
        f"teardown_options.price_file in the pipeline), e.g. {entry}; or give both "
        "idle_price_per_hour and provisioning_price_per_hour > 0 (teardown_options); or use "
        "teardown_policy delete or keep.",
        machine,
        model or "",
    )


def cluster_cost(
    cluster: Mapping[str, Any],
    *,
    location: str = "",
    price_file: str = "",
    storage_price_per_hour: float = 0.0,
    book: price_book.PriceBook | None = None,
) -> ClusterCost:
    """Prices a cluster's kept nodes (see the module docstring).

    Args:
        cluster: The cluster's REST JSON (camelCase or snake_case keys).
        location: The cluster's Vertex region; the region priced when no pool has a zone.
        price_file: JSON or YAML price file merged over the table ('' = the table alone).
        storage_price_per_hour: Storage cost added to the idle cost, USD/hour (>= 0).
        book: Prices to use instead of loading ``price_file`` (tests, repeated calls).

    Returns:
        The per-pool lines, their total and the sources.

    Raises:
        MissingPriceError: A pool that keeps nodes has no price.
        errors.UserError: The price file is invalid, or ``storage_price_per_hour`` is
            negative.
    """
    if not math.isfinite(storage_price_per_hour) or storage_price_per_hour < 0:
        raise errors.UserError(
            f"storage_price_per_hour = {storage_price_per_hour}: must be a finite number >= 0. "
            "Fix: give the storage cost in USD/hour, or 0."
        )
    region = region_of(cluster, location)
    book = book or price_book.PriceBook.load(price_file, region)
    login = _get(_get(_get(cluster, "orchestratorSpec"), "slurmSpec"), "loginNodePoolId")
    lines, sources = [], []
    for index, pool in enumerate(_get(cluster, "nodePools") or []):
        pool_id = str(_get(pool, "id") or f"nodePools[{index}]")
        machine = str(_get(_get(pool, "machineSpec"), "machineType") or "")
        model = provisioning_model(pool)
        minimum = _get(_get(pool, "scalingSpec"), "minNodeCount")
        nodes = _count(minimum, f"node pool {pool_id!r} scalingSpec.minNodeCount")
        role = "login" if login and pool_id == login else "compute"
        if nodes == 0:
            lines.append(PoolPrice(pool_id, role, machine, model or "-", 0, 0.0, "no nodes kept"))
            continue
        quote = book.quote(machine, model) if model else None
        if quote is None:
            why = book.missing(machine, model) if model else "a GPU pool without a model"
            raise _no_price(pool_id, machine, model, why)
        lines.append(
            PoolPrice(
                pool_id, role, machine, model, nodes, quote.price_per_hour, quote.source, quote.note
            )
        )
        sources.append(quote.source)
    return ClusterCost(
        tuple(lines), float(storage_price_per_hour), _source_text(sources, region, book)
    )


def _source_text(sources: list[str], region: str, book: price_book.PriceBook) -> str:
    parts = []
    if "price table" in sources:
        text = prices.table_source()
        if region and region not in prices.SAME_PRICE_REGIONS:
            text += f"; {region} priced with {prices.REGION} figures"
        parts.append(text)
    if any(s.startswith("price file") for s in sources):
        parts.append(f"price file {book.price_file}")
    if any(s.startswith("reservation") for s in sources):
        parts.append("RESERVATION nodes at 0 (the reservation is paid anyway)")
    return "; ".join(parts) or "no nodes kept"
