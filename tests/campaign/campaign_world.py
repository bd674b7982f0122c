"""The fault campaign's world: one in-process emulator per batch of plans, fast clients, kills.

A ``World`` owns a state directory and an ``EmulatorServer`` with tiny delays, points
``VERTEX_EMULATOR_HOST`` at it and, while open, makes every ``VertexRestClient`` built without
explicit arguments fast (short retry deadline and HTTP timeout) and killable: a request made by
a thread whose ``KillToken`` is set raises ``Killed`` (a ``BaseException``, like a SIGKILL it
is caught by no handler of the runtime), so the step stops at its next request boundary while
a request already sent still reaches the server. ``restart()`` stops the server and starts a
new one on the same state directory and port.

Every request the emulator serves is logged in arrival order (``requests_since``) and counted
while it is being handled, so ``settle()`` can wait until no held or in-flight request is left
(a step's abandoned request that the emulator applies late has landed) before the invariants
are read. A long-lived job of another run (``foreign_job``) sits on the batch's Slurm cluster
for every plan: no entry point may cancel, count or adopt it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import numpy
import requests

from vsp.components.runtime.cluster import resource, rules
from vsp.components.runtime.core import polling, rest
from vsp.components.runtime.slurm import api
from vsp.components.runtime.trainer import model_files
from vsp.components.runtime.training.backends import slurm as slurm_backend
from vsp.components.runtime.training.recovery import Target
from vsp.vertex_emulator import config, server

PROJECT, LOCATION = "test-project", "us-central1"
DATA = pathlib.Path(__file__).resolve().parents[1] / "data"
CLIENT_TIMEOUT = 0.5  # seconds of one HTTP request; a ``timeout`` fault holds longer
RETRY = rest.RetryPolicy(initial=0.01, maximum=0.05, deadline=4.0)
BACKOFF = polling.Backoff(initial=0.02, maximum=0.1, jitter=0)
SETTINGS = config.EmulatorSettings(
    provisioning_delay_seconds=0.05,
    update_delay_seconds=0.03,
    scale_up_delay_seconds=0.03,
    delete_delay_seconds=0.03,
    tick_interval_seconds=0.02,
    slurm_kill_wait_seconds=0.2,
    slurm_preempt_notice_seconds=0.2,
    slurm_requeue_delay_seconds=0.1,
    slurm_node_recovery_seconds=0.2,
)
# A lost submit answer is looked up after a pause longer than a ``timeout`` fault holds the
# request (as the production pause of 2 s is), so a late-applied submit shows.
SUBMIT_BACKOFF = polling.Backoff(initial=0.5, maximum=0.5, jitter=0)
SLURM_CLUSTER = "slurmc"
FOREIGN_TARGET = Target("spot", spot=True)
FOREIGN_RUN = "run-foreign"
FOREIGN_KEY = "key-foreign"


@dataclasses.dataclass(frozen=True)
class Seen:
    """One request the emulator received: arrival order, method, path and body text."""

    number: int
    method: str
    path: str
    query: str
    body: str


class Killed(BaseException):
    """The step's process was killed (raised at a request boundary of a killed thread)."""


@dataclasses.dataclass
class KillToken:
    """Set ``killed`` to kill the thread that carries this token."""

    killed: bool = False


_local = threading.local()


class KillableSession(requests.Session):
    """A session whose requests raise ``Killed`` once the calling thread's token is set."""

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:  # noqa: D102
        token = getattr(_local, "token", None)
        if token is not None and token.killed:
            raise Killed()
        response = super().request(*args, **kwargs)
        if token is not None and token.killed:
            raise Killed()
        return response


def carry(token: KillToken | None) -> None:
    """Makes the calling thread carry ``token`` (None: never killed)."""
    _local.token = token


def cluster_body() -> dict[str, Any]:
    """The example cluster's request body, with a trivial prolog (no GPUs here)."""
    body = rules.load_cluster_spec(DATA / "cluster_full.yaml").to_request_body()
    body["orchestratorSpec"]["slurmSpec"]["prologBashScripts"] = ["#!/bin/bash\ntrue\n"]
    return body


def fast_options(timeout: float = 10.0) -> resource.ClusterOptions:
    """Cluster options with short waits."""
    return resource.ClusterOptions(timeout=timeout, backoff=BACKOFF)


