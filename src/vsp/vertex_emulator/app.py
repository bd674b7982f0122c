"""The emulator application: state, routing, faults, journal and ticks, without the HTTP layer.

``EmulatorApp.handle`` takes a method, a request target and a raw body and returns a
``router.Response`` (or None for "drop the connection"); ``handler.py`` wraps it in HTTP.

Services are listed in one table, ``services()``: each has a ``register(app)`` that adds
routes (``app.router.add_api``), operation completers (``app.operations.register_kind``) and
time-driven work (``app.add_tick``).
"""

from __future__ import annotations

import logging
import os
import pathlib
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from vsp.vertex_emulator import (
    clock,
    config,
    control,
    errors,
    fault_rules,
    faults,
    journal,
    jsonbody,
    operations,
    router,
)
from vsp.vertex_emulator import store as store_module

Tick = Callable[[Any, float], None]
Extension = Callable[[Any], None]

log = logging.getLogger(__name__)


def services() -> list[Extension]:
    """The ``register`` function of every service, in a fixed order (the service table)."""
    from vsp.vertex_emulator.clusters import api as clusters
    from vsp.vertex_emulator.custom_jobs import api as custom_job_api
    from vsp.vertex_emulator.models import api as models
    from vsp.vertex_emulator.pipelines import jobs as pipeline_jobs
    from vsp.vertex_emulator.pipelines import schedules as pipeline_schedules
    from vsp.vertex_emulator.pubsub import subscriptions as pubsub_subscriptions
    from vsp.vertex_emulator.pubsub import topics as pubsub_topics
    from vsp.vertex_emulator.slurm import api as slurm_api

    return [
        clusters.register,
        custom_job_api.register,
        models.register,
        pipeline_jobs.register,
        pipeline_schedules.register,
        slurm_api.register,
        pubsub_topics.register,
        pubsub_subscriptions.register,
    ]


