"""What ``vsp run-local`` prints: one line per step state change and the progress of waits.

kfp.local streams everything to stdout: its own task banners, each step's pip output, the
executor's input and output JSON and the runtime's log. ``StepConsole`` stands in for stdout
while a pipeline runs (``contextlib.redirect_stdout``; kfp.local prints with ``print`` and a
logging handler it binds to ``sys.stdout`` per task, so both follow). Every line goes to a log
file; the terminal gets only:

* a line when a task starts, succeeds, fails or is taken from the cache;
* the runtime's progress lines (logger ``vsp.progress``: what is awaited, for how long, what
  comes next), the same lines a long-running step writes to its log on Vertex AI; on a
  terminal the newest one is redrawn in place every second with the time since it appeared;
* the runtime's warnings and errors (a preemption, a retried request), wrapped to at most
  four lines, so the fix a long one ends with is shown.

A failed task's last error line is kept as the run's root cause (``failure``).
Hand-rolled: kfp.local has no quiet mode or hook for its output; filtering its stream is the
one way that does not patch kfp.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import re
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import TextIO

from vsp.components.runtime.core import polling
from vsp.components.runtime.training import supervisor

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TASK_START = re.compile(r"Executing task '(?P<task>[^']+)'")
_TASK_END = re.compile(r"Task '(?P<task>[^']+)' finished with status (?P<status>[A-Z]+)")
_CACHED = re.compile(r"Task (?P<task>\S+) cache hit")
_RETRY = re.compile(r"Task (?P<task>\S+) failed \(attempt (?P<n>\d+)/(?P<of>\d+)\)\. Retrying")
# A task the cancelled run does not start again (``interrupts.forwarded``), printed in its place.
_NOT_STARTED = re.compile(r"^not started: (?P<step>\w+) \(the run was cancelled\)$")
_SKIPPED = re.compile(r"Skipping task (?P<task>\S+): upstream task\(s\) (?P<why>.*) failed")
_RUNTIME = re.compile(
    r"^\d{4}-\d\d-\d\d [\d:,.]+ (?P<level>[A-Z]+) (?P<logger>vsp[\w.]*): (?P<message>.*)$"
)
_EXIT_CODE = re.compile(r"\S+ failed \(exit (\d+)\)(?: with an internal error)?: ")
_WIDTH = 160
_MAX_WARNING_LINES = 4  # a runtime warning or error, wrapped
_MAX_ERROR_LINES = 20
_NOT_A_MESSAGE = ("Traceback", "[KFP Executor", "File ", "{", "}")
# After the heading of a job's log tail, every line is the job's (its traceback included), up to
# the tail's length: the tail's last lines name the cause.
_MAX_TAIL_LINES = 40


@dataclasses.dataclass(frozen=True)
class Failure:
    """Why a run failed, as the console saw it.

    Attributes:
        task: The failed task.
        error: Its last error line (the runtime states the fix in it), or '' if none was seen.
        exit_code: The step's exit code when its error line gave one (2 user error, 75
            transient, 70 internal), else None.
    """

    task: str
    error: str
    exit_code: int | None = None


class StepConsole(io.TextIOBase):
    """A stdout stand-in that writes every line to ``log`` and the essentials to ``out``.

    Args:
        out: The terminal (or any text stream) for the short view.
        log: Text stream receiving every line as written.
        live: Redraw the progress line in place (default: whether ``out`` is a terminal).
        clock: Monotonic seconds (tests inject one).
    """

    def __init__(self, out: TextIO, log: TextIO, live: bool | None = None, clock=time.monotonic):
        super().__init__()
        self.out, self.log, self.clock = out, log, clock
        self.live = out.isatty() if live is None else live
        self.shown: list[str] = []
        self.durations: dict[str, float] = {}  # seconds of each task that ended, by task
        self._buffer = ""
        self._task = ""
        self._started: dict[str, float] = {}
        self._errors: dict[str, str] = {}
        self._failed: dict[str, Failure] = {}
        self._continues = False
        self._quoting = False  # inside a job's log tail (``supervisor.LOG_TAIL_HEADING``)
        self._tail_lines = 0
        self._progress: tuple[str, float] | None = None
        # Once the run is cancelled (``cancelled``, set by the run), a task's start and retry
        # lines are held until the attempt shows it runs: a step that creates or trains is not
        # started then (_NOT_STARTED), which is said once for the task instead.
        self.cancelled: Callable[[], bool] = lambda: False
        self._held: list[str] = []
        self._refused: set[str] = set()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._buffer += text
            *lines, self._buffer = self._buffer.split("\n")
            for line in lines:
                self._line(line)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self.log.flush()
            self.out.flush()

    def __enter__(self) -> StepConsole:
        if self.live:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
        with self._lock:
            if self._buffer:
                self._line(self._buffer)
                self._buffer = ""
            self._end_progress()
            self.flush()

    def redraw(self) -> None:
        """Redraws the live progress line with the time since it appeared."""
        with self._lock:
            if self.live and self._progress is not None:
                text, since = self._progress
                waited = polling.duration(self.clock() - since)
                self.out.write(f"\r\x1b[K{_cut(f'{text} [{waited}]')}")
                self.out.flush()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            self.redraw()

    def _line(self, raw: str) -> None:
        self.log.write(raw + "\n")
        line = _ANSI.sub("", raw).strip()
        continues, self._continues = self._continues, False
        quoting, self._quoting = self._quoting, False
        if self._held and not self._holds(line):
            for text in self._held:
                self._show(text)
            self._held = []
        if match := _TASK_START.search(line):
            self._task = match["task"]
            self._started[self._task] = self.clock()
            (self._held.append if self.cancelled() else self._show)(f"{self._task}: started")
        elif _NOT_STARTED.match(line):
            self._held = []
            if self._task not in self._refused:
                self._refused.add(self._task)
                self._show(f"{self._task}: not started again (the run was cancelled)")
        elif match := _TASK_END.search(line):
            self._task_ended(match["task"], match["status"])
        elif match := _CACHED.search(line):
            self._show(f"{match['task']}: taken from the cache")
        elif match := _RETRY.search(line):
            text = f"{match['task']}: retrying (attempt {match['n']} of {match['of']} failed)"
            (self._held.append if self.cancelled() else self._show)(text)
        elif match := _SKIPPED.search(line):
            self._show(f"{match['task']}: skipped ({match['why']} failed)")
        elif match := _RUNTIME.match(line):
            self._runtime(match["level"], match["logger"], match["message"])
        elif continues and quoting and line and not line.startswith("[KFP Executor"):
            # A line of the job's log tail, quoted whole (a trainer's "Traceback" included),
            # with its indentation.
            self._errors[self._task] += "\n" + _ANSI.sub("", raw).rstrip()
            self._continues = self._quoting = self._tail_lines < _MAX_TAIL_LINES
            self._tail_lines += 1
        elif continues and line and not line.startswith(_NOT_A_MESSAGE):
            # The next line of a multi-line error message (e.g. each problem of a spec).
            self._errors[self._task] += "\n" + line
            self._continues = self._errors[self._task].count("\n") < _MAX_ERROR_LINES
            if line == supervisor.LOG_TAIL_HEADING:
                self._continues = self._quoting = True
                self._tail_lines = 0

    def _holds(self, line: str) -> bool:
        """Whether ``line`` leaves a held start undecided: kfp.local's lines between a task's
        start and its step's first output."""
        held = _TASK_START.search(line) or _NOT_STARTED.match(line)
        return not line or line.endswith("Streamed logs:") or bool(held)

    def _task_ended(self, task: str, status: str) -> None:
        if status != "SUCCESS" and task in self._refused:
            return  # an attempt not started: the failure before it stands
        now = self.clock()
        self.durations[task] = now - self._started.get(task, now)
        took = polling.duration(self.durations[task])
        if status == "SUCCESS":
            self._failed.pop(task, None)  # a retry succeeded
            self._show(f"{task}: succeeded in {took}")
            return
        self._show(f"{task}: FAILED after {took}")
        error = self._errors.pop(task, "")
        code = _EXIT_CODE.match(error)
        if code:
            error = error[code.end() :]
        self._failed[task] = Failure(task, error, int(code[1]) if code else None)

    @property
    def failure(self) -> Failure | None:
        """The first task that failed for good (None when every task succeeded)."""
        return next(iter(self._failed.values()), None)

    def _runtime(self, level: str, logger: str, message: str) -> None:
        if logger == polling.PROGRESS_LOGGER:
            self._show_progress(f"  {self._task}: {message}")
        elif level in ("WARNING", "ERROR", "CRITICAL"):
            if level != "WARNING":
                self._errors[self._task] = message
                self._continues = True
            # Wrapped, not cut: a long one names a path first and what to do last ("Fix: ...").
            first, *rest = textwrap.wrap(
                f"  {self._task}: {level.lower()}: {message}",
                _WIDTH,
                subsequent_indent="    ",
                max_lines=_MAX_WARNING_LINES,
                placeholder=" ...",
                break_on_hyphens=False,
            ) or [""]
            self._show(first)
            for line in rest:
                self._emit(line)

    def _show(self, text: str) -> None:
        self._end_progress()
        self._emit(text)

    def _show_progress(self, text: str) -> None:
        self._end_progress()
        if self.live:
            self._progress = (text, self.clock())
            self.redraw()
        else:
            self._emit(text)

    def _end_progress(self) -> None:
        """Leaves the live line as it last read, on a line of its own."""
        if self._progress is not None:
            self.redraw()
            self.out.write("\n")
            self.shown.append(self._progress[0])
            self._progress = None

    def _emit(self, text: str) -> None:
        text = _cut(text)
        self.shown.append(text)
        self.out.write(text + "\n")
        self.out.flush()


def _cut(text: str) -> str:
    """One terminal line: at most ``_WIDTH`` characters."""
    return text if len(text) <= _WIDTH else text[: _WIDTH - 3] + "..."


@contextlib.contextmanager
def capture(console: StepConsole) -> Iterator[StepConsole]:
    """Sends stdout and the root logger to ``console`` while a pipeline runs.

    kfp.local's own notes outside a task (cache hits, retries, skipped tasks) go through the
    root logger; its per-task notes and the steps' output go to stdout. Its warning that task
    display names do nothing locally is dropped (they show in the Vertex UI).
    """
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    handler = logging.StreamHandler(console)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    try:
        with console, contextlib.redirect_stdout(console), warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message="Task .* have no effect", category=UserWarning
            )
            yield console
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
