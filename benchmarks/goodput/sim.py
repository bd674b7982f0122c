"""Discrete-event simulation of a training run under Spot preemption, for checkpoint policies.

Model (all times in seconds of billed node time):

* The run needs ``work_s`` of useful training. Preemptions come after an exponential time with
  mean ``mtbf_s`` of running (the clock starts when training starts, after the restart).
* A preemption is announced ``notice_s`` before the hard stop, except with probability
  ``p_no_notice`` (the notice is missed): then the hard stop comes unannounced. The VM is billed
  until the hard stop. The trainer sees the notice at its next step boundary (uniform in
  ``[0, step_s)`` later), stops training, waits for a persist in flight, then saves.
* A save blocks training ``block_s`` (the whole save when blocking; the snapshot when async),
  then persists in the background for ``persist_s``; the checkpoint counts once its manifest is
  written (``block_s + persist_s`` after the save starts) before the hard stop. A periodic save
  waits for the previous persist first (the training it blocks is counted).
* After each preemption the next attempt pays ``restart_s`` (boot, reload) before training.
* The periodic interval comes from the project's ``CheckpointPolicy`` (strategy given), fed the
  measured costs, the observed preemption count and run time, and after each attempt the notice
  saves resumed from and the preemptions without one, as the trainer reads them from the
  checkpoint history at its start.

Goodput = ``work_s`` / billed time. The overheads are reported one by one and add up exactly:
billed = work + restart + after notice (from the step boundary that saw the notice to the hard
stop: waiting, the notice save, idle) + save blocking + work lost (training redone).
"""

from __future__ import annotations

import dataclasses
import math
import random

