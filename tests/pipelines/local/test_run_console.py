"""`vsp run-local`'s console: a line per task state change, the progress of waits, the root
cause of a failure; everything else only in the log file."""

from __future__ import annotations

import io

from click.testing import CliRunner

from vsp.pipelines.cli import main
from vsp.pipelines.local import results, run, step_console

# Lines as kfp.local 2.17 and the runtime's step logging write them (ANSI colours included).
STREAM = """\
21:21:38.992 - INFO - Executing task \x1b[96m'create-cluster'\x1b[0m
21:21:38.992 - INFO - Streamed logs:
    Collecting kfp==2.17.0
    [KFP Executor 2026-12-03 21:22:00,725 INFO]: Got executor_input:
    {
        "inputs": {"parameterValues": {"cluster_id": "vsplocal"}}
    }
    2026-12-03 21:22:01,050 INFO vsp.components.runtime.cluster.ops: creating cluster c
    2026-12-03 21:22:01,065 INFO vsp.progress: create of cluster vsplocal: provisioning (0 s; \
next check in 2 s, gives up in 2 h 00 min)
    2026-12-03 21:22:06,289 INFO vsp.progress: create of cluster vsplocal: done (5 s)
    [KFP Executor 2026-12-03 21:22:06,304 INFO]: Wrote executor output file to /x.json.
21:22:08.053 - INFO - Task \x1b[96m'create-cluster'\x1b[0m finished with status \
\x1b[92mSUCCESS\x1b[0m
21:22:08.054 - INFO - Task \x1b[96m'create-cluster'\x1b[0m outputs:
    action: 'created'
--------------------------------------------------------------------------------
21:22:08.055 - INFO - Executing task \x1b[96m'train-on-cluster'\x1b[0m
    2026-12-03 21:22:42,028 INFO vsp.progress: job 1: RUNNING (0 s; next check in 1 s)
    2026-12-03 21:22:43,452 INFO vsp.components.runtime.training.supervisor: [job 1] step 10/100
    2026-12-03 21:22:45,981 WARNING vsp.components.runtime.training.supervisor: job 1 was \
preempted and requeued (1 time(s) so far)
    2026-12-03 21:22:46,000 ERROR vsp.step: train_on_cluster failed (exit 2): spec is invalid:
      - steps = -1: must be positive. Fix: pass steps >= 1.
      - seed = 'x': not a whole number. Fix: pass a number.

21:22:47.000 - INFO - Task \x1b[96m'train-on-cluster'\x1b[0m finished with status \
\x1b[91mFAILURE\x1b[0m
21:22:47 INFO root: Task train-on-cluster failed (attempt 1/2). Retrying in 0.0s...
21:22:47 INFO root: Skipping task register-model: upstream task(s) ['train-on-cluster'] failed.
21:22:48 INFO root: Task check-run-parameters cache hit (key=0123456789ab); skipping execution.
"""


class Ticks:
    """A clock that advances one second per reading."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _console(live=False):
    out, log = io.StringIO(), io.StringIO()
    return step_console.StepConsole(out, log, live=live, clock=Ticks()), out, log


def test_only_state_changes_progress_and_problems_reach_the_terminal():
    console, out, log = _console()
    with console:
        console.write(STREAM)
    assert out.getvalue().splitlines() == [
        "create-cluster: started",
        "  create-cluster: create of cluster vsplocal: provisioning (0 s; next check in 2 s, "
        "gives up in 2 h 00 min)",
        "  create-cluster: create of cluster vsplocal: done (5 s)",
        "create-cluster: succeeded in 1 s",
        "train-on-cluster: started",
        "  train-on-cluster: job 1: RUNNING (0 s; next check in 1 s)",
        "  train-on-cluster: warning: job 1 was preempted and requeued (1 time(s) so far)",
        "  train-on-cluster: error: train_on_cluster failed (exit 2): spec is invalid:",
        "train-on-cluster: FAILED after 1 s",
        "train-on-cluster: retrying (attempt 1 of 2 failed)",
        "register-model: skipped (['train-on-cluster'] failed)",
        "check-run-parameters: taken from the cache",
    ]
    assert console.shown == out.getvalue().splitlines()
    # The log file holds every line as written (executor JSON and trainer lines included).
    assert log.getvalue() == STREAM
    assert console.failure == step_console.Failure(
        "train-on-cluster",
        "spec is invalid:\n- steps = -1: must be positive. Fix: pass steps >= 1.\n"
        "- seed = 'x': not a whole number. Fix: pass a number.",
        2,
    )


def test_a_retry_that_succeeds_clears_the_failure():
    console, out, _ = _console()
    with console:
        console.write(STREAM)
        console.write(
            "21:23:00.000 - INFO - Executing task 'train-on-cluster'\n"
            "21:23:09.000 - INFO - Task 'train-on-cluster' finished with status SUCCESS\n"
        )
    assert console.failure is None
    assert out.getvalue().splitlines()[-1] == "train-on-cluster: succeeded in 1 s"


CANCELLED_RETRIES = """\
03:43:32.540 - INFO - Executing task 'create-cluster'
    2026-12-07 03:43:32,540 ERROR vsp.step: create_cluster failed (exit 143): cancelled
