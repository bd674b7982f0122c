"""What the DDP example's checkpoint policy carries from one process of a job to the next
(``carried_policy``: a ``policy.json`` in each checkpoint's state folder, read by rank 0)."""

from __future__ import annotations

import json
import logging

from vsp.components.runtime.trainer import history_writer
from vsp.components.runtime.trainer import policy as checkpoint_policy
from vsp.examples.ddp_trainer import carried_policy


def learned() -> checkpoint_policy.CheckpointPolicy:
    policy = checkpoint_policy.CheckpointPolicy(mtbf_s=30.0, notice_s=0.5)
    policy.observe(2, 75.0)  # two preemptions in 75 s of running so far
    policy.record_save(40, 0.05)
    policy.record_step(0.025)
    return policy


def test_a_resumed_process_counts_one_more_preemption_and_keeps_the_measurements(tmp_path):
    state = tmp_path / "ckpt-0000000040" / "state"
    state.mkdir(parents=True)
    carried_policy.write(state, learned(), "notice")
    body = json.loads((state / "policy.json").read_text())
    assert (body["schema"], body["reason"]) == ("vsp-ddp-policy/1", "notice")

    fresh = checkpoint_policy.CheckpointPolicy(mtbf_s=30.0, notice_s=0.5)
    carried = carried_policy.restore(fresh, tmp_path, state)
    assert (carried.resumes, carried.run_seconds) == (3, 75.0)
    assert (fresh.preemptions, fresh.run_seconds) == (3, 75.0)
    assert fresh.mtbf_s == (30.0 + 75.0) / 4
    assert (fresh.save_cost_s, fresh.measured_saves) == (0.05, 1)
    assert (fresh.step_s, fresh.measured_steps) == (0.025, 1)


def test_a_final_checkpoint_is_a_hand_over_not_a_preemption(tmp_path):
    carried_policy.write(tmp_path, learned(), "final")
    fresh = checkpoint_policy.CheckpointPolicy(mtbf_s=30.0)
    assert carried_policy.restore(fresh, tmp_path / "none", tmp_path).resumes == 2


def test_a_fresh_start_keeps_the_prior_and_reads_the_notice_outcomes(tmp_path):
    history_writer.record_resume(tmp_path, None, 100.0, 0.5)
    history_writer.record_save(tmp_path, 20, 110.0, 0.05, "notice")
    history_writer.record_resume(tmp_path, 20, 120.0, 0.5)  # resumed from the notice save: landed
    fresh = checkpoint_policy.CheckpointPolicy(mtbf_s=30.0)
    carried = carried_policy.restore(fresh, tmp_path, None)
    assert (carried.resumes, carried.run_seconds) == (0, 0.0)
    assert (fresh.preemptions, fresh.mtbf_s) == (0, 30.0)
    assert (fresh.notices_landed, fresh.notices_failed) == (1, 0)


def test_a_checkpoint_without_the_policy_or_with_a_torn_one_counts_the_resume(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="vsp.examples.ddp_trainer")
    fresh = checkpoint_policy.CheckpointPolicy(mtbf_s=30.0)
    assert carried_policy.restore(fresh, tmp_path, tmp_path).resumes == 1
    assert "carries no checkpoint policy" in caplog.text
    (tmp_path / "policy.json").write_text("{not json")
    fresh = checkpoint_policy.CheckpointPolicy(mtbf_s=30.0)
    assert carried_policy.restore(fresh, tmp_path, tmp_path).resumes == 1
    assert "unreadable policy.json" in caplog.text
    assert (fresh.preemptions, fresh.save_cost_s) == (1, 1.0)  # the prior's save cost
