"""The keep-or-delete decision as a small HTML section: the numbers and the cost chart.

The chart plots what each choice costs against the idle time until the next run: keeping grows
with the idle price per hour, shrinking starts at the scale-up cost and grows with the shrunk
price, deleting is the flat re-creation cost; the expected idle time is marked. When the idle
price was derived from the cluster, a table lists each node pool's part (nodes kept, unit
price, source) and the sources of the prices. No script, no network; every text is escaped.
"""

from __future__ import annotations

import html
import math

from vsp.components.runtime.teardown import cost as teardown_cost
from vsp.components.runtime.teardown import decision as teardown

_WIDTH, _HEIGHT, _LEFT, _BOTTOM = 720, 220, 70, 30
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


def _chart(inputs: teardown.TeardownInputs, decision: teardown.TeardownDecision) -> str:
    be_hours = decision.break_even_seconds / 3600.0
    idle_hours = None if decision.idle_seconds is None else decision.idle_seconds / 3600.0
    candidates = [h for h in (be_hours, idle_hours) if h is not None and math.isfinite(h)]
    span = max([1.0, *[1.5 * h for h in candidates]])
    shrunk = inputs.shrunk_price_per_hour if inputs.can_shrink else None
    lines = [
        ("keep", "#4e79a7", 0.0, inputs.idle_price_per_hour, "keep: idle price x idle time"),
        ("delete", "#e15759", decision.cost_if_deleted, 0.0, "delete: re-creation cost"),
    ]
    if shrunk is not None:
        lines.insert(
            1,
            ("shrink", "#59a14f", inputs.scale_up_cost, shrunk,
             "shrink: shrunk price x idle time + scale-up cost"),
        )  # fmt: skip
    top = max([1e-9, *[start + rate * span for _, _, start, rate, _ in lines]]) * 1.1

    def x(hours: float) -> float:
        return _LEFT + hours / span * (_WIDTH - _LEFT - 10)

    def y(cost: float) -> float:
        return 10 + (1 - cost / top) * (_HEIGHT - _BOTTOM - 10)

    parts = [f'<svg width="{_WIDTH}" height="{_HEIGHT}" role="img" aria-label="teardown costs">']
    for name, color, start, rate, title in lines:
        end = start + rate * span
        parts.append(
            f'<line x1="{x(0):.1f}" y1="{y(start):.1f}" x2="{x(span):.1f}" y2="{y(end):.1f}" '
            f'stroke="{color}" stroke-width="2"><title>{title}</title></line>'
            f'<text x="4" y="{min(y(end), _HEIGHT - _BOTTOM) - 2:.1f}" font-size="11" '
            f'fill="{color}">{name}</text>'
        )
    if idle_hours is not None:
        parts.append(
            f'<line x1="{x(idle_hours):.1f}" y1="10" x2="{x(idle_hours):.1f}" '
            f'y2="{_HEIGHT - _BOTTOM}" stroke="#333" stroke-dasharray="4 3">'
            "<title>expected idle time until the next run</title></line>"
        )
    parts += [
        f'<text x="{_LEFT}" y="{_HEIGHT - 8}" font-size="11">0 h</text>',
        f'<text x="{_WIDTH - 70}" y="{_HEIGHT - 8}" font-size="11">{span:.1f} h idle</text>',
        "</svg>",
    ]
    return "".join(parts)


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f}"


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


def html_section(inputs: teardown.TeardownInputs, decision: teardown.TeardownDecision) -> str:
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
        ("break-even idle time", "never" if math.isinf(be) else f"{be / 3600:.2f} h"),
        (
            "expected idle time",
            "unknown" if decision.idle_seconds is None else f"{decision.idle_seconds / 3600:.2f} h",
        ),
        ("idle price per hour", f"{inputs.idle_price_per_hour:g}"),
        (
            "idle price from",
            "the cluster's node pools (below)" if inputs.idle_cost else "parameter",
        ),
        (
            "shrunk price per hour",
            "-" if inputs.shrunk_price_per_hour is None else f"{inputs.shrunk_price_per_hour:g}",
        ),
        ("scale-up minutes", f"{inputs.scale_up_minutes:g}"),
        ("provisioning minutes", f"{inputs.provisioning_minutes:g}"),
        ("provisioning price per hour", f"{inputs.provisioning_price_per_hour:g}"),
        ("delay penalty per hour", f"{inputs.delay_penalty_per_hour:g}"),
        ("schedule cron", inputs.schedule_cron or "-"),
        (
            "expires at (UTC)",
            "-" if decision.expires_at is None else teardown.format_label_time(decision.expires_at),
        ),
    ]
    table = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    cost = inputs.idle_cost
    pools = _pools_table(cost) if isinstance(cost, teardown_cost.ClusterCost) else ""
    return (
        "<section><h2>Teardown: keep the cluster warm, shrink it or delete it</h2>"
        f"<p>{html.escape(decision.reason)}</p><table>{table}</table>"
        f"{_chart(inputs, decision)}{pools}</section>"
    )


def html_page(inputs: teardown.TeardownInputs, decision: teardown.TeardownDecision) -> str:
    """A self-contained HTML page holding only the decision section."""
    return (
        '<!doctype html><html><head><meta charset="utf-8"><title>Teardown decision</title>'
        "<style>body{font-family:sans-serif;margin:2em}th{text-align:left;padding-right:1em}"
        "</style></head><body>"
        f"{html_section(inputs, decision)}</body></html>\n"
    )