03:43:32.541 - ERROR - Task 'create-cluster' finished with status FAILURE
2026-12-07 03:43:32,542 INFO root: Task create-cluster failed (attempt 1/3). Retrying in 1.0s...
03:43:33.544 - INFO - Executing task 'create-cluster'
03:43:33.544 - INFO - Streamed logs:

    not started: create_cluster (the run was cancelled)
03:43:33.544 - ERROR - Task 'create-cluster' finished with status FAILURE
2026-12-07 03:43:33,544 INFO root: Task create-cluster failed (attempt 2/3). Retrying in 3.0s...
03:43:36.547 - INFO - Executing task 'create-cluster'
03:43:36.547 - INFO - Streamed logs:
    not started: create_cluster (the run was cancelled)
03:43:36.547 - ERROR - Task 'create-cluster' finished with status FAILURE
2026-12-07 03:43:36,548 INFO root: Task register-model failed (attempt 1/3). Retrying in 1.0s...
03:43:37.550 - INFO - Executing task 'register-model'
    2026-12-07 03:43:37,551 INFO vsp.progress: upload of model m: running (0 s)
"""


def test_a_cancelled_runs_retries_that_are_not_started_are_said_once():
    # They showed as "retrying", "started" and "FAILED after 0 s" twice after the cancel.
    console, out, _ = _console()
    first, rest = CANCELLED_RETRIES.split("2026-12-07 03:43:32,542", 1)
    with console:
        console.write(first)
        console.cancelled = lambda: True  # the run's signal
        console.write("2026-12-07 03:43:32,542" + rest)
    assert out.getvalue().splitlines() == [
        "create-cluster: started",
        "  create-cluster: error: create_cluster failed (exit 143): cancelled",
        "create-cluster: FAILED after 1 s",
        "create-cluster: not started again (the run was cancelled)",
        # A retry that runs is shown once it does.
        "register-model: retrying (attempt 1 of 3 failed)",
        "register-model: started",
        "  register-model: upload of model m: running (0 s)",
    ]
    assert console.failure == step_console.Failure("create-cluster", "cancelled", 143)


def test_an_internal_error_keeps_its_message_not_its_traceback():
    console, _, _ = _console()
    with console:
        console.write(
            "Executing task 'register-model'\n"
            "2026-12-03 21:22:46,000 ERROR vsp.step: register_model failed (exit 70) with an "
            "internal error: KeyError: 'name'\n"
            "Traceback (most recent call last):\n"
            '  File "x.py", line 1, in <module>\n'
            "Task 'register-model' finished with status FAILURE\n"
        )
    assert console.failure == step_console.Failure("register-model", "KeyError: 'name'", 70)


def test_a_failed_jobs_log_tail_is_kept_whole_with_the_trainers_traceback():
    console, _, _ = _console()
    with console:
        console.write(
            "Executing task 'train-on-cluster'\n"
            "2026-12-05 16:00:00,000 ERROR vsp.step: train_on_cluster failed (exit 2): training "
            "failed: attempt 1 failed\n"
            "last lines of the job's log:\n"
            "slurmstepd: error: couldn't chdir to `/w': No such file or directory\n"
            "Traceback (most recent call last):\n"
            '  File "/w/train.py", line 3, in <module>\n'
            "    import numpy\n"
            "ModuleNotFoundError: No module named 'numpy'\n"
            "[KFP Executor 2026-12-05 16:00:01,000 INFO]: exiting\n"
            "Traceback (most recent call last):\n"
            "Task 'train-on-cluster' finished with status FAILURE\n"
        )
    assert console.failure == step_console.Failure(
        "train-on-cluster",
        "training failed: attempt 1 failed\nlast lines of the job's log:\n"
        "slurmstepd: error: couldn't chdir to `/w': No such file or directory\n"
        "Traceback (most recent call last):\n"
        '  File "/w/train.py", line 3, in <module>\n'  # indented as Python printed it
        "    import numpy\n"
        "ModuleNotFoundError: No module named 'numpy'",
        2,
    )


def test_on_a_terminal_the_progress_line_is_redrawn_in_place_with_the_time_waited():
    console, out, _ = _console(live=True)
    console.write("Executing task 'create-cluster'\n")  # clock 1
    console.write("2026-12-03 21:22:01,065 INFO vsp.progress: create of cluster c: provisioning\n")
    console.redraw()  # the clock ticks a second per reading
    console.write("Task 'create-cluster' finished with status SUCCESS\n")
    text = out.getvalue()
    assert text.startswith("create-cluster: started\n")
    line = "  create-cluster: create of cluster c: provisioning"
    assert f"\r\x1b[K{line} [1 s]" in text  # drawn when it appears
    assert f"\r\x1b[K{line} [2 s]" in text  # redrawn with the time since
    assert f"\r\x1b[K{line} [4 s]\ncreate-cluster: succeeded in 4 s\n" in text  # ended first
    assert console.shown[1] == line


def test_long_progress_lines_are_cut_to_one_terminal_line():
    console, out, _ = _console()
    console.write("2026-12-03 21:22:01,065 INFO vsp.progress: " + "y" * 400 + "\n")
    shown = out.getvalue().rstrip("\n")
    assert len(shown) == 160 and shown.endswith("...")


def test_run_local_shows_the_console_by_default_and_the_full_stream_with_v(monkeypatch, tmp_path):
    seen = []

    def fake_run(pipeline, arguments, **options):
        seen.append(options["console"])
        return results.LocalRunResult(pipeline, True, 1.0, {}, [], None, mode="in-process")

    monkeypatch.setattr(run, "run_local", fake_run)
    common = ["run-local", "cluster-lifecycle", "--in-process", "--outputs", str(tmp_path)]
    quiet = CliRunner().invoke(main.main, common)
    loud = CliRunner().invoke(main.main, [*common, "-v"])
    louder = CliRunner().invoke(main.main, ["-v", *common])
    assert [quiet.exit_code, loud.exit_code, louder.exit_code] == [0, 0, 0], quiet.output
    assert isinstance(seen[0], step_console.StepConsole) and seen[1:] == [None, None]
    assert "full log: " in quiet.output and "full log: " not in loud.output
    assert "parameters: {" in loud.output and "parameters: {" not in quiet.output


def test_a_long_warning_is_wrapped_whole_not_cut():
    # A warning names a long path first and what to do last: the fix must reach the terminal.
    path = "/tmp/x/.vsp/emulator/gcs/local-bucket/slurm-spot-training/run-1/ckpt/" + "v" * 40
    fix = "Fix: save with checkpoint.save(..., reason=...) into $VSP_CHECKPOINT_DIR."
    message = (
        f"unknown: the checkpoint directory {path} does not exist: the trainer saved no "
        f"checkpoint there. {fix}"
    )
    logger = "WARNING vsp.components.runtime.training.driver"
    console, out, _ = _console()
    with console:
        console.write(
            "21:22:08.055 - INFO - Executing task 'train-on-cluster'\n"
            f"    2026-12-03 21:22:45,981 {logger}: {message}\n"
        )
    first, *rest = out.getvalue().splitlines()[1:]
    assert first.startswith("  train-on-cluster: warning: unknown: the checkpoint directory")
    assert rest and all(line.startswith("    ") for line in rest)
    assert all(len(line) <= 160 for line in [first, *rest])
    assert " ".join(part.strip() for part in [first, *rest]).endswith(fix)
