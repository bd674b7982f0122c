"""What the emulated Slurm API tests share: a cluster to call, Slurm's number shape, a wait."""

from __future__ import annotations

import time

from vsp.vertex_emulator.slurm.testing import SlurmTestClient

NUM = {"set": True, "infinite": False, "number": 0}
UNSET = {"set": False, "infinite": False, "number": 0}


def start(factory, body, cluster_id="c1", **settings):
    server = factory(**settings)
    return server, SlurmTestClient.create_cluster(server.base_url, cluster_id, body)


def num(value: int) -> dict:
    return {**NUM, "number": value}


def wait_until(condition, timeout: float = 10.0) -> None:
    """Waits (wall clock) until ``condition()`` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)
