"""A tiny ``requests`` client of an emulator's Slurm Job API, for tests and local runs.

It handles both answer forms of ``:callSlurmRestApi`` (``body`` string or ``structuredBody``)::

    client = SlurmTestClient.create_cluster(server.base_url, "c1", cluster_body)
    job_id = client.submit("#!/bin/bash\\necho hi", environment=["A=1"])
    info = client.wait_job(job_id, lambda j: "COMPLETED" in j["job_state"])
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

import requests

API = "/slurm/v0.0.42"
DB = "/slurmdb/v0.0.42"
PARENT = "projects/test-project/locations/us-central1"


@dataclasses.dataclass
class SlurmReply:
    """One ``:callSlurmRestApi`` answer.

    Attributes:
        http: The HTTP response.
        status: The Slurm status (None for a Google-level error).
        payload: The Slurm JSON (None for a Google-level error or a plain-text answer).
        form: ``body`` or ``structuredBody`` (which field carried it).
        text: The answer when it was not JSON (slurmrestd's plain-text 404), else "".
    """

    http: requests.Response
    status: int | None
    payload: dict[str, Any] | None
    form: str | None
    text: str = ""


class SlurmTestClient:
    """Calls one cluster's Slurm REST API through ``:callSlurmRestApi``."""

    def __init__(self, base_url: str, cluster_name: str, session: requests.Session | None = None):
        """Binds the client to a cluster.

        Args:
            base_url: ``http://host:port`` of the emulator.
            cluster_name: ``projects/{p}/locations/{l}/modelDevelopmentClusters/{id}``.
            session: A requests session to reuse.
        """
        self.base_url = base_url.rstrip("/")
        self.cluster_name = cluster_name
        self.session = session or requests.Session()

    @classmethod
    def create_cluster(
        cls, base_url: str, cluster_id: str, body: dict[str, Any], timeout: float = 10.0
    ) -> SlurmTestClient:
        """Creates a cluster under ``PARENT``, waits until RUNNING, returns a client for it."""
        session = requests.Session()
        created = session.post(
            f"{base_url}/v1beta1/{PARENT}/modelDevelopmentClusters",
            params={"model_development_cluster_id": cluster_id},
            json=body,
        )
        created.raise_for_status()
        name = f"{PARENT}/modelDevelopmentClusters/{cluster_id}"
        deadline = time.monotonic() + timeout
        while True:
            cluster = session.get(f"{base_url}/v1beta1/{name}").json()
            if cluster["clusterStatus"]["state"] == "RUNNING":
                return cls(base_url, name, session)
            if time.monotonic() > deadline:
                raise AssertionError(f"cluster {cluster_id} not RUNNING: {cluster}")
            time.sleep(0.02)

    def call(self, method: str, path: str, body: Any = None, **extra: Any) -> SlurmReply:
        """Sends one Slurm REST call (``method`` = GET, POST or DELETE)."""
        request: dict[str, Any] = {"method": f"HTTP_METHOD_{method}", "path": path, **extra}
        if body is not None:
            request["body"] = body
        url = f"{self.base_url}/v1beta1/{self.cluster_name}:callSlurmRestApi"
        http = self.session.post(url, json=request)
        if http.status_code != 200:
            return SlurmReply(http, None, None, None)
        data = http.json()
        if "structuredBody" in data:
            return SlurmReply(http, data["status"], data["structuredBody"], "structuredBody")
        try:
            return SlurmReply(http, data["status"], json.loads(data["body"]), "body")
        except ValueError:
            return SlurmReply(http, data["status"], None, "body", data["body"])

    def submit(self, script: str, **job: Any) -> int:
        """Submits a batch job (``environment`` defaults to a minimal PATH); returns its id."""
        job.setdefault("environment", ["PATH=/usr/bin:/bin"])
        reply = self.call("POST", f"{API}/job/submit", {"job": job, "script": script})
        assert reply.status == 200 and reply.payload is not None, reply.payload or reply.http.text
        return int(reply.payload["job_id"])

    def job(self, job_id: int) -> dict[str, Any] | None:
        """The live JobInfo, or None once the job left the queue (404)."""
        reply = self.call("GET", f"{API}/job/{job_id}")
        if reply.status == 404:
            return None
        assert reply.status == 200 and reply.payload is not None, reply.payload
        return reply.payload["jobs"][0]

    def db_job(self, job_id: int) -> dict[str, Any] | None:
        """The slurmdb record, or None when unknown."""
        reply = self.call("GET", f"{DB}/job/{job_id}")
        jobs = (reply.payload or {}).get("jobs") or []
        return jobs[0] if jobs else None

    def cancel(self, job_id: int) -> SlurmReply:
        """DELETE /slurm/v0.0.42/job/{id}."""
        return self.call("DELETE", f"{API}/job/{job_id}")

    def wait_job(
        self, job_id: int, predicate: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> dict[str, Any]:
        """Polls the live job until ``predicate(job_info)``; returns the JobInfo."""
        deadline = time.monotonic() + timeout
        info: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            info = self.job(job_id)
            if info is not None and predicate(info):
                return info
            time.sleep(0.03)
        raise AssertionError(f"job {job_id} did not reach the expected state: {info}")

    def wait_state(self, job_id: int, *states: str, timeout: float = 10.0) -> dict[str, Any]:
        """Waits until ``job_state`` is exactly ``states`` (e.g. ``"COMPLETED"``)."""
        return self.wait_job(job_id, lambda j: j["job_state"] == list(states), timeout)