from vsp.components.runtime.trainer import policy as checkpoint_policy
from vsp.components.runtime.trainer import strategies


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One setting of the simulation (seconds; probabilities in [0, 1])."""

    name: str
    mtbf_s: float = 3600.0
    restart_s: float = 120.0
    notice_s: float = 30.0
    block_s: float = 2.0
    persist_s: float = 24.0
    step_s: float = 1.0
    p_no_notice: float = 0.02
    work_s: float = 1000 * 3600.0


@dataclasses.dataclass
class Tally:
    """Billed time split by where it went, in seconds."""

    billed: float = 0.0
    restart: float = 0.0
    after_notice: float = 0.0
    save_block: float = 0.0
    lost: float = 0.0
    preemptions: int = 0
    notice_saves_failed: int = 0
    notice_saves_landed: int = 0
    periodic_saves: int = 0
    useful: float = 0.0
    finished: bool = False

    @property
    def goodput(self) -> float:
        """Useful training time over billed time."""
        return self.useful / self.billed


def make_policy(kind: str, sc: Scenario) -> checkpoint_policy.CheckpointPolicy | None:
    """The policy of ``kind``: "young-daly", "ours" (notice-first) or "notice-only" (None)."""
    if kind == "notice-only":
        return None
    strategy = strategies.YoungDaly() if kind == "young-daly" else strategies.NoticeFirst()
    policy = checkpoint_policy.CheckpointPolicy(
        mtbf_s=sc.mtbf_s, strategy=strategy, notice_s=sc.notice_s, initial_save_cost_s=sc.block_s
    )
    policy.record_save(0, sc.block_s, persisted=False)
    policy.record_persist(sc.block_s + sc.persist_s)
    policy.record_step(sc.step_s)
    return policy


def _attempt(
    sc: Scenario, rng: random.Random, policy, committed: float, tally: Tally
) -> tuple[float, bool]:
    """One attempt from ``committed`` progress; returns (new committed progress, finished)."""
    hard_stop = rng.expovariate(1.0 / sc.mtbf_s)
    announced = rng.random() >= sc.p_no_notice
    notice = max(0.0, hard_stop - sc.notice_s) if announced else math.inf
    seen = notice + rng.random() * sc.step_s if announced else math.inf
    committed, finished, ended = train_until(sc, policy, committed, tally, hard_stop, seen)
    if finished:
        tally.billed += ended
    else:
        tally.billed += ended + sc.restart_s
        tally.restart += sc.restart_s
    return committed, finished


def train_until(
    sc: Scenario,
    policy,
    committed: float,
    tally: Tally,
    hard_stop: float,
    seen: float,
) -> tuple[float, bool, float]:
    """Training from ``committed`` progress until the work is done or the hard stop.

    Times count from the start of training. The trainer sees the notice at ``seen`` (inf: no
    notice) and the node is gone at ``hard_stop`` (inf: never). The tally's overheads and
    counts are updated, its billed time is not: the caller adds the attempt's end.

    Returns:
        (committed progress, finished, the attempt's end: when the work was done, or the hard
        stop).
    """
    t, progress = 0.0, committed
    inflight: tuple[float, float] | None = None  # (manifest time, progress saved)
    next_save = policy.interval_s if policy is not None else math.inf

    def settle(now: float) -> None:
        nonlocal committed, inflight
        if inflight is not None and inflight[0] <= now:
            committed, inflight = max(committed, inflight[1]), None

    while True:
        finish = t + (sc.work_s - progress)
        first = min(finish, next_save, seen, hard_stop)
        progress += first - t
        t = first
        settle(t)
        if first == finish and finish < min(seen, hard_stop):
            return sc.work_s, True, t
        if first == next_save and next_save < min(seen, hard_stop):
            start = max(t, inflight[0]) if inflight else t
            stop = min(start + sc.block_s, seen, hard_stop)
            tally.save_block += stop - t
            snapshot, t = progress, stop
            settle(t)
            next_save = math.inf  # a save cut short by the notice or the hard stop
            if t < min(seen, hard_stop):
                inflight = (t + sc.persist_s, snapshot)
                tally.periodic_saves += 1
                policy.observe(tally.preemptions, tally.billed + t)
                next_save = t + policy.interval_s
            continue
        break
    # the notice (seen at a step boundary) or an unannounced hard stop
    tally.preemptions += 1
    if t < hard_stop:  # noticed: stop training, wait for the persist in flight, save
        start = max(t, inflight[0]) if inflight else t
        settle(min(start, hard_stop))
        if committed < progress and start + sc.block_s + sc.persist_s <= hard_stop:
            committed = progress
            tally.notice_saves_landed += 1
        elif committed < progress:
            tally.notice_saves_failed += 1
    else:
        tally.notice_saves_failed += int(seen < math.inf)
    tally.after_notice += hard_stop - t
    tally.lost += progress - committed
    return committed, False, hard_stop


def simulate(sc: Scenario, kind: str, seed: int, *, max_billed_factor: float = 20.0) -> Tally:
    """Runs the scenario to ``work_s`` of useful training under the policy ``kind``.

    A policy that cannot finish (e.g. notice-only saves that never fit in the notice) is stopped
    once ``max_billed_factor * work_s`` is billed; ``useful`` then holds the progress kept.
    """
    return simulate_with(sc, make_policy(kind, sc), seed, max_billed_factor=max_billed_factor)


def simulate_with(sc: Scenario, policy, seed: int, *, max_billed_factor: float = 20.0) -> Tally:
    """``simulate`` with a given policy object: anything with ``interval_s`` (seconds between
    periodic saves) and ``observe(preemptions, billed_s)``; ``None`` saves only on notices."""
    rng, tally = random.Random(seed), Tally()
    committed, done = 0.0, False
    while not done and tally.billed < max_billed_factor * sc.work_s:
        committed, done = _attempt(sc, rng, policy, committed, tally)
        if policy is not None:
            policy.observe(tally.preemptions, tally.billed)
            # What the trainer reads from the checkpoint history at its next start: notice saves
            # resumed from, and preemptions without one (``history.notice_outcomes``).
            if hasattr(policy, "observe_notices"):
                landed = tally.notice_saves_landed
                policy.observe_notices(landed, tally.preemptions - landed)
    tally.useful, tally.finished = committed, done
    return tally


def daly_goodput(sc: Scenario) -> float:
    """Daly's (2006) analytic goodput of periodic saves only: ``tau / (M e^(R/M) (e^((tau+C)/M)
    - 1))`` with ``C`` the blocking save cost and ``tau`` Daly's interval."""
    c, m, r = sc.block_s, sc.mtbf_s, sc.restart_s
    tau = strategies.daly_interval(c, m)
    return tau / (m * math.exp(r / m) * math.expm1((tau + c) / m))
