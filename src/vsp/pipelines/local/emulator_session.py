"""The emulator a local run talks to: one it starts in-process, or the one
``VERTEX_EMULATOR_HOST`` names (whose state folder it asks for, to find the emulated Cloud
Storage the steps read).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pathlib

import requests

from vsp import vertex_emulator
from vsp.components.runtime.core import errors, gcs_paths, rest
from vsp.vertex_emulator import server as emulator_server

log = logging.getLogger(__name__)


def external_state_dir() -> str:
    """The state folder of the emulator ``VERTEX_EMULATOR_HOST`` names (its health answer)."""
    host = rest.emulator_host()
    url = f"http://{host}/emulator/v1/health"
    try:
        answer = requests.get(url, timeout=10)
        answer.raise_for_status()
        return str(answer.json()["stateDir"])
    except (requests.RequestException, ValueError, KeyError) as exc:
        raise errors.UserError(
            f"the emulator named by {rest.EMULATOR_ENV}={host} did not tell its state folder "
            f"({url}: {exc}). Fix: start it with `vsp emulator start --state-dir DIR` and set "
            f"{rest.EMULATOR_ENV} to its address, or unset {rest.EMULATOR_ENV} to let run-local "
            "start its own."
        ) from exc


OWNER = "vsp run-local"  # the emulator a local run starts for itself, in emulator.json


@contextlib.contextmanager
def emulator_for_run(
    state_dir: str | None,
    settings: vertex_emulator.EmulatorSettings | None,
    cluster_id: str = "",
):
    """Yields the emulator state dir in use (None for an external emulator set by env).

    A cluster ``cluster_id`` kept warm by an earlier run gets the settings' preemption plan
    afresh, so a run that reuses it sees the same injected preemptions as one that creates it;
    so do CustomJobs, whose plan counts its preemptions across the state folder (a second run
    on one state folder saw none of its ``--preemptions``).
    """
    if rest.emulator_host():
        log.info("using the emulator at %s", rest.emulator_host())
        # Its Cloud Storage is under its own state folder: the steps read checkpoints there.
        fuse_root = os.environ.get(gcs_paths.GCS_FUSE_ROOT_ENV)
        if fuse_root is None:
            os.environ[gcs_paths.GCS_FUSE_ROOT_ENV] = str(
                pathlib.Path(external_state_dir()) / "gcs"
            )
        try:
            yield None
        finally:
            if fuse_root is None:
                os.environ.pop(gcs_paths.GCS_FUSE_ROOT_ENV, None)
        return
    state = pathlib.Path(state_dir or ".vsp/emulator").resolve()
    state.mkdir(parents=True, exist_ok=True)
    try:
        server = vertex_emulator.EmulatorServer(str(state), settings=settings, owner=OWNER)
        server.start()
    except emulator_server.StateDirInUse as exc:
        if exc.holder.get("owner") == OWNER:  # it stops when that run ends: no address to share
            fix = "wait for that run to end, or pass another --state-dir"
        else:
            address = exc.holder.get("address") or "the address `vsp emulator start` printed"
            fix = (
                f"let this run use it ({rest.EMULATOR_ENV}={address}), stop it, or pass another "
                "--state-dir"
            )
        raise errors.UserError(f"{exc}. Fix: {fix}.") from None
    _cancel_left_running(server)
    if cluster_id:
        # Not created yet: a plan an earlier run left waiting for it is dropped. The id matching
        # clusters of several projects (NOT_FOUND): left alone.
        with contextlib.suppress(Exception):
            server.app.slurm.clear_preemption_plan(cluster_id)
    server.app.custom_jobs.clear_preemption_plan()  # the settings' plan, its count at 0
    # Emulated Cloud Storage: gs://BUCKET/PATH lives at {state}/gcs/BUCKET/PATH, for the jobs
    # (set by the emulator) and for the steps that read checkpoints and models.
    changes = {rest.EMULATOR_ENV: server.address, gcs_paths.GCS_FUSE_ROOT_ENV: str(state / "gcs")}
    previous = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    log.info("started the Vertex emulator at %s (state in %s)", server.address, state)
    try:
        yield str(state)
    finally:
        server.stop()
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _cancel_left_running(server: vertex_emulator.EmulatorServer) -> None:
    """Cancels the jobs an earlier run left unfinished in this state folder, saying so.

    The emulator was that run's own, so the run ended without stopping it (killed): nothing
    supervises its jobs, whose processes died with it. Started again, the emulator would take
    them for lost nodes and requeue them, to train beside this run's job on its cluster and take
    its injected preemptions; on Vertex AI a cancelled pipeline run cancels them.
    """
    for cluster, job_id in server.app.slurm.cancel_unfinished():
        log.warning(
            "cancelled Slurm job %d on %s: an earlier run in this folder ended without stopping "
            "it, and nothing supervises it now",
            job_id,
            cluster.rsplit("/", 1)[-1],
        )
    for name in server.app.custom_jobs.cancel_unfinished():
        log.warning(
            "cancelled CustomJob %s: an earlier run in this folder ended without stopping it",
            name.rsplit("/", 1)[-1],
        )
