"""Tests of vsp.components.runtime.trainer.policy: Young/Daly, the policy, the notice."""

from __future__ import annotations

import math
import signal
import threading
import time

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.trainer import contract, strategies
from vsp.components.runtime.trainer import notice as trainer_notice
from vsp.components.runtime.trainer import policy as cp

MIN, HOUR = 60.0, 3600.0


# Worked numbers of the Young and Daly formulas (Daly's model, restart R = 2 min), in minutes.
@pytest.mark.parametrize(
    ("mtbf_s", "cost_s", "young_min", "daly_min"),
    [
        (1 * HOUR, 30.0, 7.7, 7.4),
        (1 * HOUR, 2 * MIN, 15.5, 14.2),
        (4 * HOUR, 30.0, 15.5, 15.2),
        (24 * HOUR, 2 * MIN, 75.9, 74.6),
    ],
)
def test_reference_table(mtbf_s: float, cost_s: float, young_min: float, daly_min: float) -> None:
    assert round(strategies.young_interval(cost_s, mtbf_s) / MIN, 1) == young_min
    assert round(strategies.daly_interval(cost_s, mtbf_s) / MIN, 1) == daly_min


def test_reference_table_first_row() -> None:
    # M = 15 min, C = 30 s: Young 3.9 min as in the table. The §0 Daly formula gives 3.547 min,
    # which rounds to 3.5, not the table's 3.6 (the one row the formula does not reproduce).
    assert round(strategies.young_interval(30.0, 15 * MIN) / MIN, 1) == 3.9
    assert strategies.daly_interval(30.0, 15 * MIN) / MIN == pytest.approx(3.5468, abs=1e-4)


# Daly's own examples (delta = 5 min; R = 10 min does not enter the formula).
@pytest.mark.parametrize(("mtbf_min", "tau_min"), [(24 * 60, 117.0), (6 * 60, 57.0), (15, 9.1)])
def test_daly_paper_examples(mtbf_min: float, tau_min: float) -> None:
    digits = 1 if tau_min < 10 else 0
    assert round(strategies.daly_interval(5 * MIN, mtbf_min * MIN) / MIN, digits) == tau_min


def test_formulas_exactly() -> None:
    assert strategies.young_interval(30.0, HOUR) == math.sqrt(2 * 30.0 * HOUR)
    c, m = 30.0, HOUR
    expected = math.sqrt(2 * c * m) * (1 + math.sqrt(c / (2 * m)) / 3 + c / (18 * m)) - c
    assert strategies.daly_interval(c, m) == pytest.approx(expected, rel=1e-15)
    assert strategies.daly_interval(0.0, HOUR) == 0.0 == strategies.young_interval(0.0, HOUR)


def test_daly_is_m_when_save_cost_reaches_2m() -> None:
    assert strategies.daly_interval(200.0, 100.0) == 100.0
    assert strategies.daly_interval(500.0, 100.0) == 100.0
    assert strategies.daly_interval(199.0, 100.0) != 100.0


@pytest.mark.parametrize(
    ("cost", "mtbf"), [(-1.0, 10.0), (1.0, 0.0), (math.nan, 1.0), (1.0, math.inf)]
)
def test_formula_inputs_are_checked(cost: float, mtbf: float) -> None:
    for formula in (strategies.young_interval, strategies.daly_interval):
        with pytest.raises(errors.UserError):
            formula(cost, mtbf)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_fixed_steps_policy() -> None:
    policy = cp.CheckpointPolicy(every_steps=5)
    assert (policy.mode, policy.interval_s) == ("steps", None)
    assert [s for s in range(1, 12) if policy.should_save(s)] == [5, 6, 7, 8, 9, 10, 11]
    policy.record_save(5, 0.2)
    assert [s for s in range(6, 16) if policy.should_save(s)] == [10, 11, 12, 13, 14, 15]
    policy.start(12)  # e.g. resumed from step 12
    assert not policy.should_save(16) and policy.should_save(17)


