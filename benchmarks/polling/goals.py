"""The polling benchmark's goals, judged on the emulated runs' summaries, and the lower bounds
beside them (``benchmarks.polling.run`` measures; this module only judges)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

GOAL_CALLS, GOAL_P95 = 60.0, 30.0
GOAL_GOODPUT = 0.02  # the goodput metric benchmark's goal, here under the poll plan


def pull_p95_floor(preemptions: int, changes: int, looks_per_hour: float = GOAL_CALLS) -> float:
    """The least p95 detection (s) any pull schedule of ``looks_per_hour`` looks can reach when
    ``preemptions`` of the ``changes`` come at memoryless times, even if every other change
    were seen at once.

    With looks splitting an hour into gaps ``L_i`` (``sum L_i = 3600``), a change at a uniform
    time waits more than ``d`` with probability ``sum max(0, L_i - d) / 3600 >= 1 - n d / 3600``
    (convexity; equal gaps reach it). The p95 is at most ``d`` only if the preemptions' share
    ``q`` of the changes times that probability is at most 0.05:
    ``d >= 3600 / n * (1 - 0.05 / q)`` (0 when ``q <= 0.05``).
    """
    share = preemptions / changes if changes else 0.0
    if share <= 0.05:
        return 0.0
    return 3600.0 / looks_per_hour * (1.0 - 0.05 / share)


def slug(label: str) -> str:
    """A variant's label as a word: ``push, 25% unannounced`` -> ``push-25-unannounced``."""
    return re.sub(r"[^a-z0-9]+", "-", label.lower()).strip("-")


def _silent_floor(row: dict[str, Any], setting: str) -> list[dict]:
    """The lower bound of a push channel's p95 when some preemptions send no message.

    No message tells an unannounced preemption, so only a look (a Vertex call or a Cloud
    Storage read) sees it, and each Pub/Sub call the channel spends waiting for messages is one
    look fewer within the budget: ``pull_p95_floor`` over the unannounced preemptions with the
    looks left, ``GOAL_CALLS`` minus the channel's measured Pub/Sub calls per job-hour, every
    other change seen at once. Empty when every preemption was announced.
    """
    silent = sum(r.get("unannounced", 0) for r in row["runs"])
    if not silent:
        return []
    looks = max(GOAL_CALLS - row["pubsub_calls_per_job_hour"], 1.0)
    floor = pull_p95_floor(silent, row["changes"], looks)
    return [
        {
            "id": f"p95-floor-{slug(row['channel'])}",
            "goal": f"lower bound: the p95 any schedule of the {looks:.1f} looks per job-hour "
            f"left beside this channel's Pub/Sub calls reaches on this change mix, every change "
            f"but the unannounced preemptions seen at once (no target; {setting})",
            "measured": round(floor, 1),
            "where": f"{silent} of {row['changes']} changes are unannounced preemptions at "
            "memoryless times",
            "met": None,
        }
    ]


def goals(summaries: Sequence[dict[str, Any]], simulated: dict[str, Any]) -> list[dict]:
    """The goals on the emulated runs (both channels), then the simulated figures (no target)."""
    found = []
    for row in summaries:
        ident = slug(row["channel"])
        setting = (
            f"{row['channel']} channel, emulator x1/60, {row['scaled_job_hours']:.2f} scaled "
            f"job-hours, {row['preemptions']} preemptions"
        )
        if row.get("unannounced_share"):
            unannounced = sum(r.get("unannounced", 0) for r in row["runs"])
            setting += f", {unannounced} of them unannounced"
        found.append(
            {
                "id": f"calls-emulated-{ident}",
                "goal": f"API calls (Vertex + Cloud Storage reads + Pub/Sub) per job-hour <= "
                f"{GOAL_CALLS:g} ({setting})",
                "measured": round(row["calls_per_job_hour"], 1),
                "where": f"{row['vertex_calls_per_job_hour']:.1f} Vertex + "
                f"{row['storage_calls_per_job_hour']:.1f} Cloud Storage + "
                f"{row.get('pubsub_calls_per_job_hour', 0.0):.1f} Pub/Sub",
                "met": row["calls_per_job_hour"] <= GOAL_CALLS,
            }
        )
        found.append(
            {
                "id": f"p95-emulated-{ident}",
                "goal": f"p95 state-change detection <= {GOAL_P95:g} s ({setting})",
                "measured": round(row["latency_p95"], 1),
                "where": f"{row['changes']} changes, {row['never_seen']} never seen",
                "met": row["latency_p95"] <= GOAL_P95 and row["never_seen"] == 0,
            }
        )
        errors = row.get("goodput_errors") or []
        if errors:
            worst = max(errors, key=abs)
            found.append(
                {
                    "id": f"goodput-emulated-{ident}",
                    "goal": f"the step's goodput within {GOAL_GOODPUT:.0%} of the truth on every "
                    f"run under the poll plan ({setting})",
                    "measured": f"worst {worst:+.2%} over {len(errors)} runs",
                    "where": "truth: the trainer's step log and the emulator's run records",
                    "met": all(abs(e) <= GOAL_GOODPUT for e in errors)
                    and len(errors) == len(row["runs"]),
                }
            )
        if row["channel"].startswith("push"):
            found += _silent_floor(row, setting)
            continue  # the floor of pull schedules: the push channel is not one
        floor = pull_p95_floor(row["preemptions"], row["changes"])
        found.append(
            {
                "id": f"p95-floor-{ident}",
                "goal": f"lower bound: the p95 any pull schedule of {GOAL_CALLS:g} looks per "
                f"job-hour reaches on this change mix, every change but the preemptions seen at"
                f" once (no target; {setting})",
                "measured": round(floor, 1),
                "where": f"{row['preemptions']} of {row['changes']} changes are preemptions at "
                "memoryless times",
                "met": None,
            }
        )
    for row in simulated["rows"]:
        if row["poller"].startswith("plan") and row["family"] == "spot":
            found.append(
                {
                    "id": f"simulated-{row['poller'].split(', ')[1]}",
                    "goal": f"simulated only (full scale, fake clock, {simulated['seeds']} "
                    f"jobs): calls per job-hour and p95 s, {row['poller']} (no target)",
                    "measured": round(row["calls_per_job_hour_mean"], 1),
                    "where": f"p95 {row['latency_p95']:.1f} s",
                    "met": None,
                }
            )
    return found
