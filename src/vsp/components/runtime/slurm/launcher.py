"""How the batch script starts the payload on a job's nodes: ``none``, ``srun`` or ``torchrun``.

* ``none``: the payload runs once, on the batch host (the first node of the allocation).
* ``srun``: ``srun --kill-on-bad-exit=1`` starts ``tasks_per_node`` tasks on every node; each task
  gets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``NODE_RANK``,
  ``MASTER_ADDR`` and ``MASTER_PORT`` (from ``SLURM_PROCID``, ``SLURM_LOCALID``,
  ``SLURM_NODEID`` and the allocation). ``MASTER_PORT`` is the job's own when its environment
  sets one, else drawn at every start.
* ``torchrun``: ``srun`` starts one ``torchrun`` per node with ``--nnodes=$SLURM_NNODES``,
  ``--nproc-per-node=tasks_per_node`` and a c10d rendezvous at the first node of this
  allocation, under a rendezvous id made of the job id and its restart count.

Everything that depends on the allocation (node count, first node, port, rendezvous id) is
computed by the script when the job starts, so a requeued job that lands on other nodes finds
its new head node; nothing is fixed at submit time. ``--kill-on-bad-exit=1`` ends every task
when one fails, so no rank keeps running (and billed) after another died. The batch script
passes ``srun`` only the signals srun passes on unchanged (SIGUSR1, SIGUSR2): srun answers
SIGTERM, SIGHUP, SIGQUIT and SIGINT by killing every task (``STEP_SIGNALS``), and the tasks get
the job's SIGTERM from their own step. srun then exits with
the highest task exit code, 143 for the ranks it terminated: when the job itself got no signal,
the script exits 1 instead, so the failure reads as the trainer's, not as a preemption.

Each task first sources the machine's NCCL settings file when it exists on its node (path in
``VSP_NCCL_ENV_FILE``, set from ``nccl_env_file``; '' = none), then execs the payload. The
job's environment reaches every task (``srun`` exports the whole environment by default).

All shell text here is constant; the only values from parameters (tasks per node, the NCCL file
path) are validated integers or ``shlex.quote``-d words.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

LAUNCHERS = ("none", "srun", "torchrun")
DEFAULT_NCCL_ENV_FILE = "/usr/local/gib/scripts/set_nccl_env.sh"
NCCL_ENV_FILE_ENV = "VSP_NCCL_ENV_FILE"
TASK_ARGV0 = "vsp-task"
# What srun does with a signal it gets (Slurm 24.11, src/srun/srun_job.c): SIGTERM, SIGHUP and
# SIGQUIT make it SIGKILL every task of its step at once, SIGINT asks for its status (twice in a
# second: the same kill); other signals it passes on unchanged. With a step launcher the tasks
# get the job's SIGTERM from their own step, so the batch script keeps these from srun (a preempted
# 2-node job forwarded SIGTERM to srun, which killed both ranks in their notice save).
STEP_SIGNALS = frozenset({"TERM", "HUP", "QUIT", "INT"})

# Not a format string: computed in the batch script at every start of the job.
_ALLOCATION = r"""# Multi-node launch: computed at every start of the job from this allocation.
_vsp_nnodes=${SLURM_JOB_NUM_NODES:-${SLURM_NNODES:-1}}
case "$_vsp_nnodes" in ''|*[!0-9]*) _vsp_nnodes=1 ;; esac
MASTER_ADDR=$(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | head -n 1)
MASTER_ADDR=${MASTER_ADDR:-${SLURMD_NODENAME:-$(hostname)}}
_vsp_jobid=${SLURM_JOB_ID:-0}
case "$_vsp_jobid" in ''|*[!0-9]*) _vsp_jobid=0 ;; esac
_vsp_restarts=${SLURM_RESTART_COUNT:-0}
case "$_vsp_restarts" in ''|*[!0-9]*) _vsp_restarts=0 ;; esac
# The head port: the job's own MASTER_PORT when its environment sets one (1024-65535), else one
# drawn at every start, so that neither a restart (its predecessor's port may linger in
# TIME_WAIT) nor another job whose head shares this node starts from the same port; then moved
# up past any port in use on this (the head) node.
case "${MASTER_PORT:-}" in
  ''|*[!0-9]*|?????????*) MASTER_PORT=0 ;;