class World:
    """One emulator for a batch of plans (see the module docstring).

    Args:
        state_dir: The emulator's state directory (created).
        slurm: Whether to create the batch's Slurm cluster (``SLURM_CLUSTER``).
    """

    def __init__(self, state_dir: pathlib.Path, *, slurm: bool = True):
        self.state_dir = pathlib.Path(state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.gcs_root = self.state_dir.parent / f"{self.state_dir.name}-gcs"
        self._counter = 0
        self._undo: list[Callable[[], None]] = []
        self.restarts = 0
        self.down_seconds = 0.0
        self.seen: list[Seen] = []
        self._in_flight = 0
        self._seen_lock = threading.Lock()
        self.foreign_job_id: int | None = None
        self.server = server.EmulatorServer(self.state_dir, settings=SETTINGS).start()
        self._watch()
        self.port = int(self.server.address.rsplit(":", 1)[1])
        self._patch()
        model_files.write_model_dir(
            self.gcs_root / "bucket" / "model", {"w": numpy.arange(4.0)}, {}
        )
        if slurm:
            self._make_slurm_cluster()

    # ----- set-up ----------------------------------------------------------------------------

    def _set(self, owner: Any, name: str, value: Any) -> None:
        old = getattr(owner, name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, old))

    def _patch(self) -> None:
        env = {"VERTEX_EMULATOR_HOST": self.server.address, "VSP_GCS_FUSE_ROOT": str(self.gcs_root)}
        for key, value in env.items():
            old = os.environ.get(key)
            os.environ[key] = value
            self._undo.append(
                lambda k=key, v=old: (
                    os.environ.pop(k, None) if v is None else os.environ.update({k: v})
                )
            )
        defaults = rest.VertexRestClient.__init__.__kwdefaults__
        old_defaults = dict(defaults)
        defaults.update(retry=RETRY, timeout=CLIENT_TIMEOUT)
        self._undo.append(lambda: defaults.update(old_defaults))
        self._set(rest.VertexRestClient, "_default_session", lambda _self: KillableSession())
        self._set(slurm_backend, "SUBMIT_BACKOFF", SUBMIT_BACKOFF)
        # Waits of steps that build their own ClusterOptions (labels, in-use checks): fast too.
        init = resource.ClusterOptions.__init__
        self._set(init, "__defaults__", (10.0, "apply", 3, BACKOFF, *init.__defaults__[4:]))

    def _make_slurm_cluster(self) -> None:
        body = cluster_body()
        self.create_running(SLURM_CLUSTER, body)
        client = self.slurm_client(SLURM_CLUSTER)
        client.ensure_association("ml", client.whoami(), ["spot", "ondemand"])
        self.ensure_foreign_job()

    def _watch(self) -> None:
        """Logs and counts the requests of the current server's app."""
        app = self.server.app
        handle = app.handle

        def watched(method: str, target: str, raw_body: bytes) -> Any:
            with self._seen_lock:
                self._in_flight += 1
                self.seen.append(
                    Seen(
                        len(self.seen),
                        method.upper(),
                        urllib.parse.unquote(urllib.parse.urlsplit(target).path),
                        urllib.parse.unquote(urllib.parse.urlsplit(target).query),
                        raw_body.decode("utf-8", errors="replace"),
                    )
                )
            try:
                return handle(method, target, raw_body)
            finally:
                with self._seen_lock:
                    self._in_flight -= 1

        app.handle = watched

    def in_flight(self) -> int:
        """Requests the emulator is handling now (held by a fault, or being served)."""
        with self._seen_lock:
            return self._in_flight

    def settle(self, limit: float = 15.0) -> bool:
        """Waits until no request is in flight (held requests have landed); False on timeout."""
        deadline = time.monotonic() + limit
        quiet = 0
        while time.monotonic() < deadline:
            quiet = quiet + 1 if self.in_flight() == 0 else 0
            if quiet >= 3:
                return True
            time.sleep(0.02)
        return False

    def requests_since(self, mark: int) -> list[Seen]:
        """The requests received after ``mark`` (a ``len(world.seen)``), in arrival order."""
        with self._seen_lock:
            return self.seen[mark:]

    def ensure_foreign_job(self, cluster_id: str = SLURM_CLUSTER) -> int:
        """Submits a long job of another run (``FOREIGN_RUN``) on a cluster; its job id.

        On the batch's cluster it is kept for the batch and submitted again if a plan ended it.
        """
        client = self.slurm_client(cluster_id)
        if cluster_id == SLURM_CLUSTER and self.foreign_job_id is not None:
            job = client.get_job(self.foreign_job_id)
            if not job.is_terminal and job.base_state != "CANCELLED":
                return self.foreign_job_id
        if cluster_id != SLURM_CLUSTER:
            client.ensure_association("ml", client.whoami(), ["spot", "ondemand"])
        work = self.gcs_root / "shared" / f"{FOREIGN_KEY}-{cluster_id}"
        training = slurm_backend.SlurmTraining(
            command=[sys.executable, "-c", "import time; time.sleep(600)"],
            working_directory=str(work),
            checkpoint_dir=str(work / "ckpt"),
            model_dir=str(work / "model"),
        )
        backend = slurm_backend.SlurmBackend(
            client, training, [FOREIGN_TARGET], pipeline_run=FOREIGN_RUN
        )
        job_id = int(backend.submit(f"{FOREIGN_KEY}-{cluster_id}", 0, FOREIGN_TARGET).job_id)
        if cluster_id == SLURM_CLUSTER:
            self.foreign_job_id = job_id
        return job_id

    def close(self) -> None:
        """Stops the emulator (and its Slurm jobs) and undoes the patches."""
        with contextlib.suppress(Exception):
            self.server.app.slurm.shutdown()
        self.server.stop()
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()

    # ----- during plans ----------------------------------------------------------------------

    def next_id(self, prefix: str) -> str:
        """A fresh id for one plan: ``prefix`` then a counter (cluster ids stay <= 10 chars)."""
        self._counter += 1
        return f"{prefix}{self._counter:05d}"

    def restart(self) -> None:
        """Stops the emulator and starts a new one on the same state directory and port.

        ``down_seconds`` is how long the API was away (a longer outage than the client's retry
        deadline may end a call in a transient error, as it would in production). A request
        the stop cut is applied whole before the new server opens the state, or not at all.
        """
        stopped = time.monotonic()
        self.server.stop()
        for _ in range(100):
            try:
                self.server = server.EmulatorServer(
                    self.state_dir, port=self.port, settings=SETTINGS
                ).start()
                break
            except (OSError, RuntimeError):  # the port, or the state directory's lock, not free yet
                time.sleep(0.02)
        self._watch()
        self.down_seconds = time.monotonic() - stopped
        self.restarts += 1

    def client(self) -> rest.VertexRestClient:
        """A fast REST client (killable through the calling thread's token)."""
        return rest.VertexRestClient(LOCATION)

    def ref(self, cluster_id: str) -> resource.ClusterRef:
        """The reference of a cluster of the test project."""
        return resource.ClusterRef(PROJECT, LOCATION, cluster_id)

    def slurm_client(self, cluster_id: str = SLURM_CLUSTER) -> api.SlurmClient:
        """A Slurm API client of a cluster."""
        return api.SlurmClient(self.client(), self.ref(cluster_id))

    def cluster(self, cluster_id: str) -> dict[str, Any] | None:
        """The stored cluster (from the emulator's state), or None."""
        record = self.server.app.store.get("clusters", self.ref(cluster_id).name)
        return None if record is None else record.get("cluster")

    def create_running(
        self, cluster_id: str, body: dict[str, Any], labels: dict[str, str] | None = None
    ) -> None:
        """Creates a cluster through the API (as another run would) and waits until RUNNING."""
        body = {**body, "labels": {**body.get("labels", {}), **(labels or {})}}
        url = f"{self.server.base_url}/{self.ref(cluster_id).collection_path}"
        response = requests.post(
            url, params={"model_development_cluster_id": cluster_id}, json=body
        )
        response.raise_for_status()
        deadline = time.monotonic() + 10
        while resource.cluster_state(self.cluster(cluster_id) or {}) != "RUNNING":
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster {cluster_id} did not become RUNNING")
            time.sleep(0.02)

    def journal_mark(self) -> int:
        """How many journal entries there are now."""
        return len(self.server.journal())

    def journal_since(self, mark: int) -> list[dict[str, Any]]:
        """Journal entries after ``mark``."""
        return self.server.journal()[mark:]


@contextlib.contextmanager
def opened(state_dir: pathlib.Path, *, slurm: bool = True) -> Iterator[World]:
    """A ``World`` closed on exit."""
    world = World(state_dir, slurm=slurm)
    try:
        yield world
    finally:
        world.close()
