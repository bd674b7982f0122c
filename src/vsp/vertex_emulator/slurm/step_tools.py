"""``srun`` and ``scontrol show hostnames`` for emulated jobs (standard library only).

The emulator copies this file into ``{state}/slurm/bin`` as ``srun`` and ``scontrol`` (with its
Python in the ``#!`` line) and puts that folder first in every batch script's ``PATH``, so a
batch script calls them as on a cluster. What they model of Slurm 24.11:

* ``srun [-N|--nodes=N] [--ntasks-per-node=K] [-n|--ntasks=T] [-K|--kill-on-bad-exit[=0|1]]
  [--export=ALL] CMD ARGS...`` inside a job: K tasks (default 1) on each of the first N nodes of
  ``SLURM_JOB_NODELIST`` (default all), each with the job's environment plus ``SLURM_PROCID``,
  ``SLURM_LOCALID``, ``SLURM_NODEID``, ``SLURMD_NODENAME``, ``SLURM_STEP_ID``,
  ``SLURM_STEP_NODELIST``, ``SLURM_STEP_NUM_NODES``, ``SLURM_STEP_NUM_TASKS``, ``SLURM_NTASKS``
  and ``SLURM_TASKS_PER_NODE`` (the step's values). The emulator has one filesystem per cluster
  (not per node), so every task sees the cluster's filesystem.
* Signals: SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP and SIGCONT reach every task.
* A task that fails (non-zero exit or a signal) is reported as ``srun: error: NODE: task N:
  Exited with exit code X`` (or the signal's name); with ``--kill-on-bad-exit=1`` the other
  tasks get SIGTERM and, after 5 s (KillWait), SIGKILL. The exit code is the highest task exit
  code, 128 + N for a task killed by signal N.
* Tasks stay in the batch script's process group, so when the job ends (completed, cancelled,
  preempted) the emulator's kill of that group ends every task too.
* ``scontrol show hostnames [LIST]``: one host name a line (``LIST`` default
  ``SLURM_JOB_NODELIST``).
* ``scontrol update JobId=ID Comment=TEXT``: the job's comment, as its owner may set it. The
  emulated command leaves the update in ``{state}/slurm/<cluster>/comment-updates`` (beside
  its ``bin`` folder) and the emulator applies every such update, in order, before it answers
  the next Slurm call (``comment_updates``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

KILL_WAIT_SECONDS = 5.0
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGHUP,
    signal.SIGCONT,
)
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def expand_hostlist(text: str) -> list[str]:
    """``c1-spot-[0-2,5],c1-x-0`` -> ``[c1-spot-0, c1-spot-1, c1-spot-2, c1-spot-5, c1-x-0]``."""
    names: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", text or ""):
        match = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
        if not match:
            names.append(part)
            continue
        head, ranges, tail = match.groups()
        for piece in ranges.split(","):
            found = _RANGE.match(piece)
            if not found:
                raise ValueError(f"bad host list {text!r}")
            low, high = found.group(1), found.group(2) or found.group(1)
            for number in range(int(low), int(high) + 1):
                names.append(f"{head}{str(number).zfill(len(low))}{tail}")
    return names


def _fail(message: str, code: int = 1) -> int:
    print(f"srun: error: {message}", file=sys.stderr, flush=True)
    return code


def _parse(args: list[str]) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    short = {"-N": "nodes", "-n": "ntasks", "-K": "kill-on-bad-exit"}
    index = 0
    while index < len(args):
        word = args[index]
        if word == "--":
            index += 1
            break
        if not word.startswith("-"):
            break
        if word in short:
            name = short[word]
            if name == "kill-on-bad-exit":
                options[name] = "1"
            else:
                index += 1
                options[name] = args[index] if index < len(args) else ""
        elif word.startswith("--"):
            name, sep, value = word[2:].partition("=")
            if name not in ("nodes", "ntasks", "ntasks-per-node", "kill-on-bad-exit", "export"):
                raise ValueError(f"unrecognized option '{word}' (emulated srun)")
            options[name] = value if sep else "1"
        else:
            raise ValueError(f"unrecognized option '{word}' (emulated srun)")
        index += 1
    return options, args[index:]


def srun(args: list[str]) -> int:
    """Runs one job step; returns srun's exit code."""
    try:
        options, command = _parse(args)
    except ValueError as exc:
        return _fail(str(exc))
    if not command:
        return _fail("no command given")
    if not os.environ.get("SLURM_JOB_ID"):
        return _fail("srun runs inside a job here (the emulator has no interactive allocations)")
    allocation = expand_hostlist(os.environ.get("SLURM_JOB_NODELIST", ""))
    try:
        count = int(options.get("nodes") or len(allocation))
        per_node = int(options.get("ntasks-per-node") or 0)
        total = int(options.get("ntasks") or 0)
    except ValueError:
        return _fail("--nodes, --ntasks and --ntasks-per-node take whole numbers")
    if not 1 <= count <= len(allocation):
        return _fail(
            f"Unable to create step for job {os.environ['SLURM_JOB_ID']}: Requested node "
            "configuration is not available"
        )
    if not per_node:
        per_node = max(1, -(-total // count)) if total else 1
    total = total or per_node * count
    nodes = allocation[:count]
    placement = []  # (node index, local id) per task, block distribution
    for node_index in range(count):
        for local in range(per_node):
            if len(placement) < total:
                placement.append((node_index, local))
    step = os.environ.get("VSP_EMULATED_STEP_COUNTER", "0")
    step_nodelist = (
        ",".join(nodes) if count != len(allocation) else os.environ["SLURM_JOB_NODELIST"]
    )
    tasks = []
    for rank, (node_index, local) in enumerate(placement):
        env = dict(os.environ)
        env.update(
            SLURM_PROCID=str(rank),
            SLURM_LOCALID=str(local),
            SLURM_NODEID=str(node_index),
            SLURMD_NODENAME=nodes[node_index],
            SLURM_TOPOLOGY_ADDR=nodes[node_index],
            SLURM_STEP_ID=step,
            SLURM_STEPID=step,
            SLURM_STEP_NODELIST=step_nodelist,
            SLURM_STEP_NUM_NODES=str(count),
            SLURM_STEP_NUM_TASKS=str(total),
            SLURM_NTASKS=str(total),
            SLURM_NPROCS=str(total),
            SLURM_NNODES=str(count),
            SLURM_TASKS_PER_NODE=f"{per_node}(x{count})" if count > 1 else str(per_node),
            SLURM_STEP_TASKS_PER_NODE=f"{per_node}(x{count})" if count > 1 else str(per_node),
        )
        try:
            tasks.append(subprocess.Popen(command, env=env))
        except OSError as exc:
            for started in tasks:
                started.kill()
                started.wait()
            return _fail(f"{nodes[node_index]}: task {rank}: execve(): {command[0]}: {exc}", 2)

    def forward(signum: int, _frame: object) -> None:
        for task in tasks:
            if task.returncode is None:
                try:
                    task.send_signal(signum)
                except ProcessLookupError:
                    pass

    for signum in FORWARDED:
        signal.signal(signum, forward)
    kill_on_bad_exit = options.get("kill-on-bad-exit", "0") not in ("0", "")
    worst = 0
    kill_deadline = None
    pending = set(range(len(tasks)))
    while pending:
        for rank in sorted(pending):
            code = tasks[rank].poll()
            if code is None:
                continue
            pending.discard(rank)
            node = nodes[placement[rank][0]]
            if code < 0:
                name = signal.Signals(-code).name.removeprefix("SIG").title()
                print(f"srun: error: {node}: task {rank}: {name}", file=sys.stderr, flush=True)
                worst = max(worst, 128 - code)
            elif code:
                print(
                    f"srun: error: {node}: task {rank}: Exited with exit code {code}",
                    file=sys.stderr,
                    flush=True,
                )
                worst = max(worst, code)
            if code and kill_on_bad_exit and kill_deadline is None and pending:
                print(
                    "srun: error: Terminating StepId="
                    f"{os.environ['SLURM_JOB_ID']}.{step} (a task failed, --kill-on-bad-exit)",
                    file=sys.stderr,
                    flush=True,
                )
                forward(signal.SIGTERM, None)
                kill_deadline = time.monotonic() + KILL_WAIT_SECONDS
        if kill_deadline is not None and time.monotonic() >= kill_deadline:
            forward(signal.SIGKILL, None)
            kill_deadline = float("inf")
        if pending:
            time.sleep(0.05)
    return worst


UPDATES_DIRNAME = "comment-updates"


def _update(args: list[str]) -> int:
    """``scontrol update JobId=ID Comment=TEXT`` (see the module docstring)."""
    fields = dict(arg.split("=", 1) for arg in args if "=" in arg)
    fields = {k.lower(): v for k, v in fields.items()}
    job = fields.get("jobid", "")
    if not job.isdigit() or "comment" not in fields or len(fields) != 2 or len(args) != 2:
        print("scontrol: error: the emulator models only 'update JobId=ID Comment=TEXT'",
              file=sys.stderr)  # fmt: skip
        return 1
    folder = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))),
                          UPDATES_DIRNAME)  # fmt: skip
    os.makedirs(folder, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}-{job}"
    tmp = os.path.join(folder, "." + name)
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(fields["comment"])
    os.replace(tmp, os.path.join(folder, name))
    return 0


def scontrol(args: list[str]) -> int:
    """``scontrol show hostnames [LIST]`` and ``scontrol update JobId=ID Comment=TEXT``;
    anything else is refused."""
    if args[:1] == ["update"]:
        return _update(args[1:])
    if len(args) in (2, 3) and args[:2] == ["show", "hostnames"]:
        text = args[2] if len(args) == 3 else os.environ.get("SLURM_JOB_NODELIST", "")
        try:
            names = expand_hostlist(text)
        except ValueError as exc:
            print(f"scontrol: error: {exc}", file=sys.stderr)
            return 1
        print("\n".join(names))
        return 0
    print("scontrol: error: the emulator models only 'scontrol show hostnames' and 'scontrol "
          "update JobId=ID Comment=TEXT'", file=sys.stderr)  # fmt: skip
    return 1


def main() -> int:
    """Entry of both tools, chosen by the name the file is called by."""
    name = os.path.basename(sys.argv[0])
    if name == "scontrol":
        return scontrol(sys.argv[1:])
    return srun(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
