"""Chart primitives for the reports: a plot area with labelled axes, drawn as inline SVG.

A ``Chart`` maps data coordinates onto a plot area and collects SVG elements: axes with tick
marks, tick labels (with units) and an axis title, grid lines, polylines, lines, bars, markers
and text. Every element carries a ``class`` naming what it is (``tick-x``, ``marker
preemption``, ...), so a test can find it, and a ``<title>`` where a tooltip helps. All text
is escaped.

Why SVG by hand and not matplotlib (``benchmarks/report_chart_cost.py``; results of
2026-12-04 on a 2-CPU x86_64 machine in ``benchmarks/results/report_chart_cost.md``): the report
is drawn inside the training and teardown steps, whose stock image installs only what their
YAML lists. matplotlib 3.11.2 would add 11 packages to each of those steps (numpy, pillow,
fonttools, ...; 169.6 MB installed into an empty venv, 16.4 s of pip install with this machine's
pip cache), import in 0.70 s and draw the report's loss chart in 0.037 s (30.7 KB of SVG). These
primitives and the report charts are 23.1 KiB of source embedded in the YAML (no install),
import in 0.094 s from the staged runtime and draw the same chart in 0.0008 s (17.2 KB of SVG).
The charts are lines, bars and labelled markers, which need no layout engine.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import math
from collections.abc import Sequence

FONT = "font-family:sans-serif;font-size:11px"
PALETTE = {
    "blue": "#4e79a7",
    "green": "#59a14f",
    "red": "#e15759",
    "orange": "#f28e2b",
    "grey": "#555555",
    "light": "#e6e6e6",
}


def nice_ticks(low: float, high: float, max_ticks: int = 6) -> list[float]:
    """Ticks at 1, 2 or 5 times a power of ten covering ``[low, high]`` (both ends included).

    Args:
        low: Smallest value to show.
        high: Largest value to show (> ``low``; equal values get a unit-wide range).
        max_ticks: Most intervals wanted.
    """
    if high <= low:
        low, high = low - 0.5, high + 0.5
    raw = (high - low) / max_ticks
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw - 1e-12)
    first = math.floor(low / step + 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step
    count = round((last - first) / step)
    return [round(first + i * step, 12) for i in range(count + 1)]


def number(value: float, ticks: Sequence[float] = ()) -> str:
    """``value`` with as many decimals as the tick step needs (``0.25``, ``1.5``, ``20``)."""
    steps = [abs(b - a) for a, b in itertools.pairwise(ticks) if b != a]
    decimals = max(0, -math.floor(math.log10(min(steps)) + 1e-9)) if steps else 2
    text = f"{value:.{decimals}f}"
    return "0" if text.strip("-0.") == "" else text


def esc(text: str) -> str:
    """Text escaped for SVG content and attribute values."""
    return html.escape(str(text), quote=True)


@dataclasses.dataclass(frozen=True)
class Scale:
    """A linear map from a data range onto a pixel range."""

    low: float
    high: float
    px_low: float
    px_high: float

    def __call__(self, value: float) -> float:
        span = (self.high - self.low) or 1.0
        return self.px_low + (value - self.low) / span * (self.px_high - self.px_low)


class Chart:
    """An SVG chart: plot area, axes and the elements added, in drawing order.

    Args:
        width: Width in pixels.
        height: Height in pixels.
        x_range: (low, high) of the x data.
        y_range: (low, high) of the y data; None for a chart with rows instead of a y axis.
        label: Accessible name of the chart (``aria-label``).
        margins: (left, right, top, bottom) pixels around the plot area.
    """

    def __init__(
        self,
        width: int,
        height: int,
        x_range: tuple[float, float],
        y_range: tuple[float, float] | None,
        label: str,
        margins: tuple[int, int, int, int] = (70, 40, 24, 44),
    ):
        left, right, top, bottom = margins
        self.width, self.height, self.label = width, height, label
        self.left, self.right = left, width - right
        self.top, self.bottom = top, height - bottom
        self.x = Scale(x_range[0], x_range[1], self.left, self.right)
        low, high = y_range or (0.0, 1.0)
        self.y = Scale(low, high, self.bottom, self.top)
        self.parts: list[str] = []

    def _title(self, title: str) -> str:
        return f"<title>{esc(title)}</title>" if title else ""

    def x_axis(self, ticks: Sequence[tuple[float, str]], title: str, grid: bool = True) -> None:
        """The x axis line, a tick mark and label per (value, label) and the axis title."""
        self.parts.append(
            f'<line class="axis-x" x1="{self.left}" y1="{self.bottom}" x2="{self.right}" '
            f'y2="{self.bottom}" stroke="#333"/>'
        )
        for value, text in ticks:
            px = self.x(value)
            if grid:
                self.parts.append(
                    f'<line class="grid-x" x1="{px:.1f}" y1="{self.top}" x2="{px:.1f}" '
                    f'y2="{self.bottom}" stroke="{PALETTE["light"]}"/>'
                )
            self.parts.append(
                f'<line x1="{px:.1f}" y1="{self.bottom}" x2="{px:.1f}" y2="{self.bottom + 4}" '
                f'stroke="#333"/><text class="tick-x" x="{px:.1f}" y="{self.bottom + 16}" '
                f'text-anchor="middle" style="{FONT}">{esc(text)}</text>'
            )
        middle = (self.left + self.right) / 2
        self.parts.append(
            f'<text class="axis-title-x" x="{middle:.1f}" y="{self.height - 6}" '
            f'text-anchor="middle" style="{FONT};font-weight:bold">{esc(title)}</text>'
        )

    def y_axis(self, ticks: Sequence[tuple[float, str]], title: str) -> None:
        """The y axis line, a tick mark, label and grid line per (value, label), the title."""
        self.parts.append(
            f'<line class="axis-y" x1="{self.left}" y1="{self.top}" x2="{self.left}" '
            f'y2="{self.bottom}" stroke="#333"/>'
        )
        for value, text in ticks:
            py = self.y(value)
            self.parts.append(
                f'<line class="grid-y" x1="{self.left}" y1="{py:.1f}" x2="{self.right}" '
                f'y2="{py:.1f}" stroke="{PALETTE["light"]}"/>'
                f'<line x1="{self.left - 4}" y1="{py:.1f}" x2="{self.left}" y2="{py:.1f}" '
                f'stroke="#333"/><text class="tick-y" x="{self.left - 6}" y="{py + 4:.1f}" '
                f'text-anchor="end" style="{FONT}">{esc(text)}</text>'
            )
        middle = (self.top + self.bottom) / 2
        self.parts.append(
            f'<text class="axis-title-y" x="14" y="{middle:.1f}" text-anchor="middle" '
            f'transform="rotate(-90 14 {middle:.1f})" style="{FONT};font-weight:bold">'
            f"{esc(title)}</text>"
        )

    def polyline(self, points: Sequence[tuple[float, float]], color: str, css: str) -> None:
        """A line through data points."""
        coords = " ".join(f"{self.x(a):.1f},{self.y(b):.1f}" for a, b in points)
        self.parts.append(
            f'<polyline class="{css}" fill="none" stroke="{color}" stroke-width="1.5" '
            f'points="{coords}"/>'
        )

    def segment(
        self, start: tuple[float, float], end: tuple[float, float], color: str, css: str, title=""
    ) -> None:
        """A straight line between two data points."""
        self.parts.append(
            f'<line class="{css}" x1="{self.x(start[0]):.1f}" y1="{self.y(start[1]):.1f}" '
            f'x2="{self.x(end[0]):.1f}" y2="{self.y(end[1]):.1f}" stroke="{color}" '
            f'stroke-width="2">{self._title(title)}</line>'
        )

    def vline(
        self,
        x: float,
        color: str,
        css: str,
        *,
        label: str = "",
        title: str = "",
        row: int = 0,
        anchor: str = "",
    ) -> None:
        """A dashed vertical marker across the plot area, labelled at its top.

        ``row`` shifts the label down by rows of text, so close markers do not overlap;
        ``anchor`` (``start``: right of the line, ``end``: left of it) defaults to the side
        with more room.
        """
        px = self.x(x)
        self.parts.append(
            f'<g class="{css}"><line x1="{px:.1f}" y1="{self.top}" x2="{px:.1f}" '
            f'y2="{self.bottom}" stroke="{color}" stroke-width="1.5" stroke-dasharray="5 3"/>'
            f"{self._title(title)}"
        )
        if label:
            anchor = anchor or ("end" if px > (self.left + self.right) / 2 else "start")
            shift = -3 if anchor == "end" else 3
            self.parts.append(
                f'<text x="{px + shift:.1f}" y="{self.top + 11 + 13 * row}" text-anchor="{anchor}" '
                f'style="{FONT}" fill="{color}">{esc(label)}</text>'
            )
        self.parts.append("</g>")

    def bar(self, x0: float, x1: float, y_px: float, height: float, color: str, title="") -> None:
        """A horizontal bar from x0 to x1 (data) at pixel row ``y_px``."""
        width = max(1.0, self.x(x1) - self.x(x0))
        self.parts.append(
            f'<rect class="bar" x="{self.x(x0):.1f}" y="{y_px:.1f}" width="{width:.1f}" '
            f'height="{height}" fill="{color}">{self._title(title)}</rect>'
        )

    def dot(self, x: float, y: float, color: str, css: str, title: str = "") -> None:
        """A round marker at a data point."""
        self.parts.append(
            f'<circle class="{css}" cx="{self.x(x):.1f}" cy="{self.y(y):.1f}" r="4" '
            f'fill="{color}" stroke="#fff">{self._title(title)}</circle>'
        )

    def text(self, x_px: float, y_px: float, text: str, color: str = "#333", css="") -> None:
        """Text at a pixel position."""
        css_attr = f' class="{css}"' if css else ""
        self.parts.append(
            f'<text{css_attr} x="{x_px:.1f}" y="{y_px:.1f}" style="{FONT}" fill="{color}">'
            f"{esc(text)}</text>"
        )

    def legend(self, items: Sequence[tuple[str, str]]) -> None:
        """(color, text) swatches in one row above the plot area."""
        x = self.left
        for color, text in items:
            self.parts.append(
                f'<rect class="legend" x="{x}" y="4" width="10" height="10" fill="{color}"/>'
                f'<text x="{x + 14}" y="13" style="{FONT}">{esc(text)}</text>'
            )
            x += 24 + 6.2 * len(text)

    def svg(self) -> str:
        """The chart as one ``<svg>`` element."""
        return (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width}" height="{self.height}" '
            f'role="img" aria-label="{esc(self.label)}">{"".join(self.parts)}</svg>'
        )
