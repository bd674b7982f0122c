"""The mutation-score tool end to end: planted bugs in a copy are caught, the copy is clean.

``make mutants`` (``benchmarks/mutants.py``) runs every mutant; here two that the first plan of
their entry point catches, the same hunt on the unmutated copy, and an anchor that does not
match.
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

from benchmarks import mutants

SEED = 20261205


def _mutant(name: str) -> mutants.Mutant:
    return next(m for m in mutants.MUTANTS if m.name == name)


def test_planted_bugs_are_caught_in_a_copy_and_the_copy_without_them_is_clean(tmp_path):
    source = mutants.ROOT / "src/vsp/components/runtime/registry/client.py"
    before = source.read_text()
    rows = [
        mutants.run_mutant(_mutant(name), cap=3, seed=SEED, limit=90)
        for name in ("upload_drops_run_label", "submit_drops_run_key")
    ]
    assert source.read_text() == before  # the working tree is never patched
    for row in rows:
        assert row.get("caught") is True, row
        assert row["plan"].startswith("Plan(") and row["plans"] >= 1, row
    assert "returned_job_is_the_active_one" in rows[1]["violation"]
    root = mutants.copy_repo(tmp_path / "clean")
    clean = mutants.hunt_in(root, ("register_model", "slurm_submit"), 3, SEED, 90)
    assert clean.get("error") is None and clean["caught"] is False and clean["plans"] == 3


def test_an_anchor_that_no_longer_matches_is_an_error(tmp_path):
    mutant = _mutant("delete_skips_in_use_check")
    target = tmp_path / mutant.path
    target.parent.mkdir(parents=True)
    target.write_text("def delete_unless_in_use():\n    return 'deleted'\n")
    with pytest.raises(ValueError, match="anchor found 0 times"):
        mutants.apply(mutant, tmp_path)
    doubled = dataclasses.replace(mutant, old="return")
    with pytest.raises(ValueError, match="anchor found 2 times"):
        target.write_text("return\nreturn\n")
        mutants.apply(doubled, pathlib.Path(tmp_path))


def test_every_mutant_anchor_matches_the_code_once():
    for mutant in mutants.MUTANTS:
        text = (mutants.ROOT / mutant.path).read_text()
        assert text.count(mutant.old) == 1, mutant.name
    assert len(mutants.MUTANTS) >= 15