def test_fixed_seconds_policy() -> None:
    clock = FakeClock()
    policy = cp.CheckpointPolicy(every_seconds=30.0, clock=clock)
    assert (policy.mode, policy.interval_s) == ("seconds", 30.0)
    clock.now += 29.9
    assert not policy.should_save(1)
    clock.now += 0.1
    assert policy.should_save(2)
    policy.record_save(2, 1.5)
    assert not policy.should_save(3)
    assert not policy.should_save(2)  # never twice for the same step


def test_auto_policy_uses_daly_of_measured_cost() -> None:
    clock = FakeClock()
    policy = cp.CheckpointPolicy(
        mtbf_s=HOUR,
        initial_save_cost_s=1.0,
        smoothing=0.5,
        clock=clock,
        strategy=strategies.YoungDaly(),
    )
    assert policy.mode == "auto"
    assert policy.interval_s == pytest.approx(strategies.daly_interval(1.0, HOUR))
    policy.record_save(10, 30.0)  # the first measurement replaces the guess
    assert policy.save_cost_s == 30.0
    assert policy.interval_s / MIN == pytest.approx(7.4162, abs=1e-4)
    policy.record_save(20, 10.0)  # then a moving average
    assert policy.save_cost_s == 20.0
    clock.now += strategies.daly_interval(20.0, HOUR) - 0.01
    assert not policy.should_save(21)
    clock.now += 0.02
    assert policy.should_save(22)
    # 30 s does not fit in the 30 s notice: the default notice-first strategy uses the formula
    young = cp.CheckpointPolicy(formula="young", mtbf_s=HOUR, initial_save_cost_s=30.0)
    assert young.interval_s == pytest.approx(strategies.young_interval(30.0, HOUR))


def test_auto_interval_clamps() -> None:
    policy = cp.CheckpointPolicy(initial_save_cost_s=0.0, min_interval_s=5.0, max_interval_s=50.0)
    assert policy.interval_s == 5.0
    policy.record_save(1, 10.0)
    assert policy.interval_s == 50.0


def test_a_save_is_never_due_before_the_last_one_persisted() -> None:
    # A 0.03 s snapshot persisting 2.5 s in the background, preempted every 20 s: the formula
    # asks for a save about every second, but one due while the last is still being written
    # would wait for it, as long as a blocking save. The interval is the whole save at least.
    policy = cp.CheckpointPolicy(
        mtbf_s=20.0, initial_save_cost_s=0.03, strategy=strategies.YoungDaly(), smoothing=1.0
    )
    policy.record_save(10, 0.03, persisted=False)
    policy.record_persist(2.5)
    raw = strategies.daly_interval(0.03, 20.0)
    assert raw < 2.5 and policy.interval_s == 2.5
    assert policy.explain().endswith("clamped to 2.5 s")
    policy.record_persist(0.1)  # a faster store: the formula's interval again
    assert policy.save_total_s < raw and policy.interval_s == pytest.approx(raw)


def test_observed_preemptions_update_mtbf() -> None:
    policy = cp.CheckpointPolicy(mtbf_s=HOUR, initial_save_cost_s=30.0)
    assert policy.mtbf_s == HOUR
    policy.observe(preemptions=3, run_seconds=HOUR)
    assert policy.mtbf_s == 2 * HOUR / 4
    assert policy.interval_s == pytest.approx(strategies.daly_interval(30.0, HOUR / 2))


def test_state_dict_round_trip() -> None:
    policy = cp.CheckpointPolicy(mtbf_s=HOUR)
    policy.record_save(3, 2.0)
    policy.observe(2, 500.0)
    restored = cp.CheckpointPolicy(mtbf_s=HOUR)
    restored.load_state_dict(policy.state_dict())
    assert restored.state_dict() == policy.state_dict()
    assert restored.interval_s == policy.interval_s


