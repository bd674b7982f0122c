"""CI budget of the bad-input campaign: generated invalid specs and parameters fail early.

Every one must raise ``errors.UserError`` with a fix-it message before any request reaches the
emulator (its journal stays as it was).
"""

from __future__ import annotations

from tests.campaign import campaign_drive

INPUTS = 100
SEED = 11


def test_generated_bad_inputs_fail_before_any_request_with_a_fix(tmp_path):
    tally = campaign_drive.Tally()
    campaign_drive.input_batch(tmp_path / "inputs", INPUTS, SEED, tally)
    assert tally.inputs >= INPUTS // 2
    assert len(tally.by_input) >= 5
    assert tally.violations == []
