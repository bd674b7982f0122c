"""What every component step does around its work: logging, exit codes, output files.

``run_step`` configures logging once, runs the step's function and turns errors into the exit
codes of the taxonomy (user 2, transient 75, internal 70), logging the message without a stack
trace for user errors so the cause is the last thing a user reads.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import json
import logging
import math
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, TypeVar

from vsp.components.runtime.core import errors, param_rules

T = TypeVar("T")
log = logging.getLogger("vsp.step")

# Parameters an ``options`` group may not set: the step's outputs and the run's identity.
NOT_OPTIONS = frozenset(
    {"gcp_resources", "metrics", "report", "model", "status", "pipeline_run", "task_id"}
)


def option_names(parameters: Collection[str]) -> list[str]:
    """The names an ``options`` group of a component with ``parameters`` may hold, sorted."""
    return sorted(set(parameters) - NOT_OPTIONS - {"options"})


def like(value: Any, current: Any) -> Any:
    """``value`` as the type of the parameter it replaces, where JSON blurred it.

    An option group travels as JSON (a protobuf Struct in the pipeline), whose numbers are all
    floats: a whole float given for an integer parameter becomes an int. Anything else is kept
    as given, for the step's own checks to judge.
    """
    whole = isinstance(value, float) and value.is_integer()
    if isinstance(current, int) and not isinstance(current, bool) and whole:
        return int(value)
    return value


def apply_options(params: Mapping[str, Any], field: str = "options") -> dict[str, Any]:
    """A step's parameters with its ``options`` group applied over the named ones.

    A pipeline that shows a short form passes rarely set parameters of a component as one
    dict parameter (``training_options`` ...) to the component's ``options``: a value there
    wins over the parameter of that name.

    Args:
        params: The component's parameters, ``options`` among them.
        field: The group's name in messages (the pipeline parameter it came from).

    Returns:
        The parameters without ``options``, its values applied.

    Raises:
        errors.SpecValidationError: ``options`` is not a dict, or names a parameter the
            component does not have (or one it may not take from there).
    """
    merged = dict(params)
    options = merged.pop("options", None) or {}
    if not isinstance(options, Mapping):
        raise errors.SpecValidationError(
            field,
            [errors.SpecProblem(field, options, "is not a dict.", 'give {"NAME": VALUE, ...}.')],
        )
    allowed = option_names(merged)
    problems = [
        errors.SpecProblem(
            f"{field}.{name}",
            options[name],
            "is not a parameter of this step.",
            did_you_mean(name, allowed) + f"use one of {', '.join(allowed)}.",
        )
        for name in sorted(set(options) - set(allowed))
    ]
    if problems:
        raise errors.SpecValidationError(field, problems)
    return {**merged, **{name: like(value, merged[name]) for name, value in options.items()}}


def did_you_mean(name: str, allowed: list[str]) -> str:
    """``"did you mean 'x'? Else "`` for a close name of ``allowed``, else ''."""
    close = difflib.get_close_matches(str(name), allowed, n=1, cutoff=0.75)
    return f"did you mean {close[0]!r}? Else " if close else ""


def accepts_options(entry: Callable[..., T]) -> Callable[..., T]:
    """Makes a step's ``main`` take an ``options`` group too (see ``apply_options``).

    The merged parameters then meet the component's rules in ``param_rules.RULES``, the
    same rules the pipeline's first step applied.
    """

    name = entry.__module__.rsplit(".", 1)[-1]

    def merged(params: Mapping[str, Any]) -> dict[str, Any]:
        values = apply_options(params)
        param_rules.check(name, values)
        return values

    @functools.wraps(entry)
    def main(**params: Any) -> T:
        return entry(**run_step(name, lambda: merged(params)))

    return main


FINAL_STATES = ("SUCCEEDED", "FAILED", "CANCELLED")


def configure_logging() -> None:
    """Sends INFO logs of the runtime to stderr with timestamps (once per process)."""
    root = logging.getLogger("vsp")
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False


# Set by ``vsp run-local`` for the steps it starts: its pid. A step whose local run is gone
# (killed with SIGKILL) stops as a cancelled step does, instead of polling an emulator that
# went with it (once for 28 minutes, its trainer and Slurm job orphaned).
LOCAL_RUN_PID_ENV = "VSP_LOCAL_RUN_PID"
LOCAL_RUN_LOOK_SECONDS = 2.0
_watching = False  # one watch per process, however many run_step calls


def watch_local_run() -> None:
    """With ``VSP_LOCAL_RUN_PID`` set, sends this process SIGTERM once that process is gone
    (a daemon thread looking every ``LOCAL_RUN_LOOK_SECONDS``); otherwise does nothing."""
    global _watching
    text = os.environ.get(LOCAL_RUN_PID_ENV, "")
    if _watching or not text.isdigit() or int(text) == os.getpid():
        return
    _watching, pid = True, int(text)

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False  # alive, another user's
        try:  # a killed process its parent has not reaped yet is a zombie: gone too
            with open(f"/proc/{pid}/stat") as handle:
                return handle.read().rpartition(")")[2].split()[:1] == ["Z"]
        except OSError:
            return False

    def watch() -> None:
        while not gone():
            time.sleep(LOCAL_RUN_LOOK_SECONDS)
        log.warning("the local run that started this step (pid %d) is gone: stopping", pid)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="vsp-local-run-watch", daemon=True).start()


def run_step(name: str, func: Callable[[], T]) -> T:
    """Runs a step body; exits with the taxonomy's code on failure.

    Args:
        name: Step name for the log.
        func: The body, without arguments.
    """
    configure_logging()
    watch_local_run()
    try:
        return func()
    except errors.StepCancelled as exc:
        log.warning("%s cancelled: %s", name, exc)
        raise SystemExit(errors.EXIT_CANCELLED) from exc
    except (errors.UserError, errors.TransientError) as exc:
        # Both messages say what happened and what to do; a traceback would bury them.
        log.error("%s failed (exit %d): %s", name, exc.exit_code, exc)
        raise SystemExit(exc.exit_code) from exc
    except errors.VspError as exc:
        log.error("%s failed (exit %d): %s", name, exc.exit_code, exc, exc_info=True)
        raise SystemExit(exc.exit_code) from exc
    except Exception as exc:
        log.exception(
            "%s failed (exit %d) with an internal error: %s", name, errors.EXIT_INTERNAL_ERROR, exc
        )
        raise SystemExit(errors.EXIT_INTERNAL_ERROR) from exc


def write_file(path: str, text: str) -> None:
    """Writes an output file of a step (its folders created)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with open(path, "w") as handle:
        handle.write(text)


