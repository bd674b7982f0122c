"""The reaper's half of a pre-warm: create the clusters whose pre-warm is due.

At each reaper run, every intent in ``prewarm_dir`` (``teardown.prewarm_intents``) under the
reaper's parent is handled once:

============================ ================================================================
before ``create_at``         left for a later reaper run (``waiting``)
after ``expires_at``         removed: its run did not come (``dropped``)
the cluster exists           removed: a run created or kept it meanwhile; one being deleted
                             (STOPPING) is left for the next reaper run (``waiting``)
otherwise                    created (``pre-warmed``) with its body's user labels plus
                             ``vsp-managed``, ``vsp-created-at``, ``vsp-teardown=prewarmed``
                             and ``vsp-expires-at`` = the intent's expiry, so a pre-warmed
                             cluster that no run claims is reaped; the intent is removed
============================ ================================================================

The create is sent only after a read found no cluster, and is not waited for (the next run's
create step waits for a PROVISIONING cluster and reuses it). A create without an answer keeps
the intent: the next reaper run reads before it creates again. A create the API refuses (an
invalid body, no quota) removes the intent and is reported: the run then creates the cluster
itself, as without a pre-warm.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import time

from vsp.components.runtime.cluster import diff as cluster_diff
from vsp.components.runtime.cluster import resource as cluster_resource
from vsp.components.runtime.core import errors, gcp_labels, readable_time, rest
from vsp.components.runtime.teardown import prewarm_intents

log = logging.getLogger(__name__)

PREWARMED, WAITING, DROPPED, FAILED = "pre-warmed", "waiting", "dropped", "failed"
WOULD_CREATE = "would pre-warm"
# The TEARDOWN label of a cluster the reaper created ahead of its run.
PREWARMED_LABEL = "prewarmed"


@dataclasses.dataclass(frozen=True)
class PrewarmEntry:
    """What the reaper did with one pre-warm intent.

    Attributes:
        cluster: Full resource name of the cluster.
        action: ``pre-warmed``, ``would pre-warm`` (dry run), ``waiting``, ``dropped`` or
            ``failed``.
        reason: Why, for the user.
    """

    cluster: str
    action: str
    reason: str


def create_body(intent: prewarm_intents.Intent, now: float) -> dict:
    """The create request: the intent's body, its managed labels replaced by the pre-warm's."""
    body = dict(intent.body)
    body["labels"] = {
        **cluster_diff.user_labels(body.get("labels")),
        gcp_labels.MANAGED: "true",
        gcp_labels.CREATED_AT: gcp_labels.timestamp(
            datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)
        ),
        gcp_labels.TEARDOWN: PREWARMED_LABEL,
        gcp_labels.EXPIRES_AT: gcp_labels.format_label_time(intent.expires_at),
    }
    return body


def create_due(
    client: rest.VertexRestClient,
    parent: str,
    prewarm_dir: str,
    *,
    now: float | None = None,
    dry_run: bool = False,
    api_version: str = "v1beta1",
) -> list[PrewarmEntry]:
    """Handles every pre-warm intent under ``parent``; see the module docstring.

    Args:
        client: REST client of the location.
        parent: ``projects/P/locations/L``; intents of other locations are left alone.
        prewarm_dir: The folder of intents (``gs://`` or local).
        now: Epoch seconds (None: ``time.time()``).
        dry_run: Report what would be created; send nothing but reads, remove nothing.
        api_version: REST version of the cluster resource.

    Returns:
        One entry per intent under ``parent``.
    """
    now = time.time() if now is None else float(now)
    entries = []
    for path, intent in prewarm_intents.read_all(prewarm_dir):
        if intent.parent != parent:
            continue
        entry = _handle(client, intent, now, dry_run, api_version)
        log.info("pre-warm of %s: %s (%s)", entry.cluster, entry.action, entry.reason)
        if entry.action in (PREWARMED, DROPPED, FAILED) and not dry_run:
            prewarm_intents.remove(path)
        entries.append(entry)
    return entries


def _handle(
    client: rest.VertexRestClient,
    intent: prewarm_intents.Intent,
    now: float,
    dry_run: bool,
    api_version: str,
) -> PrewarmEntry:
    name = intent.cluster
    if now < intent.create_at:
        return PrewarmEntry(name, WAITING, f"due at {readable_time.rfc3339(intent.create_at)}")
    if now > intent.expires_at:
        return PrewarmEntry(
            name, DROPPED, f"its run did not come by {readable_time.rfc3339(intent.expires_at)}"
        )
    ref = cluster_resource.ClusterRef.from_name(name, api_version)
    existing = cluster_resource.ClusterResource(client, ref).get()
    if existing is not None:
        state = cluster_resource.cluster_state(existing)
        if state == cluster_resource.STOPPING:
            return PrewarmEntry(
                name, WAITING, "still being deleted; the next reaper run creates it"
            )
        return PrewarmEntry(name, DROPPED, f"the cluster exists ({state})")
    if dry_run:
        return PrewarmEntry(name, WOULD_CREATE, f"due at {readable_time.rfc3339(intent.create_at)}")
    try:
        client.post(
            ref.collection_path,
            create_body(intent, now),
            params={"model_development_cluster_id": ref.cluster_id},
        )
    except errors.AlreadyExistsError:
        return PrewarmEntry(name, DROPPED, "the cluster exists (created meanwhile)")
    except errors.TransientError as exc:
        return PrewarmEntry(name, WAITING, f"no answer to the create ({exc}); read again next run")
    except errors.VspError as exc:
        log.error("pre-warm of %s refused: %s", name, exc)
        return PrewarmEntry(name, FAILED, f"create refused, the run creates it itself: {exc}")
    ready = readable_time.rfc3339(intent.ready_at)
    return PrewarmEntry(name, PREWARMED, f"created, to be ready by {ready} for the run at "
                        f"{readable_time.rfc3339(intent.tick)}")  # fmt: skip
