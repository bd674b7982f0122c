"""The benchmark goals table: read from the results files, quoted verbatim by the docs."""

import json
import pathlib

from benchmarks import summary

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_benchmarks_page_quotes_the_table_the_results_give():
    quoted = summary.quoted((ROOT / "docs" / "benchmarks.md").read_text())
    assert quoted, "docs/benchmarks.md lacks the bench-summary block"
    assert quoted == summary.table(summary.rows()), (
        "docs/benchmarks.md's benchmark table is stale. "
        "Fix: python -m benchmarks.summary --doc docs/benchmarks.md"
    )


def test_listed_goals_and_the_campaign_reader_give_one_row_per_goal(tmp_path):
    (tmp_path / "alpha.json").write_text(
        json.dumps(
            {
                "goals": [
                    {"id": "1", "goal": "x <= 2", "measured": 1.23456, "met": True},
                    {"id": "2", "what": "y | z", "measured": 7, "where": "hourly", "met": False},
                    {
                        "id": "3",
                        "goal": "w <= 1",
                        "measured": 0.5,
                        "where": "daily",
                        "met": True,
                        "command": "python -m alpha --seeds 2",
                        "seconds": 12.4,
                    },
                ]
            }
        )
    )
    (tmp_path / "fault_campaign.json").write_text(
        json.dumps({"violation_count": 1, "fault_plans": 10, "bad_inputs": 5})
    )
    (tmp_path / "summary.json").write_text("[]")
    found = summary.rows(tmp_path)
    assert [(r["benchmark"], r["measured"], r["met"]) for r in found] == [
        ("alpha", "1.235", True),
        ("alpha", "7 (hourly)", False),
        ("alpha", "0.5 (daily); `python -m alpha --seeds 2`, 12 s", True),
        ("fault_campaign", "1 violations in 10 fault plans and 5 bad inputs", False),
    ]
    lines = summary.table(found).splitlines()
    assert lines[3] == "| `alpha` | y / z | 7 (hourly) | **not met** |"