class EmulatorApp:
    """Everything the emulator knows and does, bound to one state directory.

    Attributes:
        state_dir: The state directory.
        settings: Current settings (replace through ``update_settings``).
        store: Persistent resource state.
        journal: The request journal.
        faults: Fault-injection rules.
        router: API routes (journaled, subject to faults and ticks).
        control_router: ``/emulator/...`` control routes (none of the above).
        operations: Long-running operations.
        clock: Epoch-seconds time source (``time.time``; replaceable in tests).
        slurm: The Slurm service's runtime (``slurm.runtime.SlurmRuntime``): every cluster's
            emulated Slurm and its Python API.
        custom_jobs: The CustomJob service's runtime (``custom_jobs.runtime.CustomJobRuntime``).
    """

    def __init__(
        self,
        state_dir: str | os.PathLike[str],
        settings: config.EmulatorSettings | None = None,
        *,
        extensions: Iterable[Extension] | None = None,
    ):
        """Opens a state directory and registers the resource modules.

        Args:
            state_dir: Where all state lives (created if missing).
            settings: Settings to use and save; None = the saved ones, else defaults.
            extensions: ``register`` functions to use instead of the discovered ones.
        """
        # Absolute: jobs run in other working directories, and paths derived from it must hold.
        self.state_dir = pathlib.Path(os.path.abspath(state_dir))
        self.state_dir.mkdir(parents=True, exist_ok=True)
        # Import resource modules first: they may declare fault actions the faults file uses.
        registers = services() if extensions is None else list(extensions)
        self.settings = config.resolve_settings(self.state_dir, settings)
        self.store = store_module.StateStore(self.state_dir)
        self.journal = journal.Journal(self.state_dir)
        self.faults = faults.FaultBook(self.state_dir)
        self.router = router.Router()
        self.control_router = router.Router()
        self.clock: Callable[[], float] = time.time
        self._ticks: list[tuple[str, Tick]] = []
        # True while the periodic (background) tick runs, False while a request's tick does.
        self.periodic_tick = False
        # Notified when a service stores something a long poll may wait for (``hold_seconds``).
        self.changed = threading.Condition()
        self.operations = operations.OperationManager(self)
        self.operations.install()
        # Set by their services' ``register`` (None when a test registers other services).
        self.slurm: Any = None
        self.custom_jobs: Any = None
        control.install(self)
        for register in registers:
            register(self)

    def now(self) -> float:
        """Current epoch seconds."""
        return self.clock()

    def add_tick(self, tick: Tick, *, name: str = "") -> None:
        """Registers time-driven work, called as ``tick(app, now)``.

        Ticks run before every API request and every ``tick_interval_seconds`` in the background,
        under the store lock. They must be idempotent and derive state from stored timestamps.
        ``periodic_tick`` says which: work that a real service does on its own timer, never
        because a client asked something (Slurm's scheduler pass), runs only in the periodic one.
        """
        self._ticks.append((name or getattr(tick, "__name__", "tick"), tick))

    def run_ticks(self, now: float | None = None, *, periodic: bool = False) -> None:
        """Runs every tick once (errors are logged, not raised). The time is read once the
        store's lock is held: a tick that waited for a request must not date its work (a
        start, a SIGKILL) from before the wait.

        Args:
            now: Epoch seconds to run them at (default: now).
            periodic: The background tick (True) rather than a request's (``add_tick``).
        """
        with self.store.lock:
            now = self.now() if now is None else now
            self.periodic_tick = periodic
            try:
                for name, tick in self._ticks:
                    try:
                        with self.store.transaction():
                            tick(self, now)
                    except store_module.Stopped:
                        return
                    except Exception:
                        log.exception("emulator tick %s failed", name)
            finally:
                self.periodic_tick = False

    def update_settings(self, **changes: Any) -> config.EmulatorSettings:
        """Changes settings (validated) and saves them in the state directory."""
        self.settings = self.settings.replace(**changes)
        config.save_settings(self.state_dir, self.settings)
        return self.settings

    def handle(self, method: str, target: str, raw_body: bytes) -> router.Response | None:
        """Serves one HTTP request.

        Args:
            method: HTTP method.
            target: Request target (path and query string).
            raw_body: Request body bytes.

        Returns:
            The response, or None when the connection must be dropped without one.
        """
        method = method.upper()
        split = urllib.parse.urlsplit(target)
        path = urllib.parse.unquote(split.path)
        query: dict[str, Any] = {}
        for key, values in urllib.parse.parse_qs(split.query, keep_blank_values=True).items():
            query[key] = values[0] if len(values) == 1 else values
        text = raw_body.decode("utf-8", errors="replace")
        body, body_error = _parse_body(raw_body)
        request = router.Request(self, method, path, query, body, text)
        control_match = self.control_router.match(method, path)
        if control_match is not None:
            if body_error is not None:
                return _body_error_response(body_error)
            request.params = control_match[1]
            return self._call(control_match[0].handler, request)
        if path.startswith(control.PREFIX + "/"):
            message = f"No control endpoint {method} {path}."
            return _error_response(errors.not_found(message))
        arrived = self.now()
        plan = self.faults.plan(request.fault_info())
        if plan.delay_before:
            time.sleep(plan.delay_before)
        rule = plan.terminal
        if rule is not None and rule.when == "before":
            response = None if rule.action == "reset" else _fault_response(rule)
        else:
            response = self._dispatch(request, body_error)
            if rule is not None:
                response = None if rule.action == "reset" else _fault_response(rule)
        fired = plan.fired + request.fired_faults
        self.journal.append(
            {
                "time": clock.rfc3339(arrived),
                "method": method,
                "path": path,
                "query": query,
                "body": body,
                "status": "reset" if response is None else response.status,
                "fault": ",".join(fired) or None,
            }
        )
        if plan.delay_after:
            time.sleep(plan.delay_after)
        return response

    def _dispatch(self, request: router.Request, body_error: str | None) -> router.Response:
        found = self.router.match(request.method, request.path)
        if found is None:
            return _error_response(
                errors.not_found(f"The requested URL {request.path} was not found on this server.")
            )
        if body_error is not None:
            return _body_error_response(body_error)
        route, request.params = found
        self.run_ticks()
        response = self._call(route.handler, request)
        if response.hold_seconds > 0:
            response = self._held(route.handler, request, response)
        version = request.params.get("api_version")
        if version:
            response.body = operations.in_version(response.body, version)
        return response

    def _held(
        self, handler: router.Handler, request: router.Request, response: router.Response
    ) -> router.Response:
        """A long poll: asks ``handler`` again on each change until it holds no more or its
        hold has passed (the store's lock is not held while waiting)."""
        end = time.monotonic() + response.hold_seconds
        while response.hold_seconds > 0:
            left = end - time.monotonic()
            if left <= 0:
                break
            with self.changed:
                self.changed.wait(min(left, 0.5))
            response = self._call(handler, request)
        response.hold_seconds = 0.0
        return response

    def notify_changed(self) -> None:
        """Wakes the long polls waiting in ``_held``."""
        with self.changed:
            self.changed.notify_all()

    def _call(self, handler: router.Handler, request: router.Request) -> router.Response:
        try:
            with self.store.transaction():
                return handler(request)
        except errors.ApiException as exc:
            return _error_response(exc)
        except store_module.Stopped:  # served after stop(): its connection is already gone
            return _error_response(errors.ApiException("UNAVAILABLE", "The emulator stopped."))
        except Exception as exc:
            log.exception("emulator handler failed: %s %s", request.method, request.path)
            return _error_response(errors.ApiException("INTERNAL", f"Emulator bug: {exc!r}"))


def _parse_body(raw_body: bytes) -> tuple[Any, str | None]:
    """(JSON value or None, None) or (None, why the service refuses the body)."""
    try:
        return jsonbody.parse(raw_body), None
    except jsonbody.BodyError as exc:
        return None, str(exc)


def _body_error_response(message: str) -> router.Response:
    violation = errors.FieldViolation("", message)
    return _error_response(errors.invalid_argument(message, [violation]))


def _error_response(exc: errors.ApiException) -> router.Response:
    return router.Response(exc.to_body(), status=exc.http_status)


def _fault_response(rule: fault_rules.FaultRule) -> router.Response:
    status = rule.error_status or errors.STATUS_BY_HTTP.get(rule.http_status, "UNKNOWN")
    message = rule.message or f"Injected fault {rule.id}: {status}."
    response = router.Response(
        errors.error_body(rule.http_status, status, message), rule.http_status
    )
    if rule.retry_after is not None:
        response.headers["Retry-After"] = f"{rule.retry_after:g}"
    return response
