"""``emulator_scale``: the ratios and goals computed from measured series (no benchmark run)."""

from __future__ import annotations

from benchmarks.emulator import scale


def _series(kind_op, medians):
    return [{"size": size, kind_op: {"median_ms": ms, "p95_ms": ms}} for size, ms in medians]


def test_ratio_is_largest_size_over_size_zero():
    assert scale.ratio(_series("create", [(0, 2.0), (50, 2.5), (200, 3.0)]), "create") == 1.5
    assert scale.ratio(_series("create", [(50, 2.0), (200, 3.0)]), "create") is None


def test_goals_mark_met_and_not_met():
    after = {
        "clusters": _series("create", [(0, 2.0), (200, 3.0)]),
        "models": _series("upload", [(0, 1.0), (1000, 1.6)]),
    }
    before = {
        "clusters": _series("create", [(0, 5.0), (200, 143.0)]),
        "models": _series("upload", [(0, 2.0), (1000, 151.0)]),
    }
    rows = scale.goals(after, before)
    assert [(r["id"], r["measured"], r["before"], r["met"]) for r in rows] == [
        ("W1", 1.5, 143.0 / 5.0, True),
        ("W2", 1.6, 151.0 / 2.0, False),
    ]
    assert rows[1]["goal"] == "upload latency at 1000 versions / at 0 <= 1.5"
