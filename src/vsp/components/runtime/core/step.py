"""What every component step does around its work: logging, exit codes, output files.

``run_step`` configures logging once, runs the step's function and turns errors into the exit
codes of the taxonomy (user 2, transient 75, internal 70), logging the message without a stack
trace for user errors so the cause is the last thing a user reads.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from vsp.components.runtime.core import errors

T = TypeVar("T")
log = logging.getLogger("vsp.step")

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


def run_step(name: str, func: Callable[[], T]) -> T:
    """Runs a step body; exits with the taxonomy's code on failure.

    Args:
        name: Step name for the log.
        func: The body, without arguments.
    """
    configure_logging()
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
