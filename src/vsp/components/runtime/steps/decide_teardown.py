"""The ``decide_teardown`` step: keep the cluster warm, shrink it, or delete it now.

An idle or provisioning price per hour of 0 means "price the cluster": the cluster is read and
its node pools priced (``teardown.cost``: the shipped price table, a price file merged over
it); a price > 0 is used as given and wins over the table and the file. The run history fills
in the cadence; the ski-rental rule is ``teardown.decision.decide``. When it chooses to
pre-warm, the step writes the request the reaper re-creates the cluster from
(``record_prewarm``) before the pipeline deletes the cluster. ``main`` is the component's
entry; ``decide_teardown`` the same work for callers in Python.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from vsp.components.runtime.cluster import diff as cluster_diff
from vsp.components.runtime.cluster import resource
from vsp.components.runtime.cluster import spec as cluster_spec
from vsp.components.runtime.core import errors, rest, step
from vsp.components.runtime.teardown import cost as teardown_cost
from vsp.components.runtime.teardown import decision, prewarm_intents, run_history
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import report as teardown_report

log = logging.getLogger(__name__)


@step.accepts_options
def main(
    *,
    project: str,
    location: str,
    cluster_id: str,
    metrics: Any,
    report: Any,
    policy: str,
    schedule_cron: str,
    interval_hours: float,
    idle_price_per_hour: float,
    provisioning_minutes: float,
    provisioning_price_per_hour: float,
    delay_penalty_per_hour: float,
    pipeline_name: str,
    expiry_slack_fraction: float,
    price_file: str,
    storage_price_per_hour: float,
    shrunk_price_per_hour: float,
    scale_up_minutes: float,
    prewarm_margin_minutes: float = 0.0,
    prewarm_dir: str = "",
    pipeline_run: str = "",
) -> tuple[str, str, str, dict[str, str]]:
    """The component's entry: its parameters in, its outputs out (see the component).

    Returns:
        ``(action, reason, summary, labels)``.
    """

    def run() -> tuple[teardown_inputs.TeardownInputs, decision.TeardownDecision]:
        prewarm_intents.check_folder_given(prewarm_margin_minutes, prewarm_dir)
        inputs = teardown_inputs.component_inputs(
            policy=policy,
            schedule_cron=schedule_cron,
            interval_hours=interval_hours,
            idle_price_per_hour=idle_price_per_hour,
            provisioning_minutes=provisioning_minutes,
            provisioning_price_per_hour=provisioning_price_per_hour,
            delay_penalty_per_hour=delay_penalty_per_hour,
            slack_fraction=expiry_slack_fraction,
            shrunk_price_per_hour=shrunk_price_per_hour,
            scale_up_minutes=scale_up_minutes,
            prewarm_margin_minutes=prewarm_margin_minutes,
        )
        client = rest.VertexRestClient(location)
        weighed, chosen = decide_teardown(
            inputs,
            client=client,
            project=project,
            location=location,
            pipeline_name=pipeline_name,
            cluster_id=cluster_id,
            price_file=price_file,
            storage_price_per_hour=storage_price_per_hour,
        )
        if not cluster_id:  # no cluster: nothing to pre-warm or withdraw
            return weighed, chosen
        ref = resource.ClusterRef(project, location, cluster_id)
        if chosen.prewarm is not None:
            chosen = record_prewarm(client, ref, chosen, prewarm_dir, pipeline_run)
        elif prewarm_dir:
            prewarm_intents.withdraw(prewarm_dir, ref.name)
        return weighed, chosen

    inputs, chosen = step.run_step("decide_teardown", run)
    step.publish_metrics(metrics, decision_metrics(inputs, chosen))
    report.metadata["title"] = "Teardown decision"
    step.write_file(report.path, teardown_report.html_page(inputs, chosen))
    for line in chosen.summary():
        log.info("teardown: %s", line)
    return (chosen.action, chosen.reason, "\n".join(chosen.summary()), chosen.as_labels())


def record_prewarm(
    client: rest.VertexRestClient,
    ref: resource.ClusterRef,
    chosen: decision.TeardownDecision,
    prewarm_dir: str,
    pipeline_run: str = "",
) -> decision.TeardownDecision:
    """Writes the pre-warm request the reaper acts on, before the cluster is deleted.

    The request holds the cluster's spec as it is now (``ClusterSpec.from_api``: output-only
    fields dropped, user labels kept). When the cluster cannot be read (gone already), no
    request is written and the decision is returned without its pre-warm: a plain delete.

    Returns:
        The decision, with ``prewarm`` cleared when no request could be written.
    """
    plan = chosen.prewarm
    if plan is None:
        return chosen
    cluster = resource.ClusterResource(client, ref).get()
    if cluster is None:
        log.warning("cluster %s is gone: no pre-warm recorded, the next run creates it", ref.name)
        note = " The cluster was already gone, so no pre-warm was recorded."
        return dataclasses.replace(chosen, prewarm=None, reason=chosen.reason + note)
    body = cluster_spec.ClusterSpec.from_api(cluster).to_request_body()
    body["labels"] = cluster_diff.user_labels(body.get("labels"))
    intent = prewarm_intents.Intent(
        cluster=ref.name,
        body=body,
        tick=plan.tick,
        create_at=plan.create_at,
        ready_at=plan.ready_at,
        expires_at=plan.expires_at,
        decided_by=pipeline_run,
    )
    prewarm_intents.write(prewarm_dir, intent)
    return chosen


def needs_prices(inputs: teardown_inputs.TeardownInputs) -> bool:
    """Whether a price per hour is 0, to be derived from the cluster."""
    return inputs.idle_price_per_hour == 0 or inputs.provisioning_price_per_hour == 0


def priced_inputs(
    inputs: teardown_inputs.TeardownInputs,
    cluster: Mapping[str, Any],
    *,
    location: str = "",
    price_file: str = "",
    storage_price_per_hour: float = 0.0,
) -> teardown_inputs.TeardownInputs:
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
    client: rest.VertexRestClient | None, project: str, location: str, cluster_id: str
) -> dict[str, Any]:
    """The cluster to price.

    Raises:
        errors.UserError: No cluster is given, or it does not exist.
    """
    if client is None or not cluster_id:
        raise errors.UserError(
            "idle_price_per_hour or provisioning_price_per_hour is 0 (price the cluster), but no "
            "cluster is given. Fix: pass the cluster id, or both prices > 0 (USD/hour)."
        )
    ref = resource.ClusterRef(project, location, cluster_id)
    cluster = resource.ClusterResource(client, ref).get()
    if cluster is None:
        raise errors.UserError(
            f"cluster {ref.name} does not exist, so its prices cannot be read. Fix: pass "
            "idle_price_per_hour > 0 and provisioning_price_per_hour > 0 (USD/hour)."
        )
    return cluster


def decide_teardown(
    inputs: teardown_inputs.TeardownInputs,
    *,
    client: rest.VertexRestClient | None = None,
    project: str = "",
    location: str = "",
    pipeline_name: str = "",
    cluster_id: str = "",
    price_file: str = "",
    storage_price_per_hour: float = 0.0,
) -> tuple[teardown_inputs.TeardownInputs, decision.TeardownDecision]:
    """The keep, shrink or delete decision for a cluster, with what it needs filled in.

    The prices that are 0 are taken from the cluster (its node pools priced); without a cron
    or an interval the run history predicts the cadence, and with a cron it shows how often
    runs were missed or late (``teardown.expiry``). The rule itself is ``decision.decide``.

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
    pricing = {
        "location": location,
        "price_file": price_file,
        "storage_price_per_hour": storage_price_per_hour,
    }
    if needs_prices(inputs):
        cluster = read_cluster(client, project, location, cluster_id)
        try:
            inputs = priced_inputs(inputs, cluster, **pricing)
        except teardown_cost.MissingPriceError as exc:
            if inputs.policy in teardown_cost.PRICED_POLICIES:
                raise
            # delete and keep act the same whatever the cluster costs.
            log.warning("cluster not priced (policy %s needs no price): %s", inputs.policy, exc)
            unpriced = f"machine type {exc.machine_type} has no price."
            inputs = dataclasses.replace(inputs, unpriced=unpriced)
    if inputs.interval_seconds is None and client is not None:
        history, ends = run_history.run_times(client, project, location, pipeline_name)
        log.info("%d earlier runs of %s found for the cadence", len(history), pipeline_name)
        inputs = dataclasses.replace(inputs, run_start_times=history, run_end_times=ends)
    chosen = decision.decide(inputs)
    log.info("teardown decision: %s", chosen.reason)
    return inputs, chosen


def decision_metrics(
    inputs: teardown_inputs.TeardownInputs, decision: decision.TeardownDecision
) -> dict[str, float]:
    """The decision's metrics plus the inputs it weighed (prices per hour, minutes)."""
    weighed = {
        "teardown_input_idle_price_per_hour": inputs.idle_price_per_hour,
        "teardown_input_provisioning_minutes": inputs.provisioning_minutes,
        "teardown_input_provisioning_price_per_hour": inputs.provisioning_price_per_hour,
        "teardown_input_delay_penalty_per_hour": inputs.delay_penalty_per_hour,
        "teardown_input_earlier_runs": len(inputs.run_start_times),
        "teardown_input_idle_price_from_cluster": inputs.idle_cost is not None,
    }
    if inputs.interval_seconds is not None:
        weighed["teardown_input_interval_seconds"] = inputs.interval_seconds
    return {**decision.as_metrics(), **{k: float(v) for k, v in weighed.items()}}
