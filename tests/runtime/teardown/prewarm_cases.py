"""What the pre-warm tests share: a daily run, its prices, and requests against the emulator."""

from __future__ import annotations

import copy
import dataclasses
import datetime

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import polling
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import prewarm_intents

PROJECT, LOCATION = "test-project", "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
COLLECTION = f"/v1beta1/{PARENT}/modelDevelopmentClusters"
FAST = resource.ClusterOptions(
    timeout=30, backoff=polling.Backoff(initial=0.05, maximum=0.2, jitter=0)
)


def utc(*args: int) -> float:
    return datetime.datetime(*args, tzinfo=datetime.timezone.utc).timestamp()


# A daily 06:00 run that ended at 01:30: 4.5 h idle. Keeping costs 100 USD/h; re-creating takes
# 20 min at 100 USD/h plus 300 USD/h of waiting (133.33 USD); pre-warming pays the 33.33 USD
# creation and the idle time from ready to the tick.
NOW = utc(2026, 12, 5, 1, 30)
TICK = utc(2026, 12, 5, 6, 0)
DAILY = teardown_inputs.TeardownInputs(
    idle_price_per_hour=100.0,
    provisioning_minutes=20.0,
    provisioning_price_per_hour=100.0,
    delay_penalty_per_hour=300.0,
    schedule_cron="0 6 * * *",
    now=NOW,
)


def with_margin(minutes: float, **changes) -> teardown_inputs.TeardownInputs:
    return dataclasses.replace(DAILY, prewarm_margin_minutes=minutes, **changes)


def name(cluster_id: str) -> str:
    return f"{PARENT}/modelDevelopmentClusters/{cluster_id}"


def posts(emulator) -> list[dict]:
    return [e for e in emulator.journal() if e["method"] == "POST" and e["path"] == COLLECTION]


def live_body(cluster_body) -> dict:
    """A create body with user and managed labels, as a run's cluster has them."""
    body = copy.deepcopy(cluster_body)
    body["labels"] = {**body.get("labels", {}), "team": "vision", "vsp-pipeline-run": "run-1"}
    return body


def intent_for(cluster_id: str, body: dict, now: float, **changes) -> prewarm_intents.Intent:
    base = prewarm_intents.Intent(
        name(cluster_id), body, tick=now + 1800, create_at=now - 60, ready_at=now + 1140,
        expires_at=now + 7200, decided_by="run-1",
    )  # fmt: skip
    return dataclasses.replace(base, **changes)
