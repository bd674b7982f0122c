"""CI budget of the fault campaign: a fixed, seeded set of generated fault plans.

Each plan runs a runtime entry point (cluster create-or-reuse, cluster delete, the exit task,
model registration, Slurm submit) under one fault and checks the invariants against the
emulator's state; ``make campaign`` runs thousands (``benchmarks/fault_campaign.py``).
"""

from __future__ import annotations

import pytest

from tests.campaign import campaign_drive, campaign_plans

PLANS = 40
SEED = 7


@pytest.mark.slow
def test_generated_fault_plans_keep_every_invariant(tmp_path):
    tally = campaign_drive.Tally()
    campaign_drive.fault_batch(tmp_path / "faults", PLANS, SEED, tally)
    assert tally.plans >= PLANS // 2  # hypothesis may stop early on a small space
    assert tally.fired > 0 and tally.checked > tally.plans
    assert tally.violations == []


def test_a_recorded_plan_replays(tmp_path):
    """A plan from a report replays on its own: ``Plan(**report_plan)``."""
    from tests.campaign import campaign_world

    plan = campaign_plans.Plan("slurm_submit", "kill_rerun", "submit")
    with campaign_world.opened(tmp_path / "replay") as world:
        result = campaign_plans.run_plan(world, plan)
    assert result.violations == [] and result.checked >= 4


def test_an_unclassified_operation_error_exits_within_the_taxonomy():
    """Found by the campaign: an LRO ending with code 1 or 2 used to exit 1."""
    from vsp.components.runtime.core import errors

    for code in (1, 2, 15):
        error = errors.operation_error("operations/1", {"code": code, "message": "m"})
        assert error.exit_code == errors.EXIT_INTERNAL_ERROR
    assert errors.operation_error("o", {"code": 8}).exit_code == errors.EXIT_TRANSIENT_ERROR
    assert errors.operation_error("o", {"code": 3}).exit_code == errors.EXIT_USER_ERROR


def test_a_connection_broken_mid_answer_is_transient(tmp_path):
    """Found by the campaign: an emulator restart during an answer raised a raw
    ``ChunkedEncodingError`` (outside the taxonomy); the client now reports it as unavailable."""
    from tests.campaign import campaign_world

    recorded = {
        "entry": "cluster_create", "kind": "restart", "call": "create", "skip": 1, "times": 1,
        "code": 8, "reuse": False, "state": "FAILED", "keep_minutes": 30.0, "at": 0.05,
    }  # fmt: skip
    with campaign_world.opened(tmp_path / "replay") as world:
        result = campaign_plans.run_plan(world, campaign_plans.Plan(**recorded))
    assert result.violations == []
