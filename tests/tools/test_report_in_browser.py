"""The run report in a real browser: headless Chromium renders it and the screenshot shows it.

Chromium is required: without it the test fails saying how to install it, unless
``VSP_SKIP_BROWSER=1`` is set, which skips it explicitly (pytest shows the reason).
"""

from __future__ import annotations

import os

import pytest

from tools import png_pixels, report_sample, report_screenshot

WHITE = (255, 255, 255)
SPOT_BLUE = (0x4E, 0x79, 0xA7)  # running bars, the loss curve, the keep line
PREEMPTION_RED = (0xE1, 0x57, 0x59)  # preemption lines, the delete line
RESUME_GREEN = (0x59, 0xA1, 0x4F)  # resume lines and dots, the shrink line


@pytest.fixture(scope="module")
def chromium():
    browser = report_screenshot.find_chromium()
    if browser:
        return browser
    if os.environ.get("VSP_SKIP_BROWSER") == "1":
        pytest.skip("VSP_SKIP_BROWSER=1: the report's headless-browser check is skipped")
    pytest.fail(
        f"chromium is not installed, so the report cannot be checked in a browser: "
        f"{report_screenshot.INSTALL_HINT}, or set VSP_SKIP_BROWSER=1 to skip this check"
    )


@pytest.fixture(scope="module")
def pages(tmp_path_factory, chromium):
    return report_sample.write(tmp_path_factory.mktemp("sample"))


def _shot(pages, name, tmp_path):
    png = tmp_path / f"{name}.png"
    report_screenshot.screenshot(pages[name], png, 1200, 2000)
    assert png.is_file()
    image = png_pixels.read(png)
    assert (image.width, image.height) == (1200, 2000)
    return image.colours()


@pytest.mark.slow
def test_the_run_report_renders_its_charts(pages, tmp_path):
    colours = _shot(pages, "run-report.html", tmp_path)
    drawn = 1 - colours[WHITE] / (1200 * 2000)
    # Text, tables and two charts: measured 8.7% of the window; a blank page or a page whose
    # charts failed to render (no bars, no curve) falls far below the bound.
    assert 0.05 < drawn < 0.2, drawn
    assert len(colours) > 300  # anti-aliased text and lines in several colours
    assert colours[SPOT_BLUE] > 8000  # four running bars of 18 px and the loss curve
    assert colours[PREEMPTION_RED] > 300  # six dashed preemption lines
    assert colours[RESUME_GREEN] > 300  # three resume lines and dots


@pytest.mark.slow
def test_the_teardown_section_renders_its_cost_chart(pages, tmp_path):
    colours = _shot(pages, "teardown-report.html", tmp_path)
    drawn = 1 - colours[WHITE] / (1200 * 2000)
    assert 0.015 < drawn < 0.1, drawn  # measured 2.5%: the table and the chart
    for line in (SPOT_BLUE, PREEMPTION_RED, RESUME_GREEN):  # keep, delete, shrink
        assert colours[line] > 500, line


@pytest.mark.slow
def test_a_blank_page_fails_the_check(pages, tmp_path):
    """The bounds above are not met by an empty page: the check can fail."""
    blank = tmp_path / "blank.html"
    blank.write_text("<!doctype html><html><body></body></html>")
    pages = {**pages, "blank.html": blank}
    colours = _shot(pages, "blank.html", tmp_path)
    assert colours == {WHITE: 1200 * 2000}
