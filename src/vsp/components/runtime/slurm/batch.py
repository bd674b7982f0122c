"""The bash batch script that runs a payload under Slurm and forwards preemption signals to it.

Why a wrapper: at preemption (or at the ``--signal``/``kill_warning`` time) Slurm signals the
*batch shell* (SIGCONT + SIGTERM, then SIGKILL after KillWait, measured with a real Slurm;
https://slurm.schedmd.com/slurm.conf.html#OPT_KillWait). A shell waiting for a
foreground child runs its traps only after the child exits, so the payload would never hear the
notice. The script therefore:

1. ``set -u``; traps the forwarded signals (default SIGTERM, SIGUSR1, SIGINT) with a handler that
   ``kill``s the payload with the same signal (or remembers it if the payload is not started yet);
   with a step launcher (``srun``, ``torchrun``) SIGTERM, SIGHUP, SIGQUIT and SIGINT are only
   noted, not passed to srun, which answers them by killing every task
   (``launcher.STEP_SIGNALS``): the
   tasks get them from their own job step;
2. starts the payload in the background in a subshell that resets SIGINT/SIGQUIT to their
   defaults (bash ignores them for background jobs when job control is off) and ``exec``s it;
3. ``wait``s in a loop: a trapped signal interrupts ``wait`` (status > 128), so it waits again
   until the payload really exited (POSIX ``wait PID`` returns a known child's saved status);
4. exits with the payload's exit code (128 + N when the payload died of signal N).

When Slurm signals the whole job (a cancel, ``DELETE ?signal=TERM``) the payload may die while
the trap runs, and bash 5.2 then loses its status: the second ``wait`` answers -1 (``exit -1``
is 255), which made the job end FAILED with exit code 255, read as the user's failure (measured
on Slurm 24.11.7, about one time in two). After an interrupted ``wait`` such an answer (-1, 255,
or 127 for a child bash no longer knows) stands for "killed by the forwarded signal", so the
script exits 128 + N for that signal N: a payload that really exits 255 or 127 just after a
forwarded signal is reported as signalled.

Before that it gives the job the account's ``USER``, ``LOGNAME``, ``HOME`` and ``SHELL`` (from
``id`` and ``getent passwd`` on the node) when the job's environment lacks them: a job submitted
through slurmrestd gets only the variables its request lists, while trainers and libraries
(caches under ``~``, ``getpass``) expect a login-like environment. Values the caller sets win.

The shell starts with ``-p``, so it ignores ``BASH_ENV``, ``ENV``, ``SHELLOPTS``, ``BASHOPTS``,
``CDPATH``, ``GLOBIGNORE`` and functions exported in its environment: a variable set on the
cluster cannot make it source a file or skip running the payload (``SHELLOPTS=noexec`` would end
the job COMPLETED 0 without training). The client also refuses those names in a job's
environment (``slurm.job_checks``).

With ``VSP_BEACON_DIR`` in the job's environment the script also keeps the job's progress
beacon (``training.beacon``) there: ``started``, ``running`` once the payload runs, ``notice`` when
a forwarded signal arrives, ``exiting`` with the payload's exit code, and a heartbeat copy every
``VSP_BEACON_HEARTBEAT`` seconds from a background loop that ends with the batch shell. The
folder, heartbeat, job id and restart count are read from the environment at run time and
checked by ``case`` patterns (a heartbeat or id with other characters falls back to a default);
none is pasted into the script. A failed beacon write never fails the job. At the start the
script checks that it can write the beacon (the first ``started`` write); when it cannot, it says
so on the job's stderr and, when ``VSP_BEACON_COMMENT`` (the comment the job was submitted with)
is set, keeps the same states in the job's comment instead: ``scontrol update JobId=ID
Comment="<that comment> vsp-beacon=STATE:RESTART:SINCE:RC"`` (``training.beacon.from_comment``),
with no heartbeat. When neither works it says that too, and the step polls Slurm only.

With ``VSP_PROGRESS_URL`` (a topic's ``:publish`` URL) and ``VSP_PROGRESS_RUN`` (the run's tag,
lowercase hex and dashes) it also publishes ``started``, ``notice`` and ``exiting`` to Pub/Sub
with curl (``training.progress_feed``), each message's attributes the beacon's fields and the
tag; ``notice`` in the background, so the payload hears its signal at once. For an ``https``
URL it takes a token from the node's metadata server and gives it to curl on standard input
(``-K -``), never in argv. Both values are checked by ``case`` patterns (other characters turn
publishing off); the ``started`` message is sent at once and checked, and when curl is missing
or the publish fails the script says so and publishes nothing more. Each run also reads the
beacon an earlier run of the job left (restart count and write time) before it writes its own,
and keeps them in its beacon and messages (``prev_restart``, ``prev_time``): a run lost without
notice wrote nothing after that time.

Every argument is quoted with ``shlex.quote``: quotes, ``$()``, backticks, newlines and unicode
reach the payload unchanged and execute nothing. Environment values never appear in the script
(they travel in the request's JSON ``environment`` list). NUL cannot be passed in argv and is
refused by the caller's validation.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from vsp.components.runtime.slurm import launcher as launchers

FORWARDED_SIGNALS = ("TERM", "USR1", "INT")
BEACON_DIR_ENV = "VSP_BEACON_DIR"  # training.beacon.DIR_ENV
BEACON_HEARTBEAT_ENV = "VSP_BEACON_HEARTBEAT"  # training.beacon.HEARTBEAT_ENV

# Not a format string: the beacon's shell code, inserted as is.
_BEACON = r"""# Progress beacon for the pipeline step: a JSON file on Cloud Storage, written
# on each state change and every VSP_BEACON_HEARTBEAT seconds; off without VSP_BEACON_DIR.
# When the folder cannot be written, the job says so and keeps the beacon in its comment.
_vsp_now() {  # epoch seconds to the millisecond (whole seconds where date has no %N)
  local t
  t=$(date +%s.%N)
  case "$t" in [0-9]*.[0-9][0-9][0-9]*) printf '%s' "${t%??????}" ;; *) date +%s ;; esac
}
_vsp_bdir=${VSP_BEACON_DIR:-}
case "$_vsp_bdir" in gs://*) _vsp_bdir="${VSP_GCS_FUSE_ROOT:-/gcs}/${_vsp_bdir#gs://}" ;; esac
_vsp_hb=${VSP_BEACON_HEARTBEAT:-15}
case "$_vsp_hb" in ''|.|*[!0-9.]*|*.*.*) _vsp_hb=15 ;; esac
_vsp_job=${SLURM_JOB_ID:-0}
case "$_vsp_job" in ''|*[!0-9]*) _vsp_job=0 ;; esac
_vsp_restart=${SLURM_RESTART_COUNT:-0}
case "$_vsp_restart" in ''|*[!0-9]*) _vsp_restart=0 ;; esac
_vsp_bcomment=${VSP_BEACON_COMMENT:-}
_vsp_bstate="${TMPDIR:-/tmp}/vsp-beacon-$_vsp_job-$$"
_vsp_channel=""
# An earlier run lost without notice (its beacon still says it runs): its restart count and
# last write, read before this run replaces them; the step dates that run's end by them.
_vsp_prev_restart=null
_vsp_prev_time=null
if [ -n "$_vsp_bdir" ]; then
  _vsp_prev=$(sed -n -e 's/.*"restart": \([0-9]*\), "state": "\([a-z]*\)",/\1 \2 /' \
    -e 's/ "since": [0-9.]*, "time": \([0-9.]*\),.*/\1/p' \
    -- "$_vsp_bdir/vsp-beacon-$_vsp_job.json" 2>/dev/null | head -n 1)
  case "$_vsp_prev" in
    [0-9]*' started '[0-9]*|[0-9]*' running '[0-9]*|[0-9]*' saving '[0-9]*)
      case "${_vsp_prev%% *}${_vsp_prev##* }" in
        *[!0-9.]*|*.*.*) ;;
        *)
          if [ "${_vsp_prev%% *}" -lt "$_vsp_restart" ]; then
            _vsp_prev_restart=${_vsp_prev%% *}
            _vsp_prev_time=${_vsp_prev##* }
          fi ;;
      esac ;;
  esac
fi
_vsp_write_beacon() {
  local st since rc tmp
  read -r st since rc < "$_vsp_bstate" || return 1
  tmp="$_vsp_bdir/.tmp-vsp-beacon-$_vsp_job-$BASHPID"
  mkdir -p -- "$_vsp_bdir" &&
    printf '{"job": "%s", "restart": %s, "state": "%s", "since": %s, "time": %s, "rc": %s, %s}\n' \
      "$_vsp_job" "$_vsp_restart" "$st" "$since" "$(_vsp_now)" "$rc" \
      "\"prev_restart\": $_vsp_prev_restart, \"prev_time\": $_vsp_prev_time" > "$tmp" &&
    mv -f -- "$tmp" "$_vsp_bdir/vsp-beacon-$_vsp_job.json"
} 2>/dev/null
_vsp_write_comment() {
  local st since rc
  read -r st since rc < "$_vsp_bstate" || return 1
  scontrol update "JobId=$_vsp_job" \
    "Comment=$_vsp_bcomment vsp-beacon=$st:$_vsp_restart:$since:$rc"
} >/dev/null 2>&1
_vsp_purl=${VSP_PROGRESS_URL:-}
case "$_vsp_purl" in http://*|https://*) ;; *) _vsp_purl="" ;; esac
case "$_vsp_purl" in *[!A-Za-z0-9:/._~%+-]*) _vsp_purl="" ;; esac
_vsp_prun=${VSP_PROGRESS_RUN:-}
case "$_vsp_prun" in ''|*[!a-z0-9-]*) _vsp_purl="" ;; esac
_vsp_metadata=http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default
_vsp_publish() {  # STATE SINCE RC: one Pub/Sub message; the token never reaches argv
  local auth="" tok="" a
  case "$_vsp_purl" in
    https://*)
      tok=$(curl -sf --max-time 5 -H 'Metadata-Flavor: Google' "$_vsp_metadata/token" |
        sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p')
      [ -n "$tok" ] || return 1
      auth="header = \"Authorization: Bearer $tok\"" ;;
  esac
  a="\"vsp_run\": \"$_vsp_prun\", \"job\": \"$_vsp_job\", \"restart\": \"$_vsp_restart\""
  a="$a, \"state\": \"$1\", \"since\": \"$2\", \"time\": \"$(_vsp_now)\", \"rc\": \"$3\""
  a="$a, \"prev_restart\": \"$_vsp_prev_restart\", \"prev_time\": \"$_vsp_prev_time\""
  printf '%s\n' "$auth" | curl -sf --max-time 5 -K - -X POST -H 'Content-Type: application/json' \
    -d "{\"messages\": [{\"attributes\": {$a}}]}" "$_vsp_purl"
} >/dev/null 2>&1
_vsp_beacon() {  # STATE [EXIT_CODE]
  local now
  now=$(_vsp_now)
  if [ -n "$_vsp_purl" ] && [ "$1" != running ]; then
    if [ "$1" = exiting ]; then
      _vsp_publish "$1" "$now" "${2:-null}" || true  # the job ends next: not in the background
    else
      ( _vsp_publish "$1" "$now" "${2:-null}" || true ) &
    fi
  fi
  [ -n "$_vsp_channel" ] || return 0
  printf '%s %s %s\n' "$1" "$now" "${2:-null}" > "$_vsp_bstate" 2>/dev/null || return 0
  if [ "$_vsp_channel" = file ]; then _vsp_write_beacon || true; else _vsp_write_comment || true; fi
}
if [ -n "$_vsp_purl" ]; then
  if ! command -v curl >/dev/null 2>&1; then
    echo "vsp: curl is not installed on this node: no progress messages; the step reads" \
      "the beacon instead" >&2
    _vsp_purl=""
  elif ! _vsp_publish started "$(_vsp_now)" null; then
    echo "vsp: cannot publish progress messages to ${_vsp_purl%:publish} (check that the" \
      "nodes' service account may publish to the topic): the step reads the beacon instead" >&2
    _vsp_purl=""
  fi
fi
if [ -n "$_vsp_bdir" ]; then
  if printf 'started %s null\n' "$(_vsp_now)" > "$_vsp_bstate" 2>/dev/null; then
    if _vsp_write_beacon; then
      _vsp_channel=file
    elif [ -n "$_vsp_bcomment" ] && _vsp_write_comment; then
      _vsp_channel=comment
      echo "vsp: cannot write the progress beacon in $_vsp_bdir: keeping it in the job's" \
        "comment instead" >&2
    else
      echo "vsp: cannot write the progress beacon in $_vsp_bdir nor the job's comment: the" \
        "step watches this job through Slurm only" >&2
    fi
  fi
fi
_vsp_hbpid=""
if [ "$_vsp_channel" = file ]; then
  ( while sleep "$_vsp_hb" && kill -0 "$$"; do _vsp_write_beacon || true; done ) \
    >/dev/null 2>&1 &
  _vsp_hbpid=$!
fi
"""
SCRIPT_ARGV0 = "vsp-payload"

_TEMPLATE = """\
#!/bin/bash -p
# Generated by vertex-slurm-pipelines{about}.
# The payload runs in the background so this shell can forward preemption signals to it;
# the job's exit code is the payload's.
set -u
# A REST submission carries only the environment it lists: take the account's USER, LOGNAME,
# HOME and SHELL from the user database when the job's environment lacks them.
# (bash sets SHELL itself without exporting it.)
if [ -z "${{USER:-}}" ]; then USER=$(id -un); fi
if [ -z "${{LOGNAME:-}}" ]; then LOGNAME=$USER; fi
_vsp_pw=$(getent passwd "$USER" 2>/dev/null || true)
if [ -z "${{HOME:-}}" ]; then HOME=$(printf '%s' "$_vsp_pw" | cut -d: -f6); fi
if [ -z "${{SHELL:-}}" ]; then SHELL=$(printf '%s' "$_vsp_pw" | cut -d: -f7); fi
HOME=${{HOME:-$PWD}}; SHELL=${{SHELL:-/bin/sh}}
export USER LOGNAME HOME SHELL
{workdir}{beacon}{launch}_vsp_child=""
_vsp_pending=""
_vsp_signalled=0
_vsp_noticed=0
_vsp_sent=""
_vsp_notice() {{
  _vsp_signalled=1
  _vsp_noticed=1
  _vsp_sent="$1"
  _vsp_beacon notice
}}
_vsp_step_signal() {{
  _vsp_notice "$1"
  echo "vsp: SIG$1: the tasks get it from their own job step; not passed to the step" \
    "launcher, which would answer it by killing them" >&2
}}
_vsp_forward() {{
  _vsp_notice "$1"
  if [ -n "$_vsp_child" ]; then
    echo "vsp: forwarding SIG$1 to payload pid $_vsp_child" >&2
    kill -s "$1" "$_vsp_child" 2>/dev/null || true
  else
    _vsp_pending="$1"
  fi
}}
{traps}
{prelude}( trap - INT QUIT; exec -- {payload} ) &
_vsp_child=$!
_vsp_beacon running
if [ -n "$_vsp_pending" ]; then
  kill -s "$_vsp_pending" "$_vsp_child" 2>/dev/null || true
fi
_vsp_rc=0
_vsp_interrupted=0
while :; do
  _vsp_signalled=0
  wait "$_vsp_child"
  _vsp_rc=$?
  if [ "$_vsp_signalled" = 0 ]; then
    break
  fi
  _vsp_interrupted=1
done
if [ "$_vsp_interrupted" = 1 ] && [ -n "$_vsp_sent" ]; then
  case "$_vsp_rc" in
    -1|127|255) _vsp_rc=$((128 + $(kill -l "$_vsp_sent"))) ;;
  esac
