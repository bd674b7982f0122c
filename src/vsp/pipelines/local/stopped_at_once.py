"""A local run stopped at once (a second signal): its cluster is not left without an expiry.

The exit task does not run then, so a cluster the run created or reused could stay up with no
``vsp-expires-at``, which the reaper never deletes. While the emulator is still up, one label
update gives it an expiry of now, as the exit task's last resort does, and ends the run's own
claim (``vsp-lease-*``), which the reaper would otherwise take for another run's use and keep the
cluster for; the reaper then deletes it unless another run uses it. A cluster that already has
an expiry keeps it.

The run's claim is told by its time: on the run's own emulator only the run's steps write, so
a claim that expires ``LEASE_MINUTES`` or more after the run began was taken by the run (the
steps' run id is made inside kfp.local, out of reach here). On a shared emulator
(``VERTEX_EMULATOR_HOST``) other runs write too, and every claim is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from vsp.components.runtime.cluster import claims, resource
from vsp.components.runtime.cluster import labels as cluster_labels
from vsp.components.runtime.core import errors, gcp_labels, polling, rest
from vsp.components.runtime.teardown import exit_task

log = logging.getLogger(__name__)

# The whole of it, requests and retries: the user asked to stop now.
SECONDS = 10.0


class StoppedAtOnce(KeyboardInterrupt):
    """A second signal stopped the run; ``exit_code`` is 128 + that signal."""

    def __init__(self, exit_code: int):
        super().__init__()
        self.exit_code = exit_code


def expire_left_cluster(arguments: dict[str, Any], started: float | None = None) -> str:
    """Labels the run's cluster to expire now when it has no expiry, and ends the run's claim;
    what was done, in a sentence ('' when there is no cluster to speak of).

    Args:
        arguments: The run's pipeline arguments (``project``, ``location``, ``cluster_id``).
        started: When the run began (epoch seconds), on the run's own emulator; None on a
            shared one (no claim is ended).
    """
    cluster_id = str(arguments.get("cluster_id") or "")
    project, location = str(arguments.get("project") or ""), str(arguments.get("location") or "")
    if not (cluster_id and project and location):
        return ""
    ref = resource.ClusterRef(project, location, cluster_id)
    where = f"--project {project} --location {location} {cluster_id}"
    client = rest.VertexRestClient(location)
    client.deadline_at = time.monotonic() + SECONDS
    options = resource.ClusterOptions(
        timeout=SECONDS, backoff=polling.Backoff(initial=0.5, maximum=2.0)
    )
    try:
        cluster = resource.ClusterResource(client, ref, options=options).get()
        if cluster is None:
            return ""
        own = _own_claims(cluster.get("labels") or {}, started)
        expiry = (cluster.get("labels") or {}).get(gcp_labels.EXPIRES_AT)
        labels = {} if expiry else {
            gcp_labels.TEARDOWN: exit_task.FAILED_TEARDOWN_LABEL_VALUE,
            gcp_labels.EXPIRES_AT: gcp_labels.format_label_time(time.time()),
        }  # fmt: skip
        if labels or own:
            cluster_labels.update_managed_labels(
                client, ref, set_labels=labels, remove=own, options=options
            )
        if expiry:
            return f"cluster {cluster_id} keeps its expiry ({expiry})"
    except (errors.VspError, OSError) as exc:
        return (
            f"cluster {cluster_id} may be left without an expiry ({exc}): delete it with "
            f"`vsp clusters delete {where}`"
        )
    return (
        f"cluster {cluster_id} is labelled to expire now: the next reap deletes it unless "
        f"another run uses it (`vsp run-local reap-expired-clusters`), or `vsp clusters delete "
        f"{where}`"
    )


def _own_claims(labels: dict[str, str], started: float | None) -> list[str]:
    """The claims (``vsp-lease-*`` keys) taken since ``started``: the run's own, on its own
    emulator (label times are whole seconds, hence the second of slack)."""
    if started is None:
        return []
    since = started + claims.LEASE_MINUTES * 60.0 - 1.0
    own = []
    for key, value in labels.items():
        if key.startswith(gcp_labels.LEASE_PREFIX):
            with contextlib.suppress(ValueError):
                if gcp_labels.parse_label_time(value) >= since:
                    own.append(key)
    return own


@contextlib.contextmanager
def labelled_on_stop(arguments: dict[str, Any], own_emulator: bool):
    """Around a run: a second signal labels the cluster (``expire_left_cluster``), says so,
    and stops the run with that signal's exit code.

    Args:
        arguments: The run's pipeline arguments.
        own_emulator: Whether the run's emulator is its own (started by it, no other client).
    """
    started = time.time()
    try:
        yield
    except StoppedAtOnce:
        said = expire_left_cluster(arguments, started if own_emulator else None)
        print(
            "run-local: stopped at once, without the exit task" + (f"; {said}" if said else ""),
            flush=True,
        )
        raise
