"""A scaled emulator run replayed in the simulation: its own preemptions, its measured costs.

The bound a scaled run is held to should come from the run's own trace, as the goodput grid's
bound does ("the best fixed interval in hindsight on the very preemptions of each seed"). So
the run is replayed at its own scale:

* **The preemptions** are the emulator's plan draws (``vertex_emulator.slurm.preemption``): the
  k-th run of the job gets the k-th exponential delay of the plan's seed, from the run's start
  to its SIGTERM; the SIGKILL follows after the notice (at once for an unannounced one, the
  plan's own draw); at most ``max_count`` preemptions, later runs go unpreempted. The delays
  depend only on the run's ordinal, never on the policy, so every policy meets the same trace.
* **Each run** starts with the measured start-up (interpreter, rendezvous, checkpoint reload),
  during which a preemption may come as on the emulator, then trains with the measured step time
  and save costs (``sim.train_until``: the notice seen at a step boundary, a save waits for a
  persist in flight, a checkpoint counts once written before the SIGKILL).
* **Between runs** the measured restart gap (SIGKILL to the next run's start); **after the
  last step** the measured tail (the final save, the model write, the exit), which every policy
  pays alike.

Billed time runs from the first start to the end, restart gaps included: the scaled benchmark's
"elapsed" billing, in which a 2-node job's surviving node waits, billed, through every restart.
The work to do is the wall time of the steps the model holds (the step log's, the loop's work
between two steps included); goodput is the run's own useful time (``useful_s``) over the
billed time, as the benchmark measures it. The bound is the best of fixed intervals
(the grid's sweep, divided by the scale) and notice-only saves; ours is the notice-first policy
as the trainer builds it, told the job's mean time between preemptions.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence

from benchmarks.goodput import grid, sim
from vsp.components.runtime.trainer import policy as checkpoint_policy
from vsp.vertex_emulator.slurm import preemption


@dataclasses.dataclass(frozen=True)
class Trace:
    """One seed's run, as measured (seconds).

    Attributes:
        delays: The plan's delay from each run's start to its SIGTERM, by run ordinal (as
            many as the plan fires at most).
        announced: Whether each of the plan's preemptions comes with its notice, by ordinal.
        work_s: Useful training the run needed (its steps times the measured step time).
        startup_s: A run's start to its first step.
        gap_s: A SIGKILL to the next run's start.
        tail_s: The last step's end to the job's end.
        notice_s: SIGTERM to SIGKILL.
        block_s: Training held by a save.
        persist_s: A save's write after the block (0 for a blocking save).
        step_s: One training step.
        mtbf_s: The mean time between preemptions the trainer is told (the job's).
        useful_s: The run's own measure of its useful time, the goodput's numerator, when it
            counts less than the steps' wall time ``work_s`` (the numpy example's
            ``train_seconds`` leaves out the loop's work between steps); None: ``work_s``.
    """

    delays: tuple[float, ...]
    announced: tuple[bool, ...]
    work_s: float
    startup_s: float
    gap_s: float
    tail_s: float
    notice_s: float
    block_s: float
    persist_s: float
    step_s: float
    mtbf_s: float
    useful_s: float | None = None

    @classmethod
    def from_plan(
        cls, seed: int, mean_s: float, max_count: int, unannounced_share: float, **costs: float
    ) -> Trace:
        """The trace of the emulator's Poisson plan of ``seed`` with the measured ``costs``."""
        plan = {"seed": seed, "unannounced_share": unannounced_share}
        return cls(
            delays=tuple(preemption.poisson_delays(seed, mean_s, max_count)),
            announced=tuple(not preemption.is_unannounced(plan, k) for k in range(max_count)),
            **costs,
        )


def _scenario(trace: Trace) -> sim.Scenario:
    return sim.Scenario(
        "replay",
        mtbf_s=trace.mtbf_s,
        restart_s=trace.gap_s,
        notice_s=trace.notice_s,
        block_s=trace.block_s,
        persist_s=trace.persist_s,
        step_s=trace.step_s,
        p_no_notice=0.0,
        work_s=trace.work_s,
    )


def ours(trace: Trace) -> checkpoint_policy.CheckpointPolicy:
    """The notice-first policy as the trainer builds it (the job's MTBF, the notice), fed the
    measured save and step (``sim.make_policy``)."""
    return sim.make_policy("ours", _scenario(trace))


def replay(trace: Trace, policy, seed: int = 0) -> sim.Tally:
    """The run under ``policy`` (``interval_s`` and ``observe(preemptions, billed_s)``; None:
    notice saves only) on the trace; ``seed`` draws where in a step each notice is seen."""
    sc, rng, tally = _scenario(trace), random.Random(seed), sim.Tally()
    committed, run, trained = 0.0, 0, 0  # trained: preemptions after training began
    while True:
        preempted = run < len(trace.delays)
        announced = preempted and trace.announced[run]
        sigkill = math.inf
        if preempted:
            sigkill = trace.delays[run] + (trace.notice_s if announced else 0.0)
        offset = rng.random() * trace.step_s
        # From the start of training: the start-up before it is exposed to the preemption.
        hard_stop = sigkill - trace.startup_s
        seen = max(0.0, hard_stop - trace.notice_s) + offset if announced else math.inf
        tally.billed += min(trace.startup_s, sigkill)
        tally.restart += min(trace.startup_s, sigkill)
        if hard_stop <= 0:  # gone while starting: nothing trained, nothing to save
            tally.preemptions += 1
        else:
            committed, done, ended = sim.train_until(sc, policy, committed, tally, hard_stop, seen)
            tally.billed += ended
            if done:
                tally.billed += trace.tail_s
                tally.useful = committed if trace.useful_s is None else trace.useful_s
                tally.finished = True
                return tally
            trained += 1
        tally.billed += trace.gap_s
        tally.restart += trace.gap_s
        run += 1
        if policy is not None:
            policy.observe(tally.preemptions, tally.billed)
            if hasattr(policy, "observe_notices"):
                # What the next process reads from the checkpoint history: a run gone while
                # starting wrote no line there; one without a landed notice save counts failed.
                landed = tally.notice_saves_landed
                policy.observe_notices(landed, trained - landed)


def bound(trace: Trace, intervals: Sequence[float], seed: int = 0) -> tuple[float, float | None]:
    """The best goodput of a fixed interval (of ``intervals``, s) or notice-only saves on the
    trace, and that interval (None: notice-only)."""
    sweep = {None: replay(trace, None, seed).goodput}
    for interval in intervals:
        sweep[interval] = replay(trace, grid.FixedInterval(interval), seed).goodput
    best = max(sweep, key=sweep.get)
    return sweep[best], best
