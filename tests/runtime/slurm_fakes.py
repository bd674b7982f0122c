"""A fake REST client for the Slurm Job API tests, and builders of canned Slurm records.

Every canned answer is served in the wrapper form the test asks for: ``{"status", "body":
"<JSON string>"}`` or ``{"status", "structuredBody": {...}}`` (the docs disagree).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from vsp.components.runtime.cluster import resource
from vsp.components.runtime.slurm import script

REF = resource.ClusterRef("proj", "us-central1", "c1")
PROXY = "v1beta1/projects/proj/locations/us-central1/modelDevelopmentClusters/c1:callSlurmRestApi"


class FakeRest:
    """Records ``post`` calls; answers from routes keyed by (method, slurm path).

    A route is a list of answers served in order (the last one repeats) or a callable taking the
    proxy request body. An answer that is an exception is raised.
    """

    def __init__(self, form: str):
        self.form = form
        self.calls: list[dict[str, Any]] = []
        self.routes: dict[tuple[str, str], Any] = {}

    def on(self, method: str, path: str, *answers: Any) -> None:
        self.routes[(f"HTTP_METHOD_{method}", path)] = list(answers)

    def handle(self, method: str, path: str, handler: Callable[[dict], Any]) -> None:
        self.routes[(f"HTTP_METHOD_{method}", path)] = handler

    def wrap(self, payload: Any, status: int = 200) -> dict[str, Any]:
        if isinstance(payload, str):
            return {"status": status, "body": payload}
        if self.form == "body":
            return {"status": status, "body": json.dumps(payload)}
        return {"status": status, "structuredBody": payload}

    def post(self, path, body, params=None, *, idempotent=False):
        self.calls.append({"path": path, "body": copy.deepcopy(body), "idempotent": idempotent})
        route = self.routes[(body["method"], body["path"])]
        if callable(route):
            answer = route(body)
        else:
            answer = route.pop(0) if len(route) > 1 else route[0]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, tuple):
            return self.wrap(*answer)
        return self.wrap(answer)

    def url(self, path):
        return f"https://us-central1-aiplatform.googleapis.com/{path}"

    @property
    def slurm_calls(self) -> list[tuple[str, str]]:
        return [
            (c["body"]["method"].removeprefix("HTTP_METHOD_"), c["body"]["path"])
            for c in self.calls
        ]


def make_job(**overrides) -> script.JobDescription:
    fields = dict(
        run_key="run-1",
        partition="spot",
        working_directory="/home/alice/runs",
        command=["python", "-m", "vsp.examples.trainer"],
        time_limit_minutes=60,
        warning_signal="USR1@30",
    )
    fields.update(overrides)
    return script.JobDescription(**fields)


def err(number, text, description=""):
    return {"error_number": number, "error": text, "description": description, "source": "x"}


def record(job_id, state, name="run-1", submit=0, **extra):
    return {
        "job_id": job_id,
        "name": name,
        "job_state": state,
        "submit_time": {"set": True, "infinite": False, "number": submit},
        **extra,
    }
