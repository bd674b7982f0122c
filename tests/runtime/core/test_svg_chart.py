"""Chart primitives: nice ticks, tick labels, axes and markers as exact SVG elements."""

from __future__ import annotations

import re

import pytest

from vsp.components.runtime.core import svg_chart


@pytest.mark.parametrize(
    ("low", "high", "ticks"),
    [
        (0.12, 2.32, [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]),
        (0, 700, [0.0, 200.0, 400.0, 600.0, 800.0]),
        (0.91, 0.97, [0.9, 0.92, 0.94, 0.96, 0.98]),
        (3.0, 3.0, [2.4, 2.6, 2.8, 3.0, 3.2, 3.4, 3.6]),
    ],
)
def test_nice_ticks_cover_the_range_at_1_2_5_steps(low, high, ticks):
    assert svg_chart.nice_ticks(low, high, 5) == pytest.approx(ticks)


def test_numbers_get_the_decimals_of_the_tick_step():
    ticks = [0.9, 0.92, 0.94]
    assert [svg_chart.number(v, ticks) for v in ticks] == ["0.90", "0.92", "0.94"]
    assert svg_chart.number(20.0, [0.0, 10.0, 20.0]) == "20"
    assert svg_chart.number(-0.0, [0.0, 0.5]) == "0"


def test_axes_draw_a_tick_label_per_value_and_escape_titles():
    chart = svg_chart.Chart(400, 200, (0.0, 60.0), (0.0, 10.0), "c<1>", (50, 10, 20, 40))
    chart.x_axis([(0, "0 s"), (30, "30 s"), (60, "1 min")], "time <since start>")
    chart.y_axis([(0, "0"), (10, "10")], "cost (USD)")
    svg = chart.svg()
    assert re.findall(r'<text class="tick-x" x="([\d.]+)"[^>]*>([^<]*)</text>', svg) == [
        ("50.0", "0 s"),
        ("220.0", "30 s"),
        ("390.0", "1 min"),
    ]
    assert re.findall(r'<text class="tick-y" x="44" y="([\d.]+)"[^>]*>([^<]*)</text>', svg) == [
        ("164.0", "0"),
        ("24.0", "10"),
    ]
    assert ">time &lt;since start&gt;</text>" in svg and 'aria-label="c&lt;1&gt;"' in svg
    assert ">cost (USD)</text>" in svg


def test_a_vertical_marker_is_a_group_with_its_line_tooltip_and_label():
    chart = svg_chart.Chart(400, 200, (0.0, 100.0), (0.0, 1.0), "c", (50, 10, 20, 40))
    chart.vline(25, "#e15759", "marker preemption", label="P1", title="preemption 1")
    assert chart.parts == [
        '<g class="marker preemption"><line x1="135.0" y1="20" x2="135.0" y2="160" '
        'stroke="#e15759" stroke-width="1.5" stroke-dasharray="5 3"/>'
        "<title>preemption 1</title>",
        '<text x="138.0" y="31" text-anchor="start" style="font-family:sans-serif;'
        'font-size:11px" fill="#e15759">P1</text>',
        "</g>",
    ]
