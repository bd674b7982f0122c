"""The polling benchmark's Markdown report (``polling.md``) from its results (``run.main``)."""

from __future__ import annotations

from typing import Any


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: command, goals, the emulated runs, then the simulation."""
    s = results["settings"]
    lines = [
        "# Polling: the training step's API calls per job-hour and detection time",
        "",
        f"`{results['command']}` on {results['machine']}, {results['date']}: "
        f"{results['wall_seconds']:.0f} s wall (all numbers: "
        f"`{results.get('name', 'polling')}.json`).",
        "",
        "Counted: every Vertex request of the training step (submit, lookups, each Slurm Job "
        "API call through Vertex, and the read and update of the cluster's labels that renew "
        "the run's claim as its job ends), every Pub/Sub request (the subscription's create and "
        "delete, each pull, each acknowledgement) and every Cloud Storage read (beacon, "
        "progress records, log) that the modelled FUSE cache did not serve (the mount's stat "
        "cache, gcsfuse's default `ttl-secs` 60 s and `negative-ttl-secs` 5 s: a read within "
        "that time is served from the last fetch, free and stale). Plan: "
        f"`PlanSettings.for_poll_seconds(20)` (look {s['beacon_seconds']:g} s, expect "
        f"{s['expect_seconds']:g} s, pending {s['pending_seconds']:g} s, stale "
        f"{s['stale_seconds']:g} s, cap {s['cap_seconds']:g} s, FUSE cache "
        f"{s['cache_seconds']:g} s, job heartbeat {s['heartbeat_seconds']:g} s; with "
        f"messages: beacon read and cap {s['push_read_seconds']:g} s, next start waited for "
        f"{s['restart_seconds']:g} s after a preempted run's exit). Pushed: "
        + ", ".join(f"{k.replace('_seconds', '')} {v:g} s" for k, v in results["feed"].items())
        + " (`FeedSettings`, the pull hold of the emulator 90 s).",
        "",
        "## Goals",
        "",
        "| goal | measured | met |",
        "|---|---|---|",
    ]
    for goal in results["goals"]:
        state = {True: "met", False: "**not met**"}.get(goal["met"], "reported")
        value = goal["measured"]
        shown = f"{value:.1f}" if isinstance(value, (int, float)) else str(value)
        lines.append(f"| {goal['goal']} | {shown} ({goal['where']}) | {state} |")
    runs = [r for row in results.get("emulated", []) for r in row["runs"] if r.get("goodput")]
    if runs:
        lines += [
            "",
            "## The step's goodput under the plan, against the truth",
            "",
            "Truth as in `benchmarks.goodput.metric`: useful time from the trainer's step log, "
            "billed time from the emulator's run records. Under the plan the step calls Vertex "
            "rarely; a run's end is dated from the last beacon the run wrote (`poll_window`).",
            "",
            "| channel | seed | preemptions | goodput metric | truth | error | billed s metric "
            "/ truth |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in runs:
            g, b = r["goodput"], r["billed_seconds"]
            error = (g["metric"] - g["truth"]) / g["truth"] if g["metric"] is not None else None
            shown = "-" if error is None else f"{error:+.2%}"
            lines.append(
                f"| {r['channel']} | {r['seed']} | {r['preemptions']} | {g['metric']} | "
                f"{g['truth']} | {shown} | {b['metric']:.1f} / {b['truth']:.1f} |"
            )
    lines += [
        "",
        "## Measured on the emulator (time x1/60)",
        "",
        "The training step on an emulated cluster, the example trainer under the emulator's "
        "seeded Poisson preemptions (M = 60 s = 1 h, notice 0.5 s = 30 s, requeue 2 s = 2 min), "
        "every interval of the plan and the FUSE cache divided by 60. Detection: from the "
        "emulator's state change (a run's start, a preemption at its notice, the end) to the "
        "first observation of the step that shows it, in real-scale seconds (x60).",
        "",
        "| channel | scaled job-hours | preemptions | calls / job-hour | Vertex | Cloud Storage |"
        " Pub/Sub | p50 s | p95 s | max s | changes | never seen |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["emulated"]:
        lines.append(
            f"| {row['channel']} | {row['scaled_job_hours']:.2f} | {row['preemptions']} | "
            f"{row['calls_per_job_hour']:.1f} | {row['vertex_calls_per_job_hour']:.1f} | "
            f"{row['storage_calls_per_job_hour']:.1f} | "
            f"{row.get('pubsub_calls_per_job_hour', 0.0):.1f} | {row['latency_p50']:.1f} | "
            f"{row['latency_p95']:.1f} | {row['latency_max']:.1f} | {row['changes']} | "
            f"{row['never_seen']} |"
        )
    lines += [
        "",
        "*beacon*: the job writes its beacon file beside the checkpoints; *comment*: a file "
        "stands where the beacon folder would be, the job says so in its output and keeps its "
        "beacon in its Slurm comment, which the step reads from the Vertex calls it makes (no "
        "Cloud Storage read once it knows); *push*: the job writes its beacon file and also "
        "publishes its start, notice and exit to Pub/Sub, and the step waits on a pull of its "
        "subscription between looks (`progress_topic`); the emulator holds a pull that finds "
        "nothing for 90 s (scaled), the one figure reported for real Pub/Sub, whose bound is "
        "not documented: each such pull is a call, so the calls per job-hour of this channel "
        "rest on that figure (about 3600 / hold of them are pulls); *push, 25% unannounced*: "
        "the same with a quarter of the preemptions without notice, which no message tells "
        "(the next run's start does). Channels the step saw: "
        + "; ".join(f"{r['channel']}: {', '.join(r['channels_seen'])}" for r in results["emulated"])
        + ".",
        "",
        "Why the p95 of the pull channels stays near the look interval: the preemption itself "
        "and the job's end are announced by nothing the step can see before its next look, so "
        "they are seen within one look interval (100 s here), uniformly: the p95 of those "
        "changes is near 0.95 x 100 s. A look every 30 s would bring it to 30 s but costs 120 "
        "looks per job-hour, each a call (a beacon read served by the 60 s cache is no "
        "fresher). Within 60 calls per job-hour a 30 s p95 needs a change to be pushed to the "
        "step: the push channel does it, for about 40 pulls per job-hour at a 90 s hold on "
        "top of the plan's other calls. The goals table's lower bound makes it exact: with 60 "
        "looks an hour, a change at a memoryless time waits more than d with probability at least "
        "1 - 60 d / 3600, so when a share q of the changes are preemptions the p95 is at least "
        "60 s x (1 - 0.05 / q) whatever the schedule, even with every other change seen at "
        "once (`pull_p95_floor`). An unannounced preemption is such a change on the push "
        "channel too, and every Pub/Sub call spent waiting for messages is a look fewer: with "
        "the looks left beside the channel's Pub/Sub calls the same bound (its goals row) is "
        "above 30 s on this run's change mix, so no schedule within the budget meets the goal "
        "there. Ours finds them when the next run's start is "
        "pushed, after the requeue (about 2 minutes): Slurm requeues the job by itself, so the "
        "step has nothing to do sooner.",
        "",
        "## Simulated (full scale, fake clock; no goal is judged on these)",
        "",
        f"{results['simulated']['seeds']} seeded jobs per row, each 4 h of work, preemptions "
        "every M = 1 h on average with a 30 s notice, requeue held 121 s + 15-30 s. Detection: "
        "from a Vertex-visible state change (PENDING, RUNNING, SUCCEEDED) to the first Vertex "
        "call that sees it; *missed*: the state had changed again before that call. Calls per "
        "job-hour count the Vertex calls and the beacon reads (one per read interval: the reads "
        "the cache serves are left out).",
        "",
        "| family | poller | calls / job-hour (mean) | (max) | Vertex | p50 s | p95 s | max s | "
        "changes | missed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["simulated"]["rows"]:
        lines.append(
            f"| {row['family']} | {row['poller']} | {row['calls_per_job_hour_mean']:.1f} | "
            f"{row['calls_per_job_hour_max']:.1f} | {row['vertex_calls_per_job_hour_mean']:.1f}"
            f" | {row['latency_p50']:.1f} | {row['latency_p95']:.1f} | {row['latency_max']:.1f}"
            f" | {row['changes']} | {row['missed_changes']} |"
        )
    shared = results["simulated"]["shared"]
    lines += [
        "",
        "Families: *spot* every preemption has its notice; *hard-kill* a quarter of them have "
        "none (no notice, no exiting: found when the beacon goes stale or the next run's "
        "beacon shows); *beacon-lost* the beacon stops in the first hour while the job runs "
        "on; *no-beacon* the step never sees a beacon in either channel. Earlier versions of "
        "this table left the beacon reads out (20.8 Vertex calls per job-hour for *spot*, with "
        "720 uncounted reads).",
        "",
        f"Many jobs on one cluster: {shared['jobs']} *spot* jobs, one list call (`GET "
        "/slurm/v0.0.42/jobs`) per cycle for every job that wants one (`shared_plan.SharedPlan`):"
        f" {shared['list_calls']} list calls and {shared['beacon_reads']} beacon reads, "
        f"{shared['calls_per_job_hour_mean']:.1f} calls per job-hour, p95 detection "
        f"{shared['latency_p95']:.1f} s, {shared['missed_changes']} missed of "
        f"{shared['changes']}. The training step supervises one job, so it does not use this.",
        "",
    ]
    return "\n".join(lines)
