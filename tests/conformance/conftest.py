"""The two Slurm backends the conformance suite runs every scenario on.

* ``emulated``: the emulator's own Slurm, shaped as the real one (``like_the_real_slurm``: one
  Spot node under both partitions, ``ondemand`` preempting ``spot``).
* ``real``: the same emulator forwarding ``:callSlurmRestApi`` to a real Slurm 24.11 slurmrestd
  (``$VSP_REAL_SLURMRESTD``), whose partitions are also ``spot`` and ``ondemand``.

Both preempt a running job by each mechanism (``SlurmBackend.preempt``): ``partition`` (an
``ondemand`` job that needs the node, submitted through the Slurm API), ``requeue`` (``scontrol
requeue``; in the emulator ``app.slurm.requeue_now``) and ``spot`` (the Spot VM lost: the
emulator reclaims it, with the 30 s notice scaled down; on the real Slurm the node is set DOWN
through the Slurm API, which is what Slurm sees of a lost VM).

Without ``$VSP_REAL_SLURMRESTD`` the real half is skipped with a message that says how to
enable it (pytest's ``-ra`` prints it). Start the real Slurm with ``VSP_SLURM_CRED_EXPIRE=10``
or a requeued job waits about 121 s before it runs again; ``stock_requeue_hold`` tells the
scenario that measures that wait which backend has it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import os
import pathlib
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import rest
from vsp.components.runtime.slurm import api
from vsp.components.runtime.slurm import job as slurm_job
from vsp.vertex_emulator.slurm import real as real_slurm

CLUSTER_ID = "conf"
ENABLE_REAL = (
    "real-Slurm half skipped: $VSP_REAL_SLURMRESTD is not set. Enable it with "
    "../shared/real-slurm/build.sh, then VSP_SLURM_CRED_EXPIRE=10 ../shared/real-slurm/start.sh "
    "DIR and `. DIR/env.sh` (docs/real-slurm.md)."
)
# Emulated timings close enough to the real Slurm's to observe the same states.
EMULATED_SETTINGS = {
    "slurm_requeue_delay_seconds": 2.0,
    "slurm_kill_wait_seconds": 1.0,
    "slurm_preempt_notice_seconds": 1.0,
    "slurm_node_recovery_seconds": 0.5,
    "slurm_node_return_seconds": 1.0,
}
# A 2-node job's notice save (three barriers of two ranks and a collective write) needs the
# scheduler to run both ranks: 1 s did not always fit on a loaded 2-core machine (a missing
# notice save in one CI run). The real Slurm's preemption gives KillWait (5 s).
MULTINODE_NOTICE = {"slurm_preempt_notice_seconds": 3.0}
# How long the preempting ``ondemand`` job holds the node (the real injector's job: 15 s).
EMULATED_PREEMPTOR_SECONDS = 5
# What ``preempt(mechanism)`` makes the real Slurm's injector do.
REAL_MECHANISMS = {"spot": "node_down", "partition": "partition", "requeue": "requeue"}


def like_the_real_slurm(body: dict[str, Any]) -> None:
    """Shapes a cluster create body as start.sh shapes the real Slurm: one Spot node, the
    ``ondemand`` partition (tier 10, never preempted) over it beside ``spot`` (tier 1,
    PreemptMode REQUEUE), preemption at once (no PreemptExemptTime)."""
    for pool in body["nodePools"]:
        if pool["id"] == "spot":
            pool["scalingSpec"]["maxNodeCount"] = 1
    slurm = body["orchestratorSpec"]["slurmSpec"]
    for partition in slurm["partitions"]:
        if partition["id"] == "ondemand":
            partition["nodePoolIds"] = ["spot"]
            partition["config"]["PreemptMode"] = "OFF"
    slurm["config"].pop("PreemptExemptTime")


@dataclasses.dataclass
class SlurmBackend:
    """One backend under test.

    Attributes:
        kind: ``emulated`` or ``real``.
        server: The emulator (which forwards to the real Slurm for ``real``).
        client: The project's Slurm client, through ``:callSlurmRestApi``.
        workdir: A folder of this machine that the jobs see at the same path.
        timeout: Seconds a scenario waits for a state (a real requeue waits ``cred_expire``).
    """

    kind: str
    server: Any
    client: api.SlurmClient
    workdir: pathlib.Path
    timeout: float

    def preempt(self, job_id: int, mechanism: str) -> dict[str, Any]:
        """Preempts a running job by ``mechanism`` (see the module); returns the timeline entry."""
        slurm = self.server.app.slurm
        if self.kind == "real":
            slurm.real.mechanism = REAL_MECHANISMS[mechanism]
            return slurm.preempt_now(CLUSTER_ID, job_id)
        if mechanism == "spot":
            return slurm.preempt_now(CLUSTER_ID, job_id)
        if mechanism == "requeue":
            return slurm.requeue_now(CLUSTER_ID, job_id)
        assert mechanism == "partition", mechanism
        body = {
            "job": {
                "name": f"vsp-preemptor-{job_id}",
                "partition": "ondemand",
                "current_working_directory": "/tmp",
                "environment": ["PATH=/usr/bin:/bin"],
                "script": f"#!/bin/bash\nsleep {EMULATED_PREEMPTOR_SECONDS}\n",
            }
        }
        answer = self.client.call(
            "POST", self.client.slurm_path("job/submit"), body, idempotent=False
        )
        assert answer.ok, answer.describe_errors()
        return slurm.preemptions(CLUSTER_ID)[-1]

    def wait(
        self,
        job_id: int,
        predicate: Callable[[slurm_job.JobInfo], bool],
        timeout: float | None = None,
        seen: list[slurm_job.JobInfo] | None = None,
    ) -> slurm_job.JobInfo:
        """Polls ``get_job`` every 0.2 s until ``predicate``; records every answer in ``seen``."""
        deadline = time.monotonic() + (timeout or self.timeout)
        job = None
        while time.monotonic() < deadline:
            job = self.client.get_job(job_id)
            if seen is not None:
                seen.append(job)
            if predicate(job):
                return job
            time.sleep(0.2)
        raise AssertionError(f"job {job_id} did not reach the expected state: {job}")

    def finish(self, job_id: int, timeout: float | None = None) -> slurm_job.JobInfo:
        """Waits until the job is terminal."""
        return self.wait(job_id, lambda j: j.is_terminal, timeout)


@pytest.fixture
def real_slurmrestd() -> str:
    """The real slurmrestd's address; skips, saying how to enable it, when there is none."""
    address = os.environ.get(real_slurm.ADDRESS_ENV, "")
    if not address:
        pytest.skip(ENABLE_REAL)
    return address


