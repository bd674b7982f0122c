"""Shared fixtures: an in-process Vertex emulator on a free port with fast settings.

* ``emulator``: a started ``EmulatorServer`` (tmp state dir, ``FAST_SETTINGS``) with
  ``VERTEX_EMULATOR_HOST`` set to its address; stopped afterwards.
* ``emulator_factory``: ``make(state_dir=None, *, port=0, settings=None, **overrides)`` starts
  more servers (e.g. a restart on the same state dir); each one repoints ``VERTEX_EMULATOR_HOST``
  and all are stopped afterwards.
* ``emulator_api``: small ``requests`` helpers bound to ``emulator`` (URLs, create, wait for LRO);
  ``emulator_api_for(server)`` builds the same helpers for any server.
* ``emulator_clock``: freezes the ``emulator`` clock; ``advance(seconds)`` moves it, so state
  checks between transitions do not race the (real-time) delays. ``clock_of(server)`` does the
  same for a server made by a factory.
* ``cluster_body``: a fresh minimal valid cluster request body (snake_case).
* ``slurm_emulator_factory``: like ``emulator_factory`` with fast Slurm timings
  (``SLURM_SETTINGS``); at teardown it SIGKILLs every Slurm job process the servers started.
* ``slurm_cluster``: ``make(cluster_id, labels=None, change=None, **settings)`` -> a Slurm
  emulator with a RUNNING cluster from ``tests/data/cluster_full.yaml`` (trivial prolog;
  ``change(body)`` edits the create body first) whose caller has the ``ml`` association on
  ``spot`` and ``ondemand``, as ``ensure_slurm_account`` leaves it (with a ``slurmrestd``
  setting, the real Slurm behind it needs none).
"""

from __future__ import annotations

import copy
import pathlib
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from vsp.vertex_emulator import config, server

FAST_SETTINGS = config.EmulatorSettings(
    provisioning_delay_seconds=0.2,
    update_delay_seconds=0.1,
    scale_up_delay_seconds=0.1,
    delete_delay_seconds=0.1,
    tick_interval_seconds=0.05,
    slurm_requeue_delay_seconds=10.0,  # a stock Slurm holds a requeued job 121 s
)

SLURM_SETTINGS = FAST_SETTINGS.replace(
    provisioning_delay_seconds=0.05,
    slurm_kill_wait_seconds=0.3,
    slurm_preempt_notice_seconds=0.4,
    slurm_requeue_delay_seconds=0.1,
    slurm_node_recovery_seconds=0.3,
    # Each cluster's home seen by its jobs only, as on Vertex; fail rather than share silently.
    slurm_filesystem_isolation="on",
)

DATA = pathlib.Path(__file__).resolve().parent / "data"
PROJECT = "test-project"
LOCATION = "us-central1"

_CLUSTER_BODY = {
    "display_name": "test",
    "labels": {"team": "ml"},
    "network": {
        "network": f"projects/{PROJECT}/global/networks/default",
        "subnetwork": f"projects/{PROJECT}/regions/{LOCATION}/subnetworks/default",
    },
    "node_pools": [
        {
            "id": "login",
            "machine_spec": {"machine_type": "n2-standard-8"},
            "scaling_spec": {"min_node_count": 1, "max_node_count": 1},
            "zone": f"{LOCATION}-b",
        },
        {
            "id": "a4",
            "machine_spec": {
                "machine_type": "a4-highgpu-8g",
                "accelerator_type": "NVIDIA_B200",
                "accelerator_count": 8,
            },
            "provisioning_model": "SPOT",
            "scaling_spec": {"min_node_count": 0, "max_node_count": 2},
            "zone": f"{LOCATION}-b",
        },
    ],
    "orchestrator_spec": {
        "slurm_spec": {
            "home_directory_storage": f"projects/{PROJECT}/locations/{LOCATION}-b/instances/home",
            "login_node_pool_id": "login",
            "partitions": [{"id": "a4", "node_pool_ids": ["a4"], "config": {"MaxTime": "1:00:00"}}],
            "config": {"PreemptMode": "REQUEUE"},
        }
    },
}


class ManualClock:
    """A clock for ``EmulatorApp.clock`` that moves only when told to (starts at real time)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Moves the emulator's time forward."""
        self.now += seconds


class EmulatorApi:
    """Plain-``requests`` helpers for one emulator (no dependency on the project's client)."""

    def __init__(self, emulator: server.EmulatorServer):
        self.emulator = emulator

    @property
    def parent(self) -> str:
        """``projects/{PROJECT}/locations/{LOCATION}``."""
        return f"projects/{PROJECT}/locations/{LOCATION}"

    def url(self, path: str, version: str = "v1beta1") -> str:
        """Absolute URL of ``/{version}/{path}``."""
        return f"{self.emulator.base_url}/{version}/{path.lstrip('/')}"

    def clusters_url(self, cluster_id: str = "", version: str = "v1beta1") -> str:
        """URL of the cluster collection, or of one cluster."""
        suffix = f"/{cluster_id}" if cluster_id else ""
        return self.url(f"{self.parent}/modelDevelopmentClusters{suffix}", version)

    def create_cluster(self, cluster_id: str, body: dict[str, Any]) -> requests.Response:
        """POSTs a create request."""
        return requests.post(
            self.clusters_url(), params={"model_development_cluster_id": cluster_id}, json=body
        )

    def wait_operation(self, name: str, timeout: float = 5.0) -> dict[str, Any]:
        """Polls an operation until ``done`` and returns it."""
        deadline = time.monotonic() + timeout
        while True:
            response = requests.get(self.url(name))
            response.raise_for_status()
            operation = response.json()
            if operation.get("done"):
                return operation
            if time.monotonic() > deadline:
                raise AssertionError(f"operation {name} not done after {timeout} s")
            time.sleep(0.02)

    def create_running(
        self, cluster_id: str, body: dict[str, Any], clock: ManualClock | None = None
    ) -> dict[str, Any]:
        """Creates a cluster and waits until its create operation is done; returns the cluster.

        With a frozen ``clock``, moves it past the provisioning delay instead of waiting.
        """
        response = self.create_cluster(cluster_id, body)
        assert response.status_code == 200, response.text
        if clock is not None:
            clock.advance(self.emulator.settings.scaled(3600))
        operation = self.wait_operation(response.json()["name"])
        assert "error" not in operation, operation
        return requests.get(self.clusters_url(cluster_id)).json()