def publish_metrics(artifact: Any, values: Mapping[str, Any]) -> dict[str, float]:
    """Logs ``values`` on a KFP ``Metrics`` artifact and writes them into its file as JSON.

    A value that is not a finite number (a break-even time without a price is infinite) is left
    out and named in the step's log: the executor's output is protobuf JSON, which has no
    Infinity or NaN, so logging one failed the task after its work was done (on kfp.local the
    whole run stopped before its exit task).

    Returns:
        The metrics published.
    """
    published, left_out = {}, []
    for name, value in values.items():
        number = float(value)
        if math.isfinite(number):
            published[name] = number
        else:
            left_out.append(f"{name} ({number})")
    if left_out:
        log.warning("metrics left out (not finite numbers): %s", ", ".join(left_out))
    for name, number in published.items():
        artifact.log_metric(name, number)
    write_file(artifact.path, json.dumps(published, indent=2, sort_keys=True))
    return published


def normalize_final_state(state: str) -> str:
    """The final state as ``SUCCEEDED``, ``FAILED`` or ``CANCELLED``.

    Tolerates the enum spellings of the Pipelines API (``PIPELINE_STATE_FAILED``,
    ``TASK_STATE_CANCELLED``) and any case. Anything else, empty included, is read as
    ``FAILED``, so an exit task then takes its failure path (clean up) rather than
    assuming the run succeeded.
    """
    text = (state or "").strip().upper()
    for prefix in ("PIPELINE_STATE_", "TASK_STATE_", "STATE_"):
        text = text.removeprefix(prefix)
    if text not in FINAL_STATES:
        log.warning("final state %r is not one of %s; taking the failure path", state, FINAL_STATES)
        return "FAILED"
    return text


@contextlib.contextmanager
def cancel_on_sigterm() -> Iterator[None]:
    """Turns SIGTERM into ``StepCancelled`` while the block runs (main thread only)."""

    def handler(signum, frame):
        raise errors.StepCancelled(f"received signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: nothing to install
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
