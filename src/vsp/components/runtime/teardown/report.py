"""The keep-or-delete decision as a small HTML section: the numbers and the cost chart.

The chart (``report_chart``) plots what each choice costs against the idle time until the next
run, with the break-even point and the expected idle time marked. Times read as
``2026-12-04 13:05:10 UTC`` and durations as ``1 h 30 min``. When the idle price was derived
from the cluster, a table lists each node pool's part (nodes kept, unit price, source) and the
sources of the prices. No script, no network; every text is escaped.
"""

from __future__ import annotations

import html
import math

from vsp.components.runtime.core import money, readable_time
from vsp.components.runtime.teardown import cost as teardown_cost
from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import report_chart

_POOL_COLUMNS = (
    "pool",
    "role",
    "machine type",
    "model",
    "nodes kept",
    "USD/node-hour",
    "USD/hour",
    "source",
)


def _money(value: float | None) -> str:
    return "unknown" if value is None else money.amount(value)


def _rate(value: float) -> str:
    return f"{value:g} {money.CURRENCY}/h"


def _pools_table(cost: teardown_cost.ClusterCost) -> str:
    """The idle cost pool by pool (USD/hour), with the storage and the total."""
    head = "".join(f"<th>{html.escape(name)}</th>" for name in _POOL_COLUMNS)
    rows = [
        (
            line.pool_id, line.role, line.machine_type, line.provisioning_model,
            str(line.nodes), f"{line.unit_price_per_hour:g}", f"{line.price_per_hour:.2f}",
            f"{line.source}; {line.note}" if line.note else line.source,
        )
        for line in cost.lines
    ]  # fmt: skip
    if cost.storage_price_per_hour:
        rows.append(
            ("storage", "", "", "", "", "", f"{cost.storage_price_per_hour:.2f}", "parameter")
        )
    rows.append(("total", "", "", "", "", "", f"{cost.total_per_hour:.2f}", ""))
    if cost.shrinkable:
        shrunk = f"{cost.shrunk_price_per_hour:.2f}"
        rows.append(("shrunk", "", "", "", "", "", shrunk, "login pools and storage"))
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return (
        f"<h3>Idle cost of the kept cluster</h3><table><tr>{head}</tr>{body}</table>"
        f"<p>Prices: {html.escape(cost.source)}</p>"
    )


def _prewarm_text(
    inputs: teardown_inputs.TeardownInputs, decision: teardown_decision.TeardownDecision
) -> str:
    plan = decision.prewarm
    if plan is None:
        return "not weighed" if inputs.prewarm_margin_minutes <= 0 else "not chosen"
    return (
        f"{_money(plan.cost)}: created at {readable_time.utc(plan.create_at)}, ready "
        f"{readable_time.utc(plan.ready_at)}"
    )


def html_section(
    inputs: teardown_inputs.TeardownInputs, decision: teardown_decision.TeardownDecision
) -> str:
    """The decision as an HTML fragment (a ``<section>``)."""
    be = decision.break_even_seconds
    rows = [
        ("decision", decision.action),
        ("policy", inputs.policy),
        ("cost if kept until the next run", _money(decision.cost_if_kept)),
        (
            "cost if shrunk (GPU pools at no nodes, then scaled up)",
            _money(decision.cost_if_shrunk) if inputs.can_shrink else "not weighed",
        ),
        ("cost if deleted (re-creation)", _money(decision.cost_if_deleted)),
        (
            "pre-warm (deleted now, re-created by the reaper before the next run)",
            _prewarm_text(inputs, decision),
        ),
        (
            "break-even idle time (keeping costs as much as re-creating)",
            "never" if math.isinf(be) else readable_time.duration(be),
        ),
        (
            "next run",
            "unknown" if decision.next_run is None else readable_time.utc(decision.next_run),
        ),
        (
            "expected idle time",
            "unknown"
            if decision.idle_seconds is None
            else readable_time.duration(decision.idle_seconds),
        ),
        ("idle price per hour", _rate(inputs.idle_price_per_hour)),
        (
            "idle price from",
            "the cluster's node pools (below)" if inputs.idle_cost else "parameter",
        ),
        (
            "shrunk price per hour",
            "-" if inputs.shrunk_price_per_hour is None else _rate(inputs.shrunk_price_per_hour),
        ),
        ("scale-up time", readable_time.duration(inputs.scale_up_minutes * 60)),
        ("provisioning time", readable_time.duration(inputs.provisioning_minutes * 60)),
        ("provisioning price per hour", _rate(inputs.provisioning_price_per_hour)),
        ("delay penalty per hour", _rate(inputs.delay_penalty_per_hour)),
        ("schedule cron", inputs.schedule_cron or "-"),
        (
            "expires at",
            "-" if decision.expires_at is None else readable_time.utc(decision.expires_at),
        ),
    ]
    table = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    cost = inputs.idle_cost
    pools = _pools_table(cost) if isinstance(cost, teardown_cost.ClusterCost) else ""
    return (
        "<section><h2>Teardown: keep the cluster warm, shrink it or delete it</h2>"
        f"<p>{html.escape(decision.reason)}</p><table>{table}</table>"
        f"{report_chart.cost_chart(inputs, decision)}{pools}</section>"
    )


def html_page(
    inputs: teardown_inputs.TeardownInputs, decision: teardown_decision.TeardownDecision
) -> str:
    """A self-contained HTML page holding only the decision section."""
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Teardown decision</title>'
        "<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
        "</style></head><body>"
        f"{html_section(inputs, decision)}</body></html>\n"
    )
