"""The teardown decision's cost chart: what each choice costs against the idle time, as SVG.

Keeping grows with the idle price per hour, shrinking starts at the scale-up cost and grows
with the shrunk price, deleting is the flat re-creation cost. The break-even point (the idle
time where keeping costs as much as re-creating) is marked and labelled with its time and
cost, the expected idle time until the next run is marked when it is known. The x axis reads
in durations (``0 s, 30 min, 1 h``), the y axis in the price currency (USD). Chart primitives:
``core/svg_chart.py``.
"""

from __future__ import annotations

import math

from vsp.components.runtime.core import money, readable_time, svg_chart
from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import inputs as teardown_inputs

WIDTH, HEIGHT = 860, 320
BLUE, GREEN, RED, GREY = (svg_chart.PALETTE[c] for c in ("blue", "green", "red", "grey"))


def _money(value: float) -> str:
    return money.amount(value)


def cost_chart(
    inputs: teardown_inputs.TeardownInputs, decision: teardown_decision.TeardownDecision
) -> str:
    """The chart as one ``<svg>`` element.

    Args:
        inputs: Prices and cadence the decision weighed.
        decision: The decision (break-even, expected idle time, costs).
    """
    be = decision.break_even_seconds
    idle = decision.idle_seconds
    marks = [s for s in (be, idle) if s is not None and math.isfinite(s)]
    span = readable_time.duration_step(max([3600.0, *[1.5 * s for s in marks]]), 6) * 6
    x_ticks = readable_time.duration_ticks(span, 6)
    lines = [("keep", BLUE, 0.0, inputs.idle_price_per_hour, "keep: idle price x idle time")]
    if inputs.can_shrink:
        lines.append(
            ("shrink", GREEN, inputs.scale_up_cost, inputs.shrunk_price_per_hour or 0.0,
             "shrink: shrunk price x idle time + scale-up cost")
        )  # fmt: skip
    lines.append(("delete", RED, decision.cost_if_deleted, 0.0, "delete: re-creation cost"))
    top = max(start + rate * span / 3600.0 for _, _, start, rate, _ in lines)
    y_ticks = svg_chart.nice_ticks(0.0, max(top, 1e-6), 5)
    chart = svg_chart.Chart(
        WIDTH, HEIGHT, (0.0, span), (0.0, y_ticks[-1]), "teardown costs", (80, 40, 30, 44)
    )
    chart.legend([(color, name) for name, color, *_ in lines])
    chart.x_axis([(t, readable_time.duration(t)) for t in x_ticks], "idle time until the next run")
    chart.y_axis([(v, svg_chart.number(v, y_ticks)) for v in y_ticks], f"cost ({money.CURRENCY})")
    for name, color, start, rate, title in lines:
        end = start + rate * span / 3600.0
        chart.segment((0.0, start), (span, end), color, f"cost-line {name}", title)
    if math.isfinite(be):
        label = f"break-even {readable_time.duration(be)}: {_money(decision.cost_if_deleted)}"
        title = (
            f"break-even: after {readable_time.duration(be)} idle, keeping costs "
            f"{_money(decision.cost_if_deleted)}, as much as re-creating"
        )
        left = idle is not None and idle > be  # the expected idle label goes to the right
        anchor = "end" if left else "start"
        chart.vline(be, GREY, "break-even", label=label, title=title, anchor=anchor)
        chart.dot(be, decision.cost_if_deleted, GREY, "break-even-point", title)
    else:
        chart.text(
            chart.left + 6, chart.top + 11,
            "no break-even: keeping an idle cluster costs nothing", GREY, "break-even",
        )  # fmt: skip
    if idle is not None:
        label = f"expected idle {readable_time.duration(idle)} (next run)"
        anchor = "start" if math.isfinite(be) and idle > be else "end"
        chart.vline(
            idle, "#000000", "expected-idle", label=label, title=label, row=1, anchor=anchor
        )
    return chart.svg()