fi
{unnoticed}{after}if [ -n "$_vsp_hbpid" ]; then
  kill "$_vsp_hbpid" 2>/dev/null || true
  wait "$_vsp_hbpid" 2>/dev/null || true
fi
_vsp_beacon exiting "$_vsp_rc"
rm -f -- "$_vsp_bstate" 2>/dev/null || true
exit "$_vsp_rc"
"""


# A one-node job's payload that exits 143 with no notice received: a failure, said in the log.
_UNNOTICED_143 = """\
if [ "$_vsp_rc" = 143 ] && [ "$_vsp_noticed" = 0 ] && [ "${SLURM_JOB_NUM_NODES:-1}" = 1 ]; then
  echo "vsp: the payload exited 143, the exit code of a save on a notice, but no notice" \
    "(SIGTERM or SIGUSR1) reached this job: it ends as a failure (exit 1), not a preemption" >&2
  _vsp_rc=1
fi
"""


def _signal_word(name: str) -> str:
    word = name.strip().upper().removeprefix("SIG")
    if not word.isalnum():
        raise ValueError(f"not a signal name: {name!r}")
    return word


def render(
    command: Sequence[str] | None = None,
    *,
    script: str | None = None,
    forward: Sequence[str] = FORWARDED_SIGNALS,
    run_key: str = "",
    working_directory: str = "",
    prelude: str = "",
    launcher: str = "none",
    tasks_per_node: int = 1,
    nccl_env_file: str = "",
    srun_step: bool = False,
    exit_143_needs_notice: bool = True,
) -> str:
    """The batch script text for an argv ``command`` or a bash ``script`` (exactly one).

    Args:
        command: The payload's argv, e.g. ``["python", "-m", "train", "--steps", "9"]``.
        script: Bash script text instead of an argv; run as ``/bin/bash -c SCRIPT vsp-payload``.
        forward: Signal names forwarded to the payload (``TERM``, ``SIGUSR1``...).
        run_key: Shown in a comment line only (must be free of newlines).
        working_directory: The job's working directory, created and entered first ('' = stay
            where Slurm started the script).
        prelude: Bash run in the batch shell after the signal traps and before the payload
            starts (code staging, checks of the node); it may ``exit`` to end the job. Built
            by the caller from quoted values only.
        launcher: ``none`` (the payload once, on the batch host), ``srun`` or ``torchrun``
            (on every node; see ``slurm.launcher``).
        tasks_per_node: Tasks (``srun``) or worker processes (``torchrun``) per node.
        nccl_env_file: NCCL settings file each task sources when it exists on its node
            ('' = none).
        srun_step: The payload runs as an ``srun`` step (a launcher other than ``none``, or a
            container run): srun is then not sent ``launcher.STEP_SIGNALS``.
        exit_143_needs_notice: A one-node job whose payload exits 143 (``EXIT_PREEMPTED``, "saved
            on a notice") though no notice reached the batch shell ends with exit 1, a
            failure: a trainer that exits 143 by itself was otherwise requeued as preempted
            until the preemption budget ran out, moved to on-demand nodes on the way. False
            where the warning signal reaches only the steps (slurmrestd before v0.0.39);
            several nodes are left alone (a node's own shutdown may signal its tasks alone).

    Returns:
        The script, starting with ``#!/bin/bash``.

    Raises:
        ValueError: Neither or both of ``command`` and ``script``; an empty argv; a NUL
            character; a bad signal name. (``JobDescription`` validates before calling this.)
    """
    if (command is None) == (script is None):
        raise ValueError("pass exactly one of command and script")
    argv = list(command) if command is not None else ["/bin/bash", "-c", script, SCRIPT_ARGV0]
    if not argv or not argv[0]:
        raise ValueError("the command is empty")
    if any("\0" in str(arg) for arg in argv):
        raise ValueError("arguments cannot contain NUL characters")
    if "\n" in run_key or "\r" in run_key:
        raise ValueError("run_key cannot contain newlines")
    words = list(dict.fromkeys(_signal_word(s) for s in forward))
    kept = launchers.STEP_SIGNALS if srun_step else frozenset()
    traps = "\n".join(
        f"trap '{'_vsp_step_signal' if w in kept else '_vsp_forward'} {w}' {w}" for w in words
    )
    workdir = ""
    if working_directory:
        quoted = shlex.quote(working_directory)
        workdir = (
            "# Slurm 24.11 starts a job whose working directory is missing in /tmp: make it.\n"
            f'mkdir -p -- {quoted} && cd -- {quoted} || {{ echo "vsp: cannot enter the working '
            f'directory" >&2; exit 2; }}\n'
        )
    return _TEMPLATE.format(
        workdir=workdir,
        beacon=_BEACON,
        about=f" for run {run_key}" if run_key else "",
        traps=traps,
        prelude=prelude if not prelude or prelude.endswith("\n") else prelude + "\n",
        launch=launchers.preamble(launcher, tasks_per_node, nccl_env_file),
        after=launchers.AFTER if launcher != "none" else "",
        unnoticed=_UNNOTICED_143 if exit_143_needs_notice else "",
        payload=launchers.command_text(launcher, argv, tasks_per_node),
    )
