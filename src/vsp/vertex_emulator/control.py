"""Control endpoints under ``/emulator/v1/`` (never journaled, never faulted).

* ``GET /emulator/v1/health`` -> ``{"status": "ok", "stateDir": ...}``
* ``GET /emulator/v1/faults`` -> ``{"faults": [rule, ...]}``
* ``POST /emulator/v1/faults`` with a rule JSON -> the stored rule (with its ``id``)
* ``DELETE /emulator/v1/faults`` -> ``{"cleared": N}``
* ``DELETE /emulator/v1/faults/{id}`` -> ``{}``
* ``GET /emulator/v1/settings`` -> settings; ``PATCH`` with some fields -> the new settings
* ``GET /emulator/v1/journal`` -> ``{"entries": [...]}``
* ``POST /emulator/v1/tick`` runs the ticks now -> ``{}``
"""

from __future__ import annotations

from typing import Any

from vsp.vertex_emulator import errors, router

PREFIX = "/emulator/v1"


def install(app: Any) -> None:
    """Registers the control routes on ``app.control_router``."""
    add = app.control_router.add
    add("GET", rf"{PREFIX}/health", _health)
    add("GET", rf"{PREFIX}/faults", _list_faults)
    add("POST", rf"{PREFIX}/faults", _add_fault)
    add("DELETE", rf"{PREFIX}/faults", _clear_faults)
    add("DELETE", rf"{PREFIX}/faults/(?P<rule_id>[^/]+)", _remove_fault)
    add("GET", rf"{PREFIX}/settings", _get_settings)
    add("PATCH", rf"{PREFIX}/settings", _update_settings)
    add("GET", rf"{PREFIX}/journal", _journal)
    add("POST", rf"{PREFIX}/tick", _tick)


def _health(request: router.Request) -> router.Response:
    return router.Response({"status": "ok", "stateDir": str(request.app.state_dir)})


def _list_faults(request: router.Request) -> router.Response:
    return router.Response({"faults": [r.to_dict() for r in request.app.faults.rules()]})


def _add_fault(request: router.Request) -> router.Response:
    try:
        rule = request.app.faults.add(request.json_object())
    except (ValueError, TypeError) as exc:
        raise errors.invalid_argument(f"Invalid fault rule: {exc}") from exc
    return router.Response(rule.to_dict())


def _clear_faults(request: router.Request) -> router.Response:
    return router.Response({"cleared": request.app.faults.clear()})


def _remove_fault(request: router.Request) -> router.Response:
    rule_id = request.params["rule_id"]
    if not request.app.faults.remove(rule_id):
        raise errors.not_found(f"No fault rule {rule_id!r}.")
    return router.Response({})


def _get_settings(request: router.Request) -> router.Response:
    return router.Response(request.app.settings.to_dict())


def _update_settings(request: router.Request) -> router.Response:
    try:
        settings = request.app.update_settings(**request.json_object())
    except (ValueError, TypeError) as exc:
        raise errors.invalid_argument(f"Invalid settings: {exc}") from exc
    return router.Response(settings.to_dict())


def _journal(request: router.Request) -> router.Response:
    return router.Response({"entries": request.app.journal.read()})


def _tick(request: router.Request) -> router.Response:
    request.app.run_ticks(periodic=True)  # asked for: everything time-driven, as a timer would
    return router.Response({})