# Several real Slurms can serve the suite: their start.sh folders, separated by ``:``. Each
# test worker then takes a free one instead of waiting for the other worker's scenario.
POOL_ENV = "VSP_REAL_SLURM_POOL"
# What a real Slurm's env.sh sets and a scenario needs: the REST addresses and its token, and
# ``SLURM_CONF``/``PATH`` for ``scontrol requeue``.
_INSTANCE_VARIABLES = (
    "SLURM_CONF",
    "PATH",
    real_slurm.ADDRESS_ENV,
    "VSP_REAL_SLURMRESTD_URL",
    real_slurm.USER_ENV,
    real_slurm.TOKEN_ENV,
)


def _instances(address: str) -> list[dict[str, str]]:
    """The environments of the real Slurms in the pool (``$VSP_REAL_SLURM_POOL``).

    Without a pool, the one real Slurm of this environment (``address``), as it is.
    """
    folders = [f for f in os.environ.get(POOL_ENV, "").split(os.pathsep) if f]
    if not folders:
        return [{real_slurm.ADDRESS_ENV: address}]
    return instance_environments(folders)


def instance_environments(folders: list[str]) -> list[dict[str, str]]:
    """What each start.sh folder's ``env.sh`` sets of ``_INSTANCE_VARIABLES``."""
    instances = []
    for folder in folders:
        env_file = pathlib.Path(folder) / "env.sh"
        done = subprocess.run(
            ["bash", "-c", '. "$1" && env -0', "env", str(env_file)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"${POOL_ENV}: cannot source {env_file}: {done.stderr.strip()}")
        values = dict(item.split("=", 1) for item in done.stdout.split("\0") if "=" in item)
        instances.append({k: values[k] for k in _INSTANCE_VARIABLES if k in values})
    return instances


@contextlib.contextmanager
def exclusive_real_slurm(
    address: str, instances: list[dict[str, str]] | None = None
) -> Iterator[str]:
    """Holds one real Slurm of the pool for a scenario, against the other test workers.

    A scenario owns its Slurm's node and queue (a partition preemption takes the whole node,
    and each scenario cancels what it leaves behind), so no two scenarios share one: an
    exclusive ``flock`` on a file named for the instance's address, kept from before the
    scenario's first request until after its clean-up. With a pool (``$VSP_REAL_SLURM_POOL``)
    a worker takes the first free instance, starting from its own, and waits only when every
    instance is busy; the scenario's environment then names that instance.

    Args:
        address: The environment's slurmrestd address (used without a pool).
        instances: The instances to choose from (None = the pool).

    Yields:
        The held instance's slurmrestd address.
    """
    instances = instances or _instances(address)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    start = int(worker) % len(instances) if worker.isdigit() else 0
    order = instances[start:] + instances[:start]
    with contextlib.ExitStack() as stack:
        held = None
        for blocking in (False, True):
            for instance in order if not blocking else order[:1]:
                name = hashlib.sha256(instance[real_slurm.ADDRESS_ENV].encode()).hexdigest()
                path = pathlib.Path(tempfile.gettempdir()) / f"vsp-real-slurm-{name[:16]}.lock"
                lock = stack.enter_context(open(path, "w"))
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
                except BlockingIOError:
                    continue
                held = instance
                break
            if held is not None:
                break
        saved = {key: os.environ.get(key) for key in held}
        os.environ.update(held)
        try:
            yield held[real_slurm.ADDRESS_ENV]
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


@pytest.fixture
def held_real_slurm(real_slurmrestd) -> Iterator[str]:
    """A real slurmrestd's address, held for this test alone (``exclusive_real_slurm``)."""
    with exclusive_real_slurm(real_slurmrestd) as address:
        yield address


@pytest.fixture(params=["emulated", "real"])
def slurm_backend(request, slurm_cluster, tmp_path) -> Iterator[SlurmBackend]:
    """See the module docstring."""
    kind = request.param
    with contextlib.ExitStack() as held:
        if kind == "real":
            address = request.getfixturevalue("real_slurmrestd")
            address = held.enter_context(exclusive_real_slurm(address))
            server = slurm_cluster(CLUSTER_ID, change=like_the_real_slurm, slurmrestd=address)
            timeout = 240.0
        else:
            server = slurm_cluster(CLUSTER_ID, change=like_the_real_slurm, **EMULATED_SETTINGS)
            timeout = 30.0
        ref = resource.ClusterRef("test-project", "us-central1", CLUSTER_ID)
        client = api.SlurmClient(rest.VertexRestClient("us-central1"), ref)
        workdir = tmp_path / "work"
        workdir.mkdir()
        os.chmod(tmp_path, 0o755)
        yield SlurmBackend(kind, server, client, workdir, timeout)
        if kind == "real":  # leave the shared real Slurm as found, before letting it go
            for job in client.list_jobs():
                if job.name.startswith(("conf-", "vsp-preemptor-")) and not job.is_terminal:
                    client.cancel(job.job_id)
            _resume_nodes(client)


def _resume_nodes(client: api.SlurmClient) -> None:
    """Returns any node a scenario left DOWN (it usually registers again by itself)."""
    nodes = client.read(client.slurm_path("nodes"), "nodes").get("nodes") or []
    for node in nodes:
        if "DOWN" in (node.get("state") or []):
            body = {"state": ["RESUME"]}
            client.call("POST", client.slurm_path(f"node/{node['name']}"), body, idempotent=True)


# The start.sh folder of a real Slurm with two nodes or more (VSP_SLURM_NODES=2), for the
# multi-node scenarios; the pool's single-node Slurms cannot run them.
MULTI_ENV = "VSP_REAL_SLURM_MULTI"
ENABLE_MULTI = (
    "real-Slurm multi-node half skipped: $VSP_REAL_SLURM_MULTI is not set. Enable it with "
    "VSP_SLURM_MULTI=1 ../shared/real-slurm/build.sh, then VSP_SLURM_CRED_EXPIRE=10 "
    "VSP_SLURM_NODES=2 ../shared/real-slurm/start.sh DIR and export VSP_REAL_SLURM_MULTI=DIR "
    "(docs/multi-node.md)."
)


@pytest.fixture(params=["emulated", "real"])
def multinode_backend(request, slurm_cluster, tmp_path) -> Iterator[SlurmBackend]:
    """Like ``slurm_backend`` with at least two nodes: the emulated cluster's four Spot nodes,
    or a real one of ``$VSP_REAL_SLURM_MULTI`` (start.sh folders separated by ``:``; held for
    the test alone).

    ``environment["PATH"]`` in the backend's ``job_path`` is what jobs need to find ``srun``.
    """
    kind = request.param
    with contextlib.ExitStack() as held:
        if kind == "real":
            # One start.sh folder, or several separated by ':' (a pool, one per test worker).
            folders = [f for f in os.environ.get(MULTI_ENV, "").split(os.pathsep) if f]
            if not folders:
                pytest.skip(ENABLE_MULTI)
            instances = instance_environments(folders)
            address = held.enter_context(
                exclusive_real_slurm(instances[0][real_slurm.ADDRESS_ENV], instances)
            )
            server = slurm_cluster(CLUSTER_ID, slurmrestd=address)
            timeout = 240.0
        else:
            server = slurm_cluster(CLUSTER_ID, **{**EMULATED_SETTINGS, **MULTINODE_NOTICE})
            timeout = 30.0
        ref = resource.ClusterRef("test-project", "us-central1", CLUSTER_ID)
        client = api.SlurmClient(rest.VertexRestClient("us-central1"), ref)
        workdir = tmp_path / "work"
        workdir.mkdir()
        os.chmod(tmp_path, 0o755)
        yield SlurmBackend(kind, server, client, workdir, timeout)
        if kind == "real":
            for job in client.list_jobs():
                if job.name.startswith("conf-") and not job.is_terminal:
                    client.cancel(job.job_id)


_TALLY: dict[str, dict[str, float]] = {}


def _backend_of(nodeid: str) -> str:
    if "[real" in nodeid or "-real" in nodeid or "/test_real_slurm_" in nodeid:
        return "real"
    return "emulated"


def pytest_runtest_logreport(report) -> None:
    """Tallies the conformance scenarios per backend (passed, failed, skipped, seconds)."""
    if "tests/conformance/" not in report.nodeid.replace("\\", "/"):
        return
    tally = _TALLY.setdefault(_backend_of(report.nodeid), {})
    tally["seconds"] = tally.get("seconds", 0.0) + report.duration
    if report.when == "call" or (report.when == "setup" and not report.passed):
        tally[report.outcome] = tally.get(report.outcome, 0) + 1


def pytest_terminal_summary(terminalreporter) -> None:
    """Prints how many scenarios each backend ran and the wall time they took."""
    for backend in sorted(_TALLY):
        tally = _TALLY[backend]
        counts = ", ".join(f"{int(tally.get(k, 0))} {k}" for k in ("passed", "failed", "skipped"))
        terminalreporter.write_line(
            f"slurm conformance, {backend} Slurm: {counts} in {tally['seconds']:.1f} s"
        )