@pytest.fixture
def emulator_factory(tmp_path, monkeypatch):
    """Starts emulators on demand; all are stopped at teardown."""
    started: list[server.EmulatorServer] = []

    def make(
        state_dir=None,
        *,
        port: int = 0,
        settings: config.EmulatorSettings | None = None,
        **overrides: Any,
    ) -> server.EmulatorServer:
        chosen = settings or FAST_SETTINGS
        if overrides:
            chosen = chosen.replace(**overrides)
        emulator = server.EmulatorServer(
            state_dir or tmp_path / "emulator", port=port, settings=chosen
        )
        emulator.start()
        started.append(emulator)
        monkeypatch.setenv("VERTEX_EMULATOR_HOST", emulator.address)
        return emulator

    yield make
    for emulator in reversed(started):
        emulator.stop()
        # The job processes it started (own sessions) would outlive it: a test's CustomJob
        # `sleep 60` was left running after the suite.
        emulator.app.slurm.shutdown()
        emulator.app.custom_jobs.shutdown()


@pytest.fixture
def emulator(emulator_factory) -> server.EmulatorServer:
    """A started in-process emulator with fast settings; ``VERTEX_EMULATOR_HOST`` points at it."""
    return emulator_factory()


def hold_clock(emulator: server.EmulatorServer) -> ManualClock:
    """Freezes an emulator's clock; ``advance(seconds)`` moves it (no sleeping)."""
    manual = ManualClock()
    emulator.app.clock = manual
    return manual


@pytest.fixture
def emulator_clock(emulator) -> ManualClock:
    """Freezes the ``emulator`` fixture's clock; ``advance(seconds)`` moves it (no sleeping)."""
    return hold_clock(emulator)


@pytest.fixture
def clock_of():
    """``clock_of(server)`` freezes that emulator's clock and returns it (see ``hold_clock``)."""
    return hold_clock


@pytest.fixture
def emulator_api(emulator) -> EmulatorApi:
    """``requests`` helpers bound to the ``emulator`` fixture."""
    return EmulatorApi(emulator)


@pytest.fixture
def emulator_api_for():
    """Builds ``EmulatorApi`` helpers for servers made with ``emulator_factory``."""
    return EmulatorApi


@pytest.fixture
def cluster_body() -> dict[str, Any]:
    """A fresh minimal valid cluster create body (snake_case keys)."""
    return copy.deepcopy(_CLUSTER_BODY)


@pytest.fixture
def slurm_emulator_factory(emulator_factory):
    """``make(state_dir=None, **setting_overrides)`` -> a started server with ``SLURM_SETTINGS``;
    every Slurm job process group those servers started is killed at teardown."""
    started: list[server.EmulatorServer] = []

    def make(state_dir=None, **overrides: Any) -> server.EmulatorServer:
        emulator = emulator_factory(state_dir, settings=SLURM_SETTINGS, **overrides)
        started.append(emulator)
        return emulator

    yield make
    for emulator in started:
        emulator.app.slurm.shutdown()


@pytest.fixture
def slurm_cluster(slurm_emulator_factory):
    """See the module docstring."""
    from vsp.components.runtime.cluster import resource, rules
    from vsp.components.runtime.core import rest
    from vsp.components.runtime.slurm import api

    def make(
        cluster_id: str,
        labels: dict[str, str] | None = None,
        change: Callable[[dict[str, Any]], None] | None = None,
        **settings: Any,
    ) -> server.EmulatorServer:
        emulator = slurm_emulator_factory(**settings)
        body = rules.load_cluster_spec(DATA / "cluster_full.yaml").to_request_body()
        # The example prolog checks for 8 GPUs with nvidia-smi, which this machine lacks.
        body["orchestratorSpec"]["slurmSpec"]["prologBashScripts"] = ["#!/bin/bash\ntrue\n"]
        if labels:
            body["labels"] = {**body.get("labels", {}), **labels}
        if change is not None:
            change(body)
        EmulatorApi(emulator).create_running(cluster_id, body)
        ref = resource.ClusterRef(PROJECT, LOCATION, cluster_id)
        client = api.SlurmClient(rest.VertexRestClient(LOCATION), ref)
        if not settings.get("slurmrestd"):  # a real Slurm here runs without slurmdbd
            client.ensure_association("ml", client.whoami(), ["spot", "ondemand"])
        return emulator

    return make


def _start_rank(item: pytest.Item) -> int:
    """0 for scenarios on a real Slurm, 1 for other slow tests, 2 for the rest."""
    if item.get_closest_marker("slow") is None:
        return 2
    real = "[real" in item.nodeid or "/test_real_slurm_" in item.nodeid
    return 0 if real else 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Starts the long tests first, so that no worker ends the run alone on one of them.

    Longest first is the classic rule for spreading jobs over workers; the ``slow`` marker
    (real-Slurm scenarios first) stands in for the durations. pytest-xdist hands the tests out
    in this order, one at a time (``--maxschedchunk=1`` in pyproject.toml); the order within
    each rank is the collection order.
    """
    items.sort(key=_start_rank)
