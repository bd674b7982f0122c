"""The poll plans of many jobs on one cluster, merged: one list call
(``GET /slurm/v0.0.42/jobs``) answers for every job whose plan wants a Vertex call.

The training step supervises one job, so it does not use this; the polling benchmark's
simulation (``benchmarks/polling/sim.py``) measures what sharing would save.
"""

from __future__ import annotations

from vsp.components.runtime.training.beacon import Beacon
from vsp.components.runtime.training.poll_plan import PlanSettings, PollPlan


class SharedPlan:
    """The plans of many jobs on one cluster: one list call serves every job that wants one.

    Args:
        settings: Intervals shared by every job's plan.
    """

    def __init__(self, settings: PlanSettings):
        self.settings = settings
        self.plans: dict[str, PollPlan] = {}
        self.calls = 0

    def look(self, now: float, beacons: dict[str, Beacon | None]) -> bool:
        """Reads each job's beacon; True when one list call should be made now."""
        wanted = False
        for job, beacon in beacons.items():
            plan = self.plans.setdefault(job, PollPlan(self.settings))
            wanted = plan.look(now, beacon) or wanted
        return wanted

    def called(self, now: float, states: dict[str, str]) -> None:
        """Records one list call at ``now`` answering ``states`` for every job."""
        self.calls += 1
        for job, state in states.items():
            self.plans.setdefault(job, PollPlan(self.settings)).called(now, state)
