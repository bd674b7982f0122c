"""Mutation score of the fault campaign: planted bugs it must catch.

``python -m benchmarks.mutants [--cap N] [--seed S] [--only NAME ...] [--out DIR]`` (``make
mutants``). Each mutant is one small textual patch (an ``old`` snippet replaced by ``new``) of a
named file under ``src/vsp``: a bug the runtime could regress into (a create resent without a
look-up, a delete that skips the in-use check, a lost expiry label...). For each mutant the
repository is copied to a temporary directory (the working tree is never touched), the patch
is applied there (an ``old`` snippet that does not occur exactly once is an error, never a
silent skip), and the campaign's ``hunt`` runs in a fresh interpreter on that copy: generated
fault plans over the entry points that run the patched code, with a fixed seed, until the first
violation or ``--cap`` plans. The unmutated copy runs the same hunt over every entry point
first and must show no violation.

The CI budget: at most ``--cap`` plans per mutant (default 250, under 2 min of a 2-core machine)
and the whole run under 20 min.

Results: ``mutants.json`` and ``mutants.md`` in ``--out`` (default ``benchmarks/results``):
every mutant, whether it was caught, the ``Plan(...)`` that caught it (it replays with
``campaign_plans.run_plan``), the violation, after how many plans and seconds; the goal
"every mutant caught" in the form ``benchmarks.summary`` reads.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
COPIED = ("src", "tests", "benchmarks", "pyproject.toml")
ALL = ("cluster_create", "cluster_delete", "exit_task", "register_model", "slurm_submit")
TEARDOWN = ("cluster_delete", "exit_task")
RUNTIME = "src/vsp/components/runtime"


@dataclasses.dataclass(frozen=True)
class Mutant:
    """A planted bug: ``old`` replaced by ``new`` in ``path``; ``entries`` run that code."""

    name: str
    path: str
    old: str
    new: str
    entries: tuple[str, ...]
    bug: str


MUTANTS = [
    Mutant(
        "delete_skips_in_use_check",
        f"{RUNTIME}/teardown/in_use.py",
        "    if keep_if_in_use(\n        client,\n        ref,\n        cluster,",
        "    if False and keep_if_in_use(\n        client,\n        ref,\n        cluster,",
        TEARDOWN,
        "a teardown deletes the cluster without reading its queue for other runs' jobs",
    ),
    Mutant(
        "in_use_check_ignores_other_runs",
        f"{RUNTIME}/teardown/in_use.py",
        "return [j for j in jobs if not j.is_terminal and not (own and j.pipeline_run == own)]",
        "return [j for j in jobs if not j.is_terminal and not own]",
        TEARDOWN,
        "every job counts as the deleting run's own, so another run's job never keeps the cluster",
    ),
    Mutant(
        "in_use_keep_without_expiry",
        f"{RUNTIME}/teardown/in_use.py",
        "        gcp_labels.TEARDOWN: IN_USE,\n"
        "        gcp_labels.EXPIRES_AT: gcp_labels.format_label_time(expires),\n",
        "        gcp_labels.TEARDOWN: IN_USE,\n",
        TEARDOWN,
        "a cluster kept because it is in use gets no expiry label (no reaper ever deletes it)",
    ),
    Mutant(
        "failed_run_keep_without_expiry",
        f"{RUNTIME}/teardown/exit_task.py",
        "            gcp_labels.TEARDOWN: RETRY_LABEL_VALUE,\n"
        "            gcp_labels.EXPIRES_AT: gcp_labels.format_label_time(expires),\n",
        "            gcp_labels.TEARDOWN: RETRY_LABEL_VALUE,\n",
        ("exit_task",),
        "the exit task keeps a failed run's cluster warm and forgets its expiry label",
    ),
    Mutant(
        "claim_keeps_expiry",
        f"{RUNTIME}/cluster/claims.py",
        "remove = [gcp_labels.EXPIRES_AT, gcp_labels.TEARDOWN]",
        "remove = [gcp_labels.TEARDOWN]",
        ("cluster_create",),
        "a run reusing a kept cluster leaves its expiry, so the reaper deletes it mid-training",
    ),
    Mutant(
        "create_resent_blindly",
        f"{RUNTIME}/cluster/ops.py",
        "            self.options.clock.sleep(next(self.options.backoff.delays()))\n"
        "            return None\n"
        "        self.cluster.record(",
        "            self.options.clock.sleep(next(self.options.backoff.delays()))\n"
        "            return self._create(body)\n"
        "        self.cluster.record(",
        ("cluster_create",),
        "a cluster create without an answer is sent again without looking the cluster up",
    ),
    Mutant(
        "create_drops_run_label",
        f"{RUNTIME}/steps/create_cluster.py",
        "        labels[gcp_labels.PIPELINE_RUN] = run\n",
        "        pass\n",
        ("cluster_create",),
        "a created cluster does not name the run that created it",
    ),
    Mutant(
        "operation_not_recorded_before_polling",
        f"{RUNTIME}/cluster/ops.py",
        "        self.cluster.record(self.cluster.resource_entry(gcp_resources.LRO, "
        'operation["name"]))\n        try:\n',
        "        try:\n",
        ("cluster_create",),
        "the create's operation is polled before its name is in gcp_resources (a cancel or a "
        "re-run cannot find it)",
    ),
    Mutant(
        "gone_cluster_fails_delete",
        f"{RUNTIME}/cluster/resource.py",
        "                    return False\n                break\n",
        "                    return False\n"
        '                raise errors.NotFoundError(f"cluster {self.ref.name} is gone")\n',
        ("cluster_delete",),
        "a DELETE whose answer was lost finds the cluster gone and reports a failure",
    ),
    Mutant(
        "client_resends_posts",
        f"{RUNTIME}/core/rest.py",
        "        if idempotent:\n            return self._retried(",
        "        if True:\n            return self._retried(",
        ("cluster_create", "register_model"),
        "the REST client retries every POST, creates and uploads included",
    ),
    Mutant(
        "submit_resent_blindly",
        f"{RUNTIME}/training/backends/slurm.py",
        "fresh = [a for a in self.find(run_key) if a.job_id not in known]",
        "fresh = []",
        ("slurm_submit",),
        "a Slurm submit without an answer is sent again without looking the job up",
    ),
    Mutant(
        "submit_drops_run_key",
        f"{RUNTIME}/slurm/script.py",
        'job: dict[str, Any] = {"name": self.run_key, "comment": self.comment}',
        'job: dict[str, Any] = {"name": "train", "comment": ""}',
        ("slurm_submit",),
        "the submitted job carries neither the run key nor the run (no re-attach, no lookup)",
    ),
    Mutant(
        "lookup_ignores_run_key",
        f"{RUNTIME}/slurm/job.py",
        'return self.name == run_key or f"vsp-run-key={run_key}" in self.comment.split()',
        "return False",
        ("slurm_submit",),
        "the job lookup by run key never matches (a lost submit answer leads to a second job)",
    ),
    Mutant(
        "converge_cancels_other_runs_jobs",
        f"{RUNTIME}/training/backends/slurm.py",
        "            for j in self.client.find_jobs(run_key)\n",
        "            for j in self.client.list_jobs()\n",
        ("slurm_submit",),
        "the duplicate-job check reads the whole queue and adopts or cancels other runs' jobs",
    ),
    Mutant(
        "upload_resent_blindly",
        f"{RUNTIME}/registry/client.py",
        "        if attempt > 1:\n            # Look again right before every resend",
        "        if False:\n            # Look again right before every resend",
        ("register_model",),
        "a model upload without an answer is sent again without listing the run's versions",
    ),
    Mutant(
        "upload_drops_run_label",
        f"{RUNTIME}/registry/client.py",
        "    merged[gcp_labels.PIPELINE_RUN] = run_value\n",
        "",
        ("register_model",),
        "an uploaded version does not carry the run's label",
    ),
    Mutant(
        "converge_takes_other_runs_versions",
        f"{RUNTIME}/registry/versions.py",
        '    mine = [v for v in listed if (v.get("labels") or {}).get(gcp_labels.PIPELINE_RUN) '
        "== run_value]",
        "    mine = listed",
        ("register_model",),
        "every version of the model counts as the run's: it adopts or deletes other runs' versions",
    ),
    Mutant(
        "no_settle_after_unknown_upload",
        f"{RUNTIME}/registry/client.py",
        "settle = settle_seconds if unknown else 0.0",
        "settle = 0.0",
        ("register_model",),
        "after an upload of unknown outcome nobody looks for the version it lands late",
    ),
]


def copy_repo(dest: pathlib.Path) -> pathlib.Path:
    """Copies what the campaign needs (sources, tests, benchmarks) to ``dest``."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "results")
    for name in COPIED:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, dest / name, ignore=ignore)
        else:
            shutil.copy2(source, dest / name)
    return dest


