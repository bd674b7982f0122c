"""Progress messages: the job's state changes pushed through Pub/Sub and pulled by the step.

A poll, however planned, sees a change at its next look: 60 looks per job-hour cannot bring the
p95 detection time under about 50 s (``poll_plan``). With ``progress_topic`` set
(``projects/P/topics/T``, an existing topic), the training step:

1. looks up, and creates when absent, a pull subscription of its own run on that topic before
   it submits a job (``vsp-progress-<tag>``, ``<tag>`` a digest of the run key, so a retried
   step finds the same one; filter ``attributes.vsp_run = "<tag>"``, so runs sharing a topic
   never see each other's messages; it expires after a day unused, so one a killed step left
   behind goes by itself);
2. gives the job ``VSP_PROGRESS_URL`` (the topic's ``:publish`` URL) and ``VSP_PROGRESS_RUN``
   (the tag): the batch script (``slurm.batch``) publishes one message, attributes only, on
   ``started``, ``notice`` and ``exiting`` (a token from the node's metadata server; curl);
3. waits on a pull instead of sleeping between looks (``poll_looks.Pushed``): a pull that finds
   no message is held by Pub/Sub up to a bound it does not document (about 90 s has been
   reported), and answers as soon as one is published; each pull is a counted call;
4. acknowledges what it read in one call at most every ``ack_seconds`` (the subscription's ack
   deadline is the longest Pub/Sub allows, 600 s) and deletes the subscription when the run ends
   (deleting one already gone is success; the messages go with it, unacknowledged).

A message's attributes hold the beacon's fields (``training.beacon``: ``job``, ``restart``,
``state``, ``since``, ``time``, ``rc``, ``prev_restart``, ``prev_time``) as strings. Pub/Sub
does not keep order: the newest state of each job wins (by run, time entered, then state
order). A job that cannot publish (no curl, no permission) says so in its log, and the step,
seeing no message from a job that Vertex says runs, stops pulling and reads the beacon as
before.

Hand-rolled over ``rest.VertexRestClient`` (``PUBSUB_ROOT``, the emulator when
``VERTEX_EMULATOR_HOST`` is set): four REST calls; google-cloud-pubsub would add gRPC to the
step's environment for them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from typing import Any

from vsp.components.runtime.core import errors, param_rules, polling, rest
from vsp.components.runtime.training import beacon as beacon_lib
from vsp.components.runtime.training.beacon import STATES, Beacon

log = logging.getLogger(__name__)

URL_ENV = "VSP_PROGRESS_URL"
RUN_ENV = "VSP_PROGRESS_RUN"
RUN_ATTRIBUTE = "vsp_run"
ACK_DEADLINE_SECONDS = 600
EXPIRY = "86400s"  # Pub/Sub's shortest subscription expiry: one day without use
MAX_MESSAGES = 100


@dataclasses.dataclass(frozen=True)
class FeedSettings:
    """How the step pulls, seconds.

    Attributes:
        pull_seconds: Client timeout of one pull, well above Pub/Sub's own hold (about 90 s
            reported), so the client never drops a pull: a message delivered to a pull the
            client dropped comes back only after the ack deadline.
        ack_seconds: Longest time a read message waits for the acknowledgement that batches it
            with the next ones: the ack goes with the first pull after this, so keep it below
            the 600 s ack deadline less a pull's hold and ``gap_seconds``.
        least_wait_seconds: A wait between looks shorter than this sleeps instead of pulling
            (the plan expects Vertex to show a change the job cannot tell, as a requeue after
            the job's exit, and a pull might hold far longer).
        gap_seconds: Pause after a pull that found nothing, while the job runs with nothing
            announced: a message published meanwhile waits in the subscription and is seen at
            most this late, and each held pull is a call (at a 90 s hold, back-to-back pulls
            are 40 calls per hour, with a 25 s pause 31).
        soon_seconds: After a ``notice`` or ``exiting`` message, how long the next one (the
            exit; the next run's ``started`` after Slurm's 2-minute requeue hold) is pulled
            for back to back, without the pause.
    """

    pull_seconds: float = 300.0
    ack_seconds: float = 450.0
    least_wait_seconds: float = 12.0
    gap_seconds: float = 25.0
    soon_seconds: float = 300.0


def run_tag(run_key: str) -> str:
    """The run's tag: 16 hex digits of the run key's sha256 (a subscription id and filter
    value of fixed, safe characters)."""
    return hashlib.sha256(run_key.encode("utf-8")).hexdigest()[:16]


def _order(beacon: Beacon) -> tuple[int, float, int]:
    return (beacon.restart, beacon.since, STATES.index(beacon.state))


def newest(*found: Beacon | None) -> Beacon | None:
    """The newest of some beacons of one job (None when none): later run, later state entered,
    later state; the first given wins a tie."""
    best = None
    for beacon in found:
        if beacon is not None and (best is None or _order(beacon) > _order(best)):
            best = beacon
    return best


def from_message(message: dict[str, Any]) -> Beacon | None:
    """The beacon a message carries (None: not one of ours, or malformed)."""
    fields = message.get("attributes") or {}
    try:
        rc = fields.get("rc")
        state = fields["state"]
        if state not in STATES:
            return None
        return Beacon(
            job=str(fields["job"]),
            restart=int(fields["restart"]),
            state=state,
            since=float(fields["since"]),
            time=float(fields["time"]),
            rc=None if rc in (None, "", "null") else int(rc),
            **beacon_lib.previous(fields.get("prev_restart"), fields.get("prev_time")),
        )
    except (KeyError, TypeError, ValueError):
        return None


class ProgressFeed:
    """The run's subscription and what was pulled from it.

    Args:
        topic: ``projects/P/topics/T`` (checked: ``UserError`` naming the fix).
        run_key: The run's idempotency key (its digest tags the messages).
        location: Vertex region (the client's; Pub/Sub itself is global).
        settings: Pull timeout and ack batching.
        client: A client for Pub/Sub (default: one for ``PUBSUB_ROOT`` or the emulator).
        clock: Monotonic time source (for ack batching).
    """

    def __init__(
        self,
        topic: str,
        run_key: str,
        location: str,
        settings: FeedSettings = FeedSettings(),
        client: rest.VertexRestClient | None = None,
        clock: polling.Clock | None = None,
    ):
        problem = param_rules.pubsub_topic(topic)
        if problem is not None or not topic:
            raise errors.UserError(
                f"progress_topic {topic!r} is not a Pub/Sub topic. Fix: give "
                "projects/PROJECT/topics/TOPIC (an existing topic), or '' for none."
            )
        self.topic = topic
        self.tag = run_tag(run_key)
        project = topic.split("/")[1]
        self.subscription = f"projects/{project}/subscriptions/vsp-progress-{self.tag}"
        self.settings = settings
        self.client = client or rest.VertexRestClient(
            location, root=rest.PUBSUB_ROOT, timeout=settings.pull_seconds
        )
        self.clock = clock or polling.RealClock()
        self._latest: dict[str, Beacon] = {}
        self._acks: list[str] = []
        self._acks_since: float | None = None
        self.pulls = 0

    @property
    def calls(self) -> int:
        """Pub/Sub requests sent so far (subscription, pulls, acks)."""
        return self.client.requests_sent

    def environment(self) -> dict[str, str]:
        """The job environment that makes the batch script publish (values travel as JSON)."""
        return {URL_ENV: f"{self.client.root}/v1/{self.topic}:publish", RUN_ENV: self.tag}

    def open(self) -> None:
        """Creates the run's subscription, or finds it made already by an earlier try of this
        step (before any job is submitted, so the first ``started`` is kept). Its name is the
        run's own, so the create is its lookup: Pub/Sub answers ALREADY_EXISTS for it (one
        call instead of a get and a create)."""
        path = f"v1/{self.subscription}"
        body = {
            "topic": self.topic,
            "filter": f'attributes.{RUN_ATTRIBUTE} = "{self.tag}"',
            "ackDeadlineSeconds": ACK_DEADLINE_SECONDS,
            "expirationPolicy": {"ttl": EXPIRY},
        }
        try:
            self.client.put(path, body)
        except errors.AlreadyExistsError:
            log.info("progress messages: re-using subscription %s", self.subscription)
            return
        except (errors.NotFoundError, errors.PermissionDeniedError) as exc:
            raise errors.UserError(
                f"cannot subscribe to progress_topic {self.topic} ({exc}). Fix: create the "
                "topic, and give this step's service account permission to create subscriptions "
                "of it (roles/pubsub.editor), or set progress_topic to '' to poll only."
            ) from exc
        log.info("progress messages: subscription %s on %s", self.subscription, self.topic)

    def close(self) -> None:
        """Deletes the subscription (gone already: fine), and with it every message in it:
        what was read needs no acknowledgement."""
        self._acks, self._acks_since = [], None
        try:
            self.client.delete(f"v1/{self.subscription}")
        except errors.NotFoundError:
            pass
        except errors.VspError as exc:
            log.warning(
                "could not delete subscription %s (%s); it expires after a day unused",
                self.subscription,
                exc,
            )

    def latest(self, job_id: str) -> Beacon | None:
        """The newest state pulled for ``job_id`` (None: no message from it yet)."""
        return self._latest.get(str(job_id))

    def pull(self) -> bool:
        """One pull, held by Pub/Sub until a message comes or its bound passes; True when it
        brought a newer state of some job. A failed pull is logged and brings nothing."""
        self.pulls += 1
        try:
            answer = self.client.post(f"v1/{self.subscription}:pull", {"maxMessages": MAX_MESSAGES})
        except errors.VspError as exc:
            log.warning("progress messages: pull failed: %s", exc)
            return False
        newer = False
        for received in answer.get("receivedMessages") or []:
            ack = received.get("ackId")
            if ack:
                self._acks.append(ack)
            beacon = from_message(received.get("message") or {})
            if beacon is None:
                continue
            before = self._latest.get(beacon.job)
            if newest(before, beacon) is beacon and beacon != before:
                self._latest[beacon.job] = beacon
                newer = True
        if self._acks and self._acks_since is None:
            self._acks_since = self.clock.now()
        due = self._acks_since is not None and (
            self.clock.now() - self._acks_since >= self.settings.ack_seconds
        )
        if due:
            self._flush_acks()
        return newer

    def _flush_acks(self) -> None:
        if not self._acks:
            return
        ids, self._acks, self._acks_since = self._acks, [], None
        try:
            self.client.post(f"v1/{self.subscription}:acknowledge", {"ackIds": ids})
        except errors.VspError as exc:
            log.warning("progress messages: acknowledge failed (they come back): %s", exc)
