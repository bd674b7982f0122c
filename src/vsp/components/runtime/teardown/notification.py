"""The run's notification: one Pub/Sub message from the exit task, however the run ended.

``finalize_cluster`` sends it after applying its rule (also when that failed), to
``notify_topic`` (``projects/P/topics/T``). The message's ``data`` is this JSON (UTF-8), and
its attributes repeat ``state`` and ``pipelineRun`` for subscription filters::

    {"pipelineRun": "...", "state": "SUCCEEDED|FAILED|CANCELLED", "error": "",
     "cluster": {"id": "...", "fate": "kept|shrunk|deleted|absent|unknown|...",
                 "summary": "...", "keptUntil": "2026-12-05T10:00:00Z" | null,
                 "idleUsdPerHour": 0.39 | null, "keepCostUsd": 2.34 | null},
     "model": {"version": "projects/P/locations/L/models/ID@3" | "",
               "gatePassed": true | false | null}}

``keepCostUsd`` is what keeping the cluster costs until its expiry at its idle price (the price
table), the cost this run leaves behind; the training's own cost is the training step's ``cost``
metric. Standard library only.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any

from vsp.components.runtime.core import errors, gcp_labels, readable_time, rest
from vsp.components.runtime.teardown import cost

log = logging.getLogger(__name__)


def _expiry(labels: dict[str, str]) -> float | None:
    try:
        return gcp_labels.parse_label_time(labels.get(gcp_labels.EXPIRES_AT) or "")
    except ValueError:
        return None


def _idle_price(cluster: dict[str, Any], location: str) -> float | None:
    try:
        return cost.cluster_cost(cluster, location=location).total_per_hour
    except errors.UserError:
        return None


def cluster_fate(
    cluster: dict[str, Any] | None, action: str, summary: str, location: str, now: float
) -> dict[str, Any]:
    """The cluster part of the message, from the exit task's action and the cluster as it is
    now (None: gone)."""
    labels = (cluster or {}).get("labels") or {}
    expires = _expiry(labels)
    fate = action
    if action == "none":  # after a success: what the decision branch left
        fate = "deleted" if cluster is None else (labels.get(gcp_labels.TEARDOWN) or "kept")
    kept = cluster is not None and expires is not None and expires > now
    price = _idle_price(cluster, location) if kept and cluster is not None else None
    return {
        "fate": fate,
        "summary": summary,
        "keptUntil": readable_time.utc(expires) if kept and expires else None,
        "idleUsdPerHour": price,
        "keepCostUsd": round(price * (expires - now) / 3600, 2) if price is not None else None,
    }


def message(
    *,
    pipeline_run: str,
    state: str,
    error: str,
    cluster_id: str,
    cluster: dict[str, Any],
    model_version: str,
    gate_passed: bool | None,
) -> dict[str, Any]:
    """The message document (see the module docstring)."""
    return {
        "pipelineRun": pipeline_run,
        "state": state,
        "error": error,
        "cluster": {"id": cluster_id, **cluster},
        "model": {"version": model_version, "gatePassed": gate_passed},
    }


def publish(client: rest.VertexRestClient, topic: str, document: dict[str, Any]) -> str:
    """Publishes ``document`` to ``topic``; the message id."""
    data = base64.b64encode(json.dumps(document, sort_keys=True).encode()).decode()
    attributes = {"state": document["state"], "pipelineRun": document["pipelineRun"]}
    answer = client.post(
        f"v1/{topic}:publish", {"messages": [{"data": data, "attributes": attributes}]}
    )
    ids = answer.get("messageIds") or [""]
    log.info("notification %s sent to %s: %s", ids[0], topic, document["state"])
    return str(ids[0])
