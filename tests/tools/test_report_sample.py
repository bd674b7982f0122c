"""The sample run report (the docs' screenshots): every part the README describes is in it."""

from __future__ import annotations

import re

from tools import report_sample


def test_the_sample_report_has_the_summary_charts_markers_and_readable_times(tmp_path):
    page = report_sample.write(tmp_path)["run-report.html"].read_text()
    assert "<h1>slurm-spot-training: SUCCEEDED in 19 min 48 s</h1>" in page
    # Shrunk: the last hourly tick within the shrink break-even time (8.8 h) plus 15 min slack.
    assert "<tr><th>shrunk until</th><td>2026-12-04 22:15:00 UTC, then reaped</td></tr>" in page
    timeline = re.search(r'<svg[^>]*aria-label="timeline">.*?</svg>', page).group(0)
    loss = re.search(r'<svg[^>]*aria-label="loss">.*?</svg>', page).group(0)
    costs = re.search(r'<svg[^>]*aria-label="teardown costs">.*?</svg>', page).group(0)
    assert timeline.count('<g class="marker preemption">') == 3
    assert timeline.count('<g class="marker resume">') == 3
    labels = re.findall(r'<g class="marker preemption">.*?<text[^>]*>([^<]*)</text>', loss)
    assert labels == ["P1/R1 step 160", "P2/R2 step 310", "P3/R3 step 430"]
    assert ">break-even 36 min 40 s: 7.33 USD</text>" in costs
    assert ">expected idle 43 min 16 s (next run)</text>" in costs
    assert not re.search(r"\d{8}t\d{6}z", page)  # no label-format timestamp anywhere
