"""Client of the Vertex Slurm Job API: slurmrestd calls through ``:callSlurmRestApi``.

Every call is ``POST {cluster}:callSlurmRestApi`` with
``{"method": "HTTP_METHOD_GET|POST|DELETE", "path": "/slurm/v0.0.42/...", "body": {...}}``
(``body`` only for POST). Reads and cancels are safe to repeat, so the REST client retries them
on transient failures (``idempotent=True``); a submission is never retried: after an ambiguous
failure (``SlurmSubmitUnknownError``) look the job up by run key with ``find_jobs`` first.

Answers are unwrapped and classified by ``slurm_errors`` (wrapper ``status`` and Slurm's own
``errors``; warnings are logged). Google-level errors (bad path, request too large, permission,
unknown cluster, UNAVAILABLE) arrive as the REST client's ``ApiError`` subclasses.

A cluster that is being updated (another run's label change, a pool resize) refuses the Slurm
Job API with FAILED_PRECONDITION for a while; nothing was proxied then, so every call, a
submission included, waits with backoff (``busy_wait`` seconds at most) and is sent again,
rather than failing a training run because a neighbour touched the cluster.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.core import errors, polling, rest
from vsp.components.runtime.slurm import accounting, error_codes, lookup, script
from vsp.components.runtime.slurm import job as slurm_job

log = logging.getLogger(__name__)

METHODS = ("GET", "POST", "DELETE")
_BUSY = re.compile(r"\b(UPDATING|PROVISIONING|REPAIRING)\b")
BUSY_WAIT_SECONDS = 900.0


class ClusterBusyError(errors.TransientError):
    """The cluster refused the Slurm Job API while it is updating; the call was not proxied."""


class ClusterGoneError(errors.NotFoundError, errors.UserError):
    """The Slurm Job API answered NOT_FOUND for the cluster itself: it was deleted."""

    exit_code = errors.EXIT_USER_ERROR


def _busy(exc: errors.ApiError) -> bool:
    return exc.status == "FAILED_PRECONDITION" and bool(_BUSY.search(exc.message or ""))


class SlurmClient:
    """Slurm jobs and accounting on one training cluster.

    Args:
        rest_client: The Vertex REST client (``.post(path, body, params, idempotent=...)``).
        cluster_ref: Which cluster.
        version: slurmrestd data_parser version used in paths (``v0.0.42``).
    """

    def __init__(
        self,
        rest_client: rest.VertexRestClient,
        cluster_ref: resource.ClusterRef,
        version: str = script.DEFAULT_VERSION,
    ):
        script.is_legacy(version)  # validates the form v0.0.N
        self.busy_wait = BUSY_WAIT_SECONDS
        self.clock: polling.Clock = polling.RealClock()
        self.rest = rest_client
        self.cluster_ref = cluster_ref
        self.version = version

    @property
    def proxy_path(self) -> str:
        """``v1beta1/projects/P/locations/L/modelDevelopmentClusters/ID:callSlurmRestApi``."""
        return f"{self.cluster_ref.path}:callSlurmRestApi"

    def slurm_path(self, suffix: str) -> str:
        """``/slurm/{version}/{suffix}``."""
        return f"/slurm/{self.version}/{suffix}"

    def slurmdb_path(self, suffix: str) -> str:
        """``/slurmdb/{version}/{suffix}``."""
        return f"/slurmdb/{self.version}/{suffix}"

    # ----- transport -----------------------------------------------------------------------

    def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, idempotent: bool
    ) -> error_codes.SlurmResponse:
        """One proxied slurmrestd call; returns the unwrapped answer (errors not yet raised).

        Args:
            method: ``GET``, ``POST`` or ``DELETE``.
            path: slurmrestd path, e.g. ``/slurm/v0.0.42/jobs``.
            body: JSON body, only for POST.
            idempotent: Whether the REST client may retry it on transient failures.
        """
        if method not in METHODS:
            raise errors.InternalError(f"unsupported Slurm API method {method!r}")
        request: dict[str, Any] = {"method": f"HTTP_METHOD_{method}", "path": path}
        if method == "POST":
            request["body"] = body or {}
        answer = self._post(request, idempotent=idempotent)
        response = error_codes.SlurmResponse.from_proxy(answer, method, path)
        response.log_warnings()
        return response

    def _post(self, request: dict[str, Any], *, idempotent: bool) -> dict[str, Any]:
        """Posts to the proxy, waiting out a cluster that is busy updating (see the module)."""

        def attempt() -> tuple[dict[str, Any] | None, Exception | None]:
            try:
                return self.rest.post(self.proxy_path, request, idempotent=idempotent), None
            except errors.InvalidArgumentError as exc:
                if _busy(exc):
                    raise ClusterBusyError(str(exc)) from exc
                return None, exc
            except errors.VspError as exc:  # not retried here (a submit is never resent)
                return None, exc

        answer, failure = polling.poll_until(
            attempt,
            lambda _: True,
            what=f"Slurm API of {self.cluster_ref.cluster_id} (cluster busy)",
            timeout=self.busy_wait,
            backoff=polling.Backoff(initial=1.0, maximum=15.0),
            clock=self.clock,
            on_change=lambda *_: None,  # an answer is not news; only the busy waits are logged
            heartbeat=None,
        ).value
        if isinstance(failure, errors.NotFoundError):
            gone = ClusterGoneError(
                f"cluster {self.cluster_ref.name} no longer exists (the Slurm Job API answered "
                f"{failure.message!r}): it was deleted while this step used it (another "
                "run's teardown, the reaper, or by hand). Fix: retry the run: create_cluster "
                "creates the cluster again and training resumes from its last checkpoint.",
                http_status=failure.http_status,
                status=failure.status,
                method=failure.method,
                url=failure.url,
            )
            raise gone from failure
        if failure is not None:
            raise failure
        return answer

    def read(self, path: str, what: str) -> dict[str, Any]:
        """A GET that must succeed (retried on transient failures); returns Slurm's payload.

        Raises:
            slurm_errors.SlurmError: Slurm answered with errors or a failing status.
        """
        response = self.call("GET", path, idempotent=True)
        if not response.ok:
            raise response.error(what)
        return response.payload

    # ----- jobs ----------------------------------------------------------------------------

    def submit(self, job: script.JobDescription) -> int:
        """Submits a batch job and returns its id. Never retried.

        Judged by the presence of ``job_id``: a held job is accepted with non-empty ``errors``
        (ESLURM_JOB_HELD), which are then only logged.

        Raises:
            slurm_errors.SlurmRejectedError: Slurm refused it (invalid account, partition...).
            slurm_errors.SlurmSubmitUnknownError: A transient failure or an unreadable answer;
                the job may exist. Call ``find_jobs(job.run_key)`` before submitting again.
        """
        what = f"submission of job {job.run_key}"
        request = job.to_request(self.version)
        try:
            response = self.call("POST", self.slurm_path("job/submit"), request, idempotent=False)
        except errors.TransientError as exc:
            raise error_codes.SlurmSubmitUnknownError(
                f"{what} may or may not have been accepted ({exc}). Look it up by run key "
                "(find_jobs) before submitting again.",
                what=what,
            ) from exc
        payload = response.payload
        result = payload.get("result") if isinstance(payload.get("result"), dict) else {}
        job_id = slurm_job.number(payload.get("job_id") or result.get("job_id"))
        if job_id:
            if response.errors:
                log.warning(
                    "%s: accepted as job %d with: %s", what, job_id, response.describe_errors()
                )
            message = payload.get("job_submit_user_msg") or result.get("job_submit_user_msg")
            if message:
                log.info("%s: Slurm says: %s", what, message)
            log.info("%s: submitted as Slurm job %d", what, job_id)
            return job_id
        error = response.error(what)
        if not isinstance(error, errors.UserError):  # transient or unreadable: may exist
            raise error_codes.SlurmSubmitUnknownError(
                f"{error} Look the job up by run key (find_jobs) before submitting again.",
                what=what,
                status=response.status,
                slurm_errors=response.errors,
            )
        raise error

    def get_job(self, job_id: int) -> slurm_job.JobInfo:
        """The job from the live queue, else from slurmdb (see ``slurm.lookup``).

        Raises:
            slurm_errors.SlurmJobNotFoundError: Known to neither.
        """
        return lookup.get_job(self, job_id)

    def list_jobs(self) -> list[slurm_job.JobInfo]:
        """Every job in the live queue visible to the caller."""
        payload = self.read(self.slurm_path("jobs"), "listing of Slurm jobs")
        return [
            slurm_job.JobInfo.parse(j) for j in payload.get("jobs") or [] if isinstance(j, dict)
        ]

    def find_jobs(
        self, run_key: str, *, include_accounting: bool = False
    ) -> list[slurm_job.JobInfo]:
        """Jobs carrying ``run_key``, newest first; slurmdb as a tolerant second source with
        ``include_accounting`` (see ``slurm.lookup``)."""
        return lookup.find_jobs(self, run_key, include_accounting=include_accounting)

    def cancel(self, job_id: int) -> bool:
        """Cancels a job. A finished or unknown job is fine.

        Returns:
            True when Slurm accepted the cancel; False when the job was already finished or gone.
        """
        what = f"cancel of Slurm job {job_id}"
        try:
            response = self.call("DELETE", self.slurm_path(f"job/{int(job_id)}"), idempotent=True)
        except errors.NotFoundError as exc:
            log.info("%s: NOT_FOUND (%s): nothing to cancel", what, exc.message)
            return False
        if response.ok:
            log.info("%s: accepted", what)
            return True
        if response.not_found or response.already_finished:
            log.info("%s: already finished or unknown (%s)", what, response.describe_errors())
            return False
        raise response.error(what)

    # ----- accounting ----------------------------------------------------------------------

    def whoami(self) -> str | None:
        """The caller's Linux user as slurmrestd sees it (``meta.client.user`` of a ping)."""
        payload = self.read(self.slurm_path("ping"), "Slurm ping")
        client = (payload.get("meta") or {}).get("client") or {}
        return str(client.get("user")) if client.get("user") else None

    def ensure_association(
        self,
        account: str,
        user: str,
        partitions: list[str],
        *,
        organization: str = "",
        description: str = "",
        cluster: str | None = None,
    ) -> accounting.AssociationReport:
        """Idempotent ``sacctmgr add User Accounts=A Partition=P U``; see ``slurm_accounting``."""
        return accounting.ensure_association(
            self,
            account,
            user,
            partitions,
            organization=organization,
            description=description,
            cluster=cluster,
        )

    def write(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        """A POST that must succeed (not retried); returns Slurm's payload.

        Raises:
            slurm_errors.SlurmError: Slurm answered with errors or a failing status.
        """
        response = self.call("POST", path, body, idempotent=False)
        if not response.ok:
            raise response.error(f"creation of {what}")
        return response.payload
