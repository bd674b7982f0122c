"""Fault injection: rules that make chosen API calls fail, hang, drop or go wrong later.

A rule matches a request by method, path regex and optional query and body regexes. Each match
is counted; the rule fires on matches number ``skip + 1`` to ``skip + times`` (``times`` null =
forever). Actions:

* ``status``: answer ``http_status`` with Google error JSON instead of (``when="before"``) or
  after (``when="after"``: the call took effect) handling the request.
* ``reset``: close the connection without any answer, before or after handling.
* ``delay``: sleep ``seconds`` (wall clock) before or after handling, then answer normally.
* ``lro_error``: the create/update/delete operation started by the call ends with
  ``{"code": code, "message": message}``; ``cluster_state`` overrides the state the cluster is
  left in. Consumed by the resource handler, so rejected calls do not use it up.
* ``provisioning_delay``: the cluster created by the call provisions for ``seconds`` (emulated
  seconds, scaled like the setting it overrides).
* any action a resource module declares with ``fault_rules.register_action`` and consumes with
  ``Request.take_fault`` (e.g. a future Slurm job preemption).

Rules live in ``{state_dir}/faults.json`` (``{"faults": [rule, ...]}``) with their counters. The
file is re-read whenever it changes on disk, so it can also be edited by hand or by another process.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import re
import threading
from typing import Any

from vsp.vertex_emulator import fault_rules, store

FAULTS_FILENAME = "faults.json"


log = logging.getLogger(__name__)


@dataclasses.dataclass
class FaultPlan:
    """The HTTP-level faults that fired for one request."""

    delay_before: float = 0.0
    delay_after: float = 0.0
    terminal: fault_rules.FaultRule | None = None
    fired: list[str] = dataclasses.field(default_factory=list)


class FaultBook:
    """The fault rules of a state directory; thread-safe, persisted with their counters."""

    def __init__(self, state_dir: str | os.PathLike[str]):
        """Loads the rules saved in ``{state_dir}/faults.json`` (if any).

        Args:
            state_dir: The emulator's state directory.
        """
        self._path = pathlib.Path(state_dir) / FAULTS_FILENAME
        self._lock = threading.Lock()
        self._rules: list[fault_rules.FaultRule] = []
        self._signature: tuple[int, int] | None = None
        with self._lock:
            self._reload_if_changed()

    @property
    def path(self) -> pathlib.Path:
        """The faults file."""
        return self._path

    def add(
        self, rule: fault_rules.FaultRule | dict[str, Any] | None = None, **fields: Any
    ) -> fault_rules.FaultRule:
        """Adds a rule, given as a ``FaultRule``, a dict, or keyword fields.

        Returns:
            A copy of the stored rule (with its id).

        Raises:
            ValueError: Invalid fields or a duplicate id.
        """
        if rule is None:
            rule = fault_rules.FaultRule.from_dict(fields)
        elif isinstance(rule, dict):
            rule = fault_rules.FaultRule.from_dict({**rule, **fields})
        else:
            rule = dataclasses.replace(rule, **fields)
        with self._lock:
            self._reload_if_changed()
            if not rule.id:
                numbers = [int(r.id[6:]) for r in self._rules if re.fullmatch(r"fault-\d+", r.id)]
                rule.id = f"fault-{max(numbers, default=0) + 1}"
            if any(r.id == rule.id for r in self._rules):
                raise ValueError(f"a fault rule with id {rule.id!r} already exists")
            self._rules.append(rule)
            self._save()
            return dataclasses.replace(rule)

    def remove(self, rule_id: str) -> bool:
        """Removes one rule; returns whether it existed."""
        with self._lock:
            self._reload_if_changed()
            kept = [r for r in self._rules if r.id != rule_id]
            removed = len(kept) != len(self._rules)
            self._rules = kept
            self._save()
            return removed

    def clear(self) -> int:
        """Removes every rule; returns how many there were."""
        with self._lock:
            self._reload_if_changed()
            count = len(self._rules)
            self._rules = []
            self._save()
            return count

    def rules(self) -> list[fault_rules.FaultRule]:
        """Copies of all rules, in the order they are evaluated."""
        with self._lock:
            self._reload_if_changed()
            return [dataclasses.replace(r) for r in self._rules]

    def plan(self, request: fault_rules.RequestInfo) -> FaultPlan:
        """Counts matches of the HTTP-level rules and returns those that fire.

        Every matching ``delay`` rule can fire; of ``status``/``reset`` rules only the first that
        fires is used (later ones are not evaluated for this request).
        """
        plan = FaultPlan()
        with self._lock:
            self._reload_if_changed()
            touched = False
            for rule in self._rules:
                if (
                    rule.action not in fault_rules.HTTP_ACTIONS
                    or rule.exhausted
                    or not rule.matches(request)
                ):
                    continue
                if rule.action != "delay" and plan.terminal is not None:
                    continue
                touched = True
                if not rule.count_match():
                    continue
                plan.fired.append(rule.id)
                if rule.action == "delay":
                    if rule.when == "before":
                        plan.delay_before += rule.seconds
                    else:
                        plan.delay_after += rule.seconds
                else:
                    plan.terminal = dataclasses.replace(rule)
            if touched:
                self._save()
        return plan

    def take(self, action: str, request: fault_rules.RequestInfo) -> fault_rules.FaultRule | None:
        """Counts a match of the first matching rule of a resource-level action.

        Called by resource handlers at the point the effect applies (after validation).

        Returns:
            A copy of the rule if it fires on this match, else None.
        """
        with self._lock:
            self._reload_if_changed()
            for rule in self._rules:
                if rule.action == action and not rule.exhausted and rule.matches(request):
                    fired = rule.count_match()
                    self._save()
                    return dataclasses.replace(rule) if fired else None
        return None

    def _save(self) -> None:
        store.write_json_atomic(self._path, {"faults": [r.to_dict() for r in self._rules]})
        self._signature = self._stat()

    def _stat(self) -> tuple[int, int] | None:
        try:
            info = self._path.stat()
        except FileNotFoundError:
            return None
        return (info.st_mtime_ns, info.st_size)

    def _reload_if_changed(self) -> None:
        signature = self._stat()
        if signature == self._signature:
            return
        self._signature = signature
        try:
            data = store.read_json(self._path, default={"faults": []})
            items = data.get("faults", []) if isinstance(data, dict) else data
            self._rules = [fault_rules.FaultRule.from_dict(item) for item in items]
        except (ValueError, TypeError) as exc:
            log.error(
                "ignoring invalid faults file %s (keeping %d rules): %s",
                self._path,
                len(self._rules),
                exc,
            )