def apply(mutant: Mutant, root: pathlib.Path) -> None:
    """Applies ``mutant`` to the copy at ``root``.

    Raises:
        ValueError: ``old`` does not occur exactly once (the anchor no longer matches).
    """
    target = root / mutant.path
    text = target.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise ValueError(f"mutant {mutant.name}: anchor found {count} times in {mutant.path}")
    target.write_text(text.replace(mutant.old, mutant.new))


def hunt_in(
    root: pathlib.Path, entries: tuple[str, ...], cap: int, seed: int, limit: float
) -> dict:
    """Runs ``campaign_drive.hunt`` in a fresh interpreter on the copy at ``root``."""
    code = (
        "import json, pathlib, sys, tempfile\n"
        "from tests.campaign import campaign_drive\n"
        "entries, cap, seed = tuple(sys.argv[1].split(',')), int(sys.argv[2]), int(sys.argv[3])\n"
        "with tempfile.TemporaryDirectory(prefix='vsp-mutant-') as tmp:\n"
        "    found = campaign_drive.hunt(pathlib.Path(tmp), cap, seed, entries)\n"
        "print('HUNT ' + json.dumps(found.__dict__))\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}"}
    env.pop("VERTEX_EMULATOR_HOST", None)
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, ",".join(entries), str(cap), str(seed)],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=limit,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {limit:g} s", "seconds": limit}
    seconds = round(time.monotonic() - start, 1)
    lines = [line for line in done.stdout.splitlines() if line.startswith("HUNT ")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return {"error": f"exit {done.returncode}: " + " | ".join(tail), "seconds": seconds}
    return {**json.loads(lines[-1][5:]), "seconds": seconds}


def run_mutant(mutant: Mutant | None, cap: int, seed: int, limit: float) -> dict:
    """Copies the repository, applies ``mutant`` (None: none) and hunts; the result row."""
    with tempfile.TemporaryDirectory(prefix="vsp-mutants-") as tmp:
        root = copy_repo(pathlib.Path(tmp))
        row: dict = {"name": mutant.name if mutant else "unmutated"}
        if mutant is not None:
            row.update(file=mutant.path, bug=mutant.bug, entries=list(mutant.entries))
            apply(mutant, root)
        entries = mutant.entries if mutant else ALL
        row.update(hunt_in(root, entries, cap, seed, limit))
    return row


def _markdown(report: dict) -> str:
    base = report["unmutated"]
    lines = [
        "# Mutation score of the fault campaign",
        "",
        f"{report['date']} on {report['machine']}; seed {report['seed']}; at most "
        f"{report['cap']} plans per mutant; wall time {report['wall_seconds']:.0f} s.",
        "",
        f"- mutants: {report['mutants']}",
        f"- caught: {report['caught']}",
        f"- unmutated code: {base.get('plans', 0)} plans, "
        f"{'a violation: ' + base['violation'] if base.get('caught') else 'no violation'}"
        f"{' (error: ' + base['error'] + ')' if base.get('error') else ''}",
        "",
        "| Mutant | file | caught | plans | seconds | catching plan | violation |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report["results"]:
        caught = "yes" if row.get("caught") else ("error" if row.get("error") else "no")
        violation = row.get("violation") or row.get("error") or ""
        violation = violation if len(violation) <= 160 else violation[:157] + "..."
        lines.append(
            f"| {row['name']} | {row['file'].removeprefix('src/vsp/components/')} | {caught} | "
            f"{row.get('plans', '')} | {row['seconds']} | `{row.get('plan', '')}` | "
            f"{violation.replace('|', '/')} |"
        )
    lines += ["", "What each mutant plants:", ""]
    lines += [f"- `{row['name']}`: {row['bug']}." for row in report["results"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    """Runs every mutant (or ``--only`` some) and writes the results; returns the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cap", type=int, default=250, help="plans per mutant at most")
    parser.add_argument("--seed", type=int, default=20261205)
    parser.add_argument("--limit", type=float, default=300.0, help="seconds per mutant at most")
    parser.add_argument(
        "--only", nargs="*", help="mutant names (default: all; give another --out then)"
    )
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args(argv)
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    start = time.monotonic()
    for mutant in chosen:  # every anchor must match before anything runs
        with tempfile.TemporaryDirectory() as tmp:
            target = pathlib.Path(tmp) / "f.py"
            shutil.copy2(ROOT / mutant.path, target)
            apply(dataclasses.replace(mutant, path="f.py"), pathlib.Path(tmp))
    base = run_mutant(None, args.cap, args.seed, args.limit)
    print(f"unmutated: {base}", flush=True)
    results = []
    for mutant in chosen:
        row = run_mutant(mutant, args.cap, args.seed, args.limit)
        print(f"{mutant.name}: {row}", flush=True)
        results.append(row)
    caught = sum(1 for r in results if r.get("caught"))
    everything = caught == len(results) and not base.get("caught") and not base.get("error")
    report = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "seed": args.seed,
        "cap": args.cap,
        "wall_seconds": round(time.monotonic() - start, 1),
        "mutants": len(results),
        "caught": caught,
        "unmutated": base,
        "goals": [
            {
                "id": "every_mutant_caught",
                "goal": f"every mutant caught (at most {args.cap} fault plans each), and no "
                "violation on the unmutated code",
                "measured": f"{caught} of {len(results)} caught in "
                f"{round(time.monotonic() - start)} s; unmutated: "
                f"{'a violation' if base.get('caught') else 'no violation'} in "
                f"{base.get('plans', 0)} plans",
                "met": everything,
            }
        ],
        "results": results,
    }
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutants.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "mutants.md").write_text(_markdown(report))
    print(_markdown(report))
    print("every mutant caught" if everything else "NOT every mutant caught")
    return report


if __name__ == "__main__":
    main()
