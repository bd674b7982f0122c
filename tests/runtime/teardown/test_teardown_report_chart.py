"""The teardown cost chart: duration and USD axes, the break-even point, the expected idle."""

from __future__ import annotations

import re

from vsp.components.runtime.teardown import decision as teardown_decision
from vsp.components.runtime.teardown import inputs as teardown_inputs
from vsp.components.runtime.teardown import report, report_chart

NOW = 1796390200.0  # 2026-12-04 13:16:40 UTC; the hourly cron's next run is 43 min 20 s away


def _case(**overrides):
    values = {
        "idle_price_per_hour": 12.0,
        "provisioning_minutes": 20.0,
        "provisioning_price_per_hour": 12.0,
        "delay_penalty_per_hour": 10.0,
        "schedule_cron": "0 * * * *",
        "now": NOW,
        "shrunk_price_per_hour": 0.5,
        "scale_up_minutes": 8.0,
    }
    inputs = teardown_inputs.TeardownInputs(**{**values, **overrides})
    return inputs, teardown_decision.decide(inputs)


def _texts(svg: str, css: str) -> list[str]:
    return re.findall(rf'<text class="{css}"[^>]*>([^<]*)</text>', svg)


def test_axes_read_in_durations_and_usd_and_the_three_choices_are_drawn():
    svg = report_chart.cost_chart(*_case())
    assert _texts(svg, "tick-x") == [
        "0 s", "15 min", "30 min", "45 min", "1 h", "1 h 15 min", "1 h 30 min"
    ]  # fmt: skip
    assert _texts(svg, "tick-y") == ["0", "5", "10", "15", "20"]
    assert _texts(svg, "axis-title-x") == ["idle time until the next run"]
    assert _texts(svg, "axis-title-y") == ["cost (USD)"]
    assert re.findall(r'<line class="cost-line (\w+)"', svg) == ["keep", "shrink", "delete"]


def test_the_break_even_point_is_labelled_where_keeping_meets_re_creating():
    inputs, decision = _case()
    svg = report_chart.cost_chart(inputs, decision)
    # Re-creating: 20 min at (12 + 10) USD/h = 7.33 USD; keeping (12 USD/h) costs as much
    # after 36 min 40 s.
    group = re.search(r'<g class="break-even">(.*?)</g>', svg).group(1)
    # x = 80 + 2200 s / 5400 s * (860 - 40 - 80) px
    assert group.startswith('<line x1="381.5" y1="30" x2="381.5" y2="276"')
    assert group.endswith(">break-even 36 min 40 s: 7.33 USD</text>")
    assert (
        "<title>break-even: after 36 min 40 s idle, keeping costs 7.33 USD, as much as "
        "re-creating</title>"
    ) in group
    dot = re.search(r'<circle class="break-even-point" cx="([\d.]+)" cy="([\d.]+)"', svg)
    assert dot.groups() == ("381.5", "185.8")  # 276 - 7.33 / 20 USD * 246 px
    idle = re.search(r'<g class="expected-idle">.*?<text[^>]*>([^<]*)</text>', svg).group(1)
    assert idle == "expected idle 43 min 20 s (next run)"


def test_free_idle_has_no_break_even_and_an_unknown_next_run_no_idle_mark():
    svg = report_chart.cost_chart(*_case(idle_price_per_hour=0.0, schedule_cron=None))
    assert _texts(svg, "break-even") == ["no break-even: keeping an idle cluster costs nothing"]
    assert 'class="expected-idle"' not in svg and '<g class="break-even">' not in svg


def test_the_decision_table_shows_readable_times_and_units():
    page = report.html_page(*_case())
    for row in (
        "<tr><th>break-even idle time (keeping costs as much as re-creating)</th>"
        "<td>36 min 40 s</td></tr>",
        "<tr><th>next run</th><td>2026-12-04 14:00:00 UTC</td></tr>",
        "<tr><th>expected idle time</th><td>43 min 20 s</td></tr>",
        # Shrunk: re-creating (7.33 USD) costs as much as 8.8 h shrunk (0.5 USD/h after a
        # 2.93 USD scale-up), so the expiry is the last tick within it (22:00) plus 15 min slack.
        "<tr><th>expires at</th><td>2026-12-04 22:15:00 UTC</td></tr>",
        "<tr><th>cost if deleted (re-creation)</th><td>7.33 USD</td></tr>",
        "<tr><th>idle price per hour</th><td>12 USD/h</td></tr>",
        "<tr><th>provisioning time</th><td>20 min</td></tr>",
    ):
        assert row in page
    assert "20261204t" not in page  # no label-format timestamp