def test_save_fits_notice() -> None:
    # the whole save times the 1.1 margin must fit in the 30 s notice: 27.27 * 1.1 = 29.997
    assert cp.CheckpointPolicy(initial_save_cost_s=27.27).save_fits_notice()
    assert not cp.CheckpointPolicy(initial_save_cost_s=27.28).save_fits_notice()
    assert cp.CheckpointPolicy(initial_save_cost_s=50.0).save_fits_notice(notice_s=120.0)
    assert not cp.CheckpointPolicy(initial_save_cost_s=20.0, notice_margin=2.0).save_fits_notice()
    policy = cp.CheckpointPolicy(initial_save_cost_s=1.0)
    policy.record_save(5, 2.0, persisted=False)  # the snapshot blocked 2 s ...
    assert policy.save_fits_notice()
    policy.record_persist(28.0)  # ... but the whole save took 28 s
    assert (policy.save_cost_s, policy.save_total_s) == (2.0, 28.0)
    assert not policy.save_fits_notice()


def test_parse() -> None:
    assert cp.CheckpointPolicy.parse("auto").mode == "auto"
    assert cp.CheckpointPolicy.parse(" AUTO ").mode == "auto"
    assert cp.CheckpointPolicy.parse("12.5").interval_s == 12.5
    with pytest.raises(errors.UserError, match="neither 'auto' nor seconds"):
        cp.CheckpointPolicy.parse("often")
    with pytest.raises(errors.UserError, match="every_seconds"):
        cp.CheckpointPolicy.parse("0")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"every_steps": 1, "every_seconds": 1.0},
        {"every_steps": 0},
        {"every_seconds": -1.0},
        {"formula": "fastest"},
        {"smoothing": 0.0},
        {"mtbf_s": 0.0},
        {"notice_s": -1.0},
        {"notice_margin": 0.9},
    ],
)
def test_bad_policy_settings(kwargs: dict) -> None:
    with pytest.raises(errors.UserError):
        cp.CheckpointPolicy(**kwargs)


def _wait_for(notice: trainer_notice.PreemptionNotice) -> bool:
    deadline = time.monotonic() + 2.0
    while not notice.requested and time.monotonic() < deadline:
        time.sleep(0.001)
    return notice.requested


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGUSR1])
def test_notice_turns_signals_into_a_flag_and_restores_handlers(sig: signal.Signals) -> None:
    seen = []
    before = signal.signal(sig, lambda signum, frame: seen.append(signum))
    try:
        notice = trainer_notice.PreemptionNotice()
        with notice:
            assert notice.installed and not notice.requested
            signal.raise_signal(sig)
            assert _wait_for(notice)
            assert (notice.received, notice.reason) == (sig, sig.name)
            signal.raise_signal(sig)  # a second signal keeps the first reason
            assert notice.received == sig
        assert not notice.installed
        signal.raise_signal(sig)  # the previous handler is back
        assert seen == [sig]
    finally:
        signal.signal(sig, before)


def test_notice_signals_are_configurable() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with trainer_notice.PreemptionNotice([signal.SIGUSR2]) as notice:
        assert signal.getsignal(signal.SIGTERM) is before
        signal.raise_signal(signal.SIGUSR2)
        assert _wait_for(notice) and notice.reason == "SIGUSR2"
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL


def test_notice_request_and_clear() -> None:
    notice = trainer_notice.PreemptionNotice()
    notice.request("metadata server says preempted")
    assert notice.requested and notice.received is None
    assert notice.reason == "metadata server says preempted"
    notice.clear()
    assert not notice.requested and notice.reason == ""


def test_notice_install_is_idempotent_and_main_thread_only() -> None:
    notice = trainer_notice.PreemptionNotice()
    before = signal.getsignal(signal.SIGTERM)
    notice.install()
    notice.install()
    notice.uninstall()
    assert signal.getsignal(signal.SIGTERM) is before
    failures = []

    def install_in_thread() -> None:
        try:
            trainer_notice.PreemptionNotice().install()
        except errors.UserError as exc:
            failures.append(str(exc))

    thread = threading.Thread(target=install_in_thread)
    thread.start()
    thread.join()
    assert failures == ["install the preemption notice from the main thread"]


def test_exit_code_is_distinct() -> None:
    assert contract.EXIT_PREEMPTED == 128 + signal.SIGTERM
    assert contract.EXIT_PREEMPTED not in {
        0,
        errors.EXIT_USER_ERROR,
        errors.EXIT_INTERNAL_ERROR,
        errors.EXIT_TRANSIENT_ERROR,
    }
