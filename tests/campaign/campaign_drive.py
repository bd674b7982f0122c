"""Drives the campaign's generators in batches, inside or outside pytest, and tallies counts.

Each batch is one ``World`` (a fresh emulator) and one seeded hypothesis run of
``max_examples`` plans (generation only, no shrinking: a violation is recorded with its plan
for replay, never raised), so a run is reproducible from its seed and batch size.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import pathlib
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.campaign import campaign_entries as ce
from tests.campaign import campaign_inputs as cin
from tests.campaign import campaign_plans as cp
from tests.campaign import campaign_world as cw


@dataclasses.dataclass
class Tally:
    """Counts of a campaign (see ``as_dict``)."""

    plans: int = 0
    inputs: int = 0
    checked: int = 0
    fired: int = 0
    by_entry: dict[str, collections.Counter] = dataclasses.field(default_factory=dict)
    by_kind: dict[str, collections.Counter] = dataclasses.field(default_factory=dict)
    by_input: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    outcomes: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    violations: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def add_plan(self, result: cp.PlanResult) -> None:
        """Counts one fault plan's result."""
        plan = result.plan
        self.plans += 1
        self.checked += result.checked
        self.fired += result.fired
        self.outcomes[result.outcome] += 1
        for table, key in ((self.by_entry, plan.entry), (self.by_kind, plan.kind)):
            row = table.setdefault(key, collections.Counter())
            row.update(plans=1, fired=result.fired, checked=result.checked)
            row["violations"] += len(result.violations)
        for text in result.violations:
            self.violations.append({"plan": dataclasses.asdict(plan), "violation": text})

    def add_input(self, bad: cin.BadInput, problems: list[str]) -> None:
        """Counts one bad input's check."""
        self.inputs += 1
        self.checked += 2  # fails with a fix-it message; sends no request
        self.by_input[bad.entry] += 1
        for text in problems:
            self.violations.append({"input": repr(bad), "violation": text})

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counts."""
        return {
            "fault_plans": self.plans,
            "bad_inputs": self.inputs,
            "invariants_checked": self.checked,
            "faults_fired": self.fired,
            "violation_count": len(self.violations),
            "per_entry_point": {k: dict(v) for k, v in sorted(self.by_entry.items())},
            "per_fault_kind": {k: dict(v) for k, v in sorted(self.by_kind.items())},
            "bad_inputs_per_entry_point": dict(sorted(self.by_input.items())),
            "outcomes": dict(sorted(self.outcomes.items())),
            "violations": self.violations,
        }


def _settings(count: int) -> settings:
    return settings(
        max_examples=count,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )


def fault_batch(
    state_dir: pathlib.Path, count: int, batch_seed: int, tally: Tally, quiet: bool = True
) -> None:
    """Runs up to ``count`` generated fault plans in one fresh ``World``."""
    if quiet:
        logging.disable(logging.CRITICAL)
    world = cw.World(state_dir)
    try:

        @seed(batch_seed)
        @_settings(count)
        @given(plan=cp.plans())
        def run(plan: cp.Plan) -> None:
            tally.add_plan(cp.run_plan(world, plan))

        run()
    finally:
        world.close()
        if quiet:
            logging.disable(logging.NOTSET)


def input_batch(state_dir: pathlib.Path, count: int, batch_seed: int, tally: Tally) -> None:
    """Checks up to ``count`` generated bad inputs against one fresh emulator."""
    logging.disable(logging.CRITICAL)
    world = cw.World(state_dir, slurm=False)
    try:

        @seed(batch_seed)
        @_settings(count)
        @given(bad=cin.bad_inputs())
        def run(bad: cin.BadInput) -> None:
            tally.add_input(bad, cin.check_bad_input(world, bad))

        run()
    finally:
        world.close()
        logging.disable(logging.NOTSET)


@dataclasses.dataclass
class Hunt:
    """A campaign that stops at its first violation (``hunt``)."""

    plans: int = 0
    caught: bool = False
    plan: str = ""
    violation: str = ""


def hunt(
    root: pathlib.Path,
    cap: int,
    base_seed: int,
    entries: tuple[str, ...] = tuple(ce.ENTRIES),
    batch: int = 100,
) -> Hunt:
    """Runs generated fault plans over ``entries`` until one breaks an invariant, or ``cap``.

    Returns:
        How many plans ran, and the first violation with the ``Plan(...)`` that replays it.
    """
    found = Hunt()
    number = 0
    logging.disable(logging.CRITICAL)
    try:
        while found.plans < cap and not found.caught:
            number += 1
            world = cw.World(root / f"hunt-{number}")
            try:

                @seed(base_seed + number)
                @_settings(min(batch, cap - found.plans))
                @given(plan=cp.plans(entries))
                def run(plan: cp.Plan) -> None:
                    if found.caught:
                        return
                    found.plans += 1
                    try:
                        result = cp.run_plan(world, plan)  # noqa: B023 - run() is called below
                    except Exception as exc:  # noqa: BLE001 - a plan that cannot run is a finding
                        result = cp.PlanResult(plan, violations=[f"plan_runs: {exc!r}"])
                    if result.violations:
                        found.caught, found.plan = True, repr(plan)
                        found.violation = result.violations[0]

                run()
            finally:
                world.close()
    finally:
        logging.disable(logging.NOTSET)
    return found


def campaign(
    root: pathlib.Path, plans: int, inputs: int, base_seed: int, batch: int = 100
) -> Tally:
    """Runs batches until at least ``plans`` fault plans and ``inputs`` bad inputs ran."""
    tally = Tally()
    number = 0
    while tally.plans < plans:
        number += 1
        fault_batch(
            root / f"faults-{number}", min(batch, plans - tally.plans), base_seed + number, tally
        )
    while tally.inputs < inputs:
        number += 1
        input_batch(
            root / f"inputs-{number}", min(500, inputs - tally.inputs), base_seed + number, tally
        )
    return tally