esac
if [ "$MASTER_PORT" -lt 1024 ] || [ "$MASTER_PORT" -gt 65535 ]; then
  MASTER_PORT=$(( 20000 + (RANDOM * 32768 + RANDOM + _vsp_jobid * 7 + _vsp_restarts) % 20000 ))
fi
_vsp_used=$(awk 'NR > 1 { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2>/dev/null)
_vsp_used=" $(printf '%s ' $_vsp_used) "
for _ in $(seq 1 200); do
  case "$_vsp_used" in
    *" $(printf '%04X' "$MASTER_PORT") "*)
      MASTER_PORT=$(( MASTER_PORT >= 65535 ? 20000 : MASTER_PORT + 1 )) ;;
    *) break ;;
  esac
done
export MASTER_ADDR MASTER_PORT
export WORLD_SIZE=$(( _vsp_nnodes * _vsp_tasks ))
export LOCAL_WORLD_SIZE=$_vsp_tasks
export VSP_RDZV_ID="$_vsp_jobid-$_vsp_restarts"
echo "vsp: launch on $_vsp_nnodes node(s) x $_vsp_tasks task(s)," \
  "head $MASTER_ADDR:$MASTER_PORT, rendezvous $VSP_RDZV_ID" >&2
"""

# After srun: 143 (SIGTERM) with no signal sent to this job means srun's --kill-on-bad-exit
# ended the other tasks because one failed; that is the trainer's failure, not a preemption.
AFTER = r"""if [ "$_vsp_rc" = 143 ] && [ "$_vsp_noticed" = 0 ]; then
  echo "vsp: a task failed and srun ended the others (see srun's error above): exit 1" >&2
  _vsp_rc=1
fi
"""

# Run by every task (``bash -c TASK vsp-task ARGV...``): its rank variables, then the payload.
TASK_SCRIPT = (
    'f=${VSP_NCCL_ENV_FILE:-}; if [ -n "$f" ] && [ -r "$f" ]; then . "$f"; fi; unset f; '
    'export RANK="${SLURM_PROCID:-0}" LOCAL_RANK="${SLURM_LOCALID:-0}" '
    'NODE_RANK="${SLURM_NODEID:-0}"; exec "$@"'
)


def check(launcher: str) -> None:
    """Raises ValueError when ``launcher`` is not one of ``LAUNCHERS``."""
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher must be one of {', '.join(LAUNCHERS)}, not {launcher!r}")


def preamble(launcher: str, tasks_per_node: int, nccl_env_file: str) -> str:
    """Script lines run before the payload starts ('' for ``none``)."""
    check(launcher)
    if launcher == "none":
        return ""
    return (
        f"_vsp_tasks={int(tasks_per_node)}\n"
        f"export {NCCL_ENV_FILE_ENV}={shlex.quote(nccl_env_file)}\n{_ALLOCATION}"
    )


def prefix(launcher: str, tasks_per_node: int) -> list[str]:
    """The words the batch script puts before the payload's argv ([] for ``none``)."""
    check(launcher)
    if launcher == "none":
        return []
    task = ["/bin/bash", "-c", TASK_SCRIPT, TASK_ARGV0]
    srun = ["srun", "--kill-on-bad-exit=1", "--nodes=$_vsp_nnodes"]
    if launcher == "srun":
        return [*srun, f"--ntasks-per-node={int(tasks_per_node)}", *task]
    torchrun = [
        "torchrun",
        "--nnodes=$_vsp_nnodes",
        f"--nproc-per-node={int(tasks_per_node)}",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT",
        "--rdzv-id=$VSP_RDZV_ID",
        "--max-restarts=0",
        "--no-python",
    ]
    return [*srun, "--ntasks-per-node=1", *task, *torchrun]


# Words of ``prefix`` that the shell expands at run time (double-quoted: one word each).
_EXPANDED = frozenset(
    {
        "--nodes=$_vsp_nnodes",
        "--nnodes=$_vsp_nnodes",
        "--rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT",
        "--rdzv-id=$VSP_RDZV_ID",
    }
)


def command_text(launcher: str, payload: Sequence[str], tasks_per_node: int) -> str:
    """The shell text that runs ``payload`` through ``launcher``.

    The launcher's run-time words expand (double-quoted, one word each); every payload word is
    ``shlex.quote``-d, so nothing in it expands or executes.
    """
    words = [
        f'"{w}"' if w in _EXPANDED else shlex.quote(w) for w in prefix(launcher, tasks_per_node)
    ]
    words.extend(shlex.quote(str(arg)) for arg in payload)
    return " ".join(words)
