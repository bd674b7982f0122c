"""The HTTP server: ``EmulatorServer`` (in-process, background threads) and ``serve`` (blocking).

Clients select the emulator with ``VERTEX_EMULATOR_HOST=host:port`` and talk plain HTTP to the
same REST paths as Vertex AI. While running, ``{state_dir}/emulator.json`` holds the address and
pid, and ``{state_dir}/emulator.lock`` keeps a second emulator off the same state directory.
"""

from __future__ import annotations

import http.server
import logging
import os
import pathlib
import signal
import socket
import sys
import threading
from typing import Any

from vsp.vertex_emulator import app as app_module
from vsp.vertex_emulator import config, fault_rules, handler, store
from vsp.vertex_emulator.pubsub import topics as pubsub_topics

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

RUNTIME_FILENAME = "emulator.json"
LOCK_FILENAME = "emulator.lock"

log = logging.getLogger(__name__)


class StateDirInUse(RuntimeError):
    """Another running emulator holds the state directory (one emulator per folder).

    Attributes:
        holder: What ``emulator.json`` says of the one holding it (``address``, ``pid``,
            ``owner``: ``vsp run-local`` for a run's own emulator, which stops with its run);
            empty when it is not written yet.
    """

    def __init__(self, message: str, holder: dict[str, Any] | None = None):
        super().__init__(message)
        self.holder = dict(holder or {})


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], app: app_module.EmulatorApp):
        self.app = app
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        super().__init__(address, handler.RequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], OSError):  # the client went away (timeout, stop())
            log.debug("connection from %s ended abruptly", client_address, exc_info=True)
            return
        super().handle_error(request, client_address)

    def close_open_connections(self) -> None:
        with self._open_lock:
            sockets, self._open = list(self._open), set()
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class EmulatorServer:
    """An emulator serving HTTP from background threads.

    Example::

        server = EmulatorServer(tmp_path, settings=EmulatorSettings(provisioning_delay_seconds=0))
        server.start()
        os.environ["VERTEX_EMULATOR_HOST"] = server.address
        ...
        server.stop()

    Attributes:
        app: The ``EmulatorApp`` (state, routes, faults, journal).
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        host: str = "127.0.0.1",
        port: int = 0,
        settings: config.EmulatorSettings | None = None,
        *,
        extensions: Any = None,
        owner: str = "vsp emulator start",
    ):
        """Opens the state directory (locked until ``stop``); ``start`` binds the port.

        Args:
            state_dir: Directory holding all state (created if missing).
            host: Interface to bind.
            port: TCP port; 0 picks a free one.
            settings: Settings to use and save; None = the saved ones, else defaults.
            extensions: ``register(app)`` functions replacing the discovered resource modules.
            owner: Who runs it, as ``emulator.json`` tells another process that finds the
                folder in use.

        Raises:
            StateDirInUse: Another emulator holds the state directory.
        """
        self.state_dir = pathlib.Path(os.path.abspath(state_dir))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._host, self._port, self._owner = host, port, owner
        self._httpd: _HTTPServer | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self._lock_file: Any = None
        self._lock_state_dir()
        try:
            self.app = app_module.EmulatorApp(self.state_dir, settings, extensions=extensions)
        except BaseException:
            self._unlock_state_dir()
            raise

    @property
    def address(self) -> str:
        """``host:port`` for ``VERTEX_EMULATOR_HOST`` (valid once started)."""
        if self._httpd is None:
            raise RuntimeError("the emulator is not started")
        host, port = self._httpd.server_address[:2]
        return f"{'127.0.0.1' if host in ('0.0.0.0', '') else host}:{port}"

    @property
    def base_url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.address}"

    @property
    def settings(self) -> config.EmulatorSettings:
        """The current settings."""
        return self.app.settings

    def update_settings(self, **changes: Any) -> config.EmulatorSettings:
        """Changes some settings (saved in the state directory)."""
        return self.app.update_settings(**changes)

    def start(self) -> EmulatorServer:
        """Binds the port and serves requests and ticks in daemon threads; returns self."""
        if self._httpd is not None:
            raise RuntimeError("the emulator is already started")
        self._lock_state_dir()
        try:
            self._httpd = _HTTPServer((self._host, self._port), self.app)
        except OSError:
            self._unlock_state_dir()
            raise
        self._stopping.clear()
        self.app.store.allow_writes()
        self._threads = [
            threading.Thread(
                target=self._httpd.serve_forever,
                kwargs={"poll_interval": 0.02},
                name="vertex-emulator-http",
                daemon=True,
            ),
            threading.Thread(target=self._tick_loop, name="vertex-emulator-tick", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        runtime = {
            "address": self.address,
            "baseUrl": self.base_url,
            "pid": os.getpid(),
            "owner": self._owner,
        }
        store.write_json_atomic(self.state_dir / RUNTIME_FILENAME, runtime)
        return self

    def stop(self) -> None:
        """Stops serving, drops open connections and releases the state directory."""
        if self._httpd is None:
            self._unlock_state_dir()
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd.close_open_connections()
        self.app.store.stop_writes()  # a request still being served commits now or never
        for thread in self._threads:
            thread.join(timeout=5)
        self._httpd = None
        (self.state_dir / RUNTIME_FILENAME).unlink(missing_ok=True)
        self._unlock_state_dir()

    def __enter__(self) -> EmulatorServer:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def add_fault(
        self, rule: fault_rules.FaultRule | dict[str, Any] | None = None, **fields: Any
    ) -> fault_rules.FaultRule:
        """Adds a fault rule (see ``faults.FaultRule``); returns it with its id."""
        return self.app.faults.add(rule, **fields)

    def remove_fault(self, rule_id: str) -> bool:
        """Removes one fault rule; returns whether it existed."""
        return self.app.faults.remove(rule_id)

    def clear_faults(self) -> int:
        """Removes every fault rule; returns how many there were."""
        return self.app.faults.clear()

    def faults(self) -> list[fault_rules.FaultRule]:
        """The fault rules with their counters."""
        return self.app.faults.rules()

    def journal(self) -> list[dict[str, Any]]:
        """Every journal entry so far, oldest first."""
        return self.app.journal.read()

    def published(self) -> list[dict[str, Any]]:
        """The Pub/Sub messages that would have been sent, oldest first (``pubsub.topics``)."""
        return pubsub_topics.published(self.app)

    def _tick_loop(self) -> None:
        while not self._stopping.wait(self.app.settings.tick_interval_seconds):
            self.app.run_ticks(periodic=True)

    def _lock_state_dir(self) -> None:
        if fcntl is None or self._lock_file is not None:
            return
        handle = open(self.state_dir / LOCK_FILENAME, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.close()
            holder = store.read_json(self.state_dir / RUNTIME_FILENAME, {}) or {}
            who = ""
            if holder.get("pid"):
                who = f" ({holder.get('owner') or 'an emulator'}, pid {holder['pid']}"
                who += f", at {holder['address']})" if holder.get("address") else ")"
            raise StateDirInUse(
                f"state directory {self.state_dir} is in use by another running emulator{who}",
                holder,
            ) from exc
        self._lock_file = handle

    def _unlock_state_dir(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


def serve(
    state_dir: str | os.PathLike[str],
    host: str = "127.0.0.1",
    port: int = 0,
    settings: config.EmulatorSettings | None = None,
) -> None:
    """Runs an emulator in the foreground until Ctrl-C or SIGTERM.

    Prints ``VERTEX_EMULATOR_HOST=host:port`` on the first line of stdout once it is listening,
    and ``VSP_GCS_FUSE_ROOT=<state>/gcs`` (the emulated Cloud Storage) on the second.

    Args:
        state_dir: Directory holding all state.
        host: Interface to bind.
        port: TCP port; 0 picks a free one.
        settings: Settings to use and save; None = the saved ones, else defaults.
    """
    server = EmulatorServer(state_dir, host, port, settings).start()
    stop = threading.Event()
    restore = {}
    if threading.current_thread() is threading.main_thread():
        # SIGINT too, explicitly: a process started in the background by a shell without job
        # control inherits SIGINT ignored, and Python then never raises KeyboardInterrupt.
        for signum in (signal.SIGTERM, signal.SIGINT):
            restore[signum] = signal.signal(signum, lambda *_: stop.set())
    print(f"VERTEX_EMULATOR_HOST={server.address}", flush=True)
    # The emulated Cloud Storage, for steps run by hand against this emulator.
    print(f"VSP_GCS_FUSE_ROOT={server.state_dir / 'gcs'}", flush=True)
    print(f"Vertex emulator serving {server.base_url} from {server.state_dir}", file=sys.stderr)
    try:
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        for signum, previous in restore.items():
            signal.signal(signum, previous)
        print("Vertex emulator stopped.", file=sys.stderr, flush=True)
