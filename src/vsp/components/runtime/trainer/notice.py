"""The preemption notice: signals turned into a flag the training loop polls.

GCP Spot VMs get an ACPI soft-off (the guest sees SIGTERM) about 30 s before the hard stop; Slurm
can be told to send a signal ahead of preemption (e.g. ``--signal=USR1@30``).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

from vsp.components.runtime.core import errors

DEFAULT_NOTICE_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class PreemptionNotice:
    """Turns preemption signals into a flag the training loop polls at step boundaries.

    Use as a context manager (or ``install``/``uninstall``) from the main thread; the previous
    handlers are restored on exit. The handler only sets the flag (no I/O in signal context).

    Attributes:
        signals: The signals handled.
        received: Number of the first signal received, or None (also None after ``request``).
        reason: Human-readable reason of the first notice, or "".
        requested_at: Monotonic time of the first notice, or None.
    """

    def __init__(self, signals: Iterable[int] = DEFAULT_NOTICE_SIGNALS):
        self.signals = tuple(signal.Signals(s) for s in signals)
        if not self.signals:
            raise errors.UserError("PreemptionNotice needs at least one signal")
        self.received: int | None = None
        self.reason = ""
        self.requested_at: float | None = None
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        """True once a notice arrived: save at the next step boundary and stop."""
        return self._event.is_set()

    @property
    def installed(self) -> bool:
        """True while the signal handlers are installed."""
        return bool(self._previous)

    def request(self, reason: str = "requested") -> None:
        """Raises the flag without a signal (e.g. from a metadata-server poller thread)."""
        if not self._event.is_set():
            self.reason = reason
            self.requested_at = time.monotonic()
        self._event.set()

    def clear(self) -> None:
        """Lowers the flag (for tests and for loops that deliberately continue)."""
        self._event.clear()
        self.received = None
        self.reason = ""
        self.requested_at = None

    def _handle(self, signum: int, frame: Any) -> None:
        if not self._event.is_set():
            self.received = signum
            self.reason = signal.Signals(signum).name
            self.requested_at = time.monotonic()
        self._event.set()

    def install(self) -> PreemptionNotice:
        """Installs the handlers (idempotent); must run in the main thread."""
        if self._previous:
            return self
        if threading.current_thread() is not threading.main_thread():
            raise errors.UserError("install the preemption notice from the main thread")
        for sig in self.signals:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        """Restores the handlers that were in place before ``install``."""
        previous, self._previous = self._previous, {}
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)

    def __enter__(self) -> PreemptionNotice:
        return self.install()

    def __exit__(self, *exc_info: Any) -> None:
        self.uninstall()
