"""One model version per run, even when copies of the register step race or a POST lands late.

Uploads are not idempotent, so the registry can hold two versions labelled with one run: two
copies of the step (a task retry while the lost pod still runs), or a first POST whose answer
was lost and that the service applied after the step looked. Every copy then keeps the lowest
version, moves the run's aliases onto it and deletes the others.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from vsp.components.runtime.core import polling, rest
from vsp.components.runtime.registry import client as model_registry
from vsp.components.runtime.registry import versions as model_versions
from vsp.components.runtime.trainer import model_files
from vsp.vertex_emulator.models import records as model_records

PROJECT, LOCATION = "test-project", "us-central1"
NAME = f"projects/{PROJECT}/locations/{LOCATION}/models/mnist"
FAST = polling.Backoff(initial=0.02, maximum=0.05, jitter=0)


def client() -> rest.VertexRestClient:
    return rest.VertexRestClient(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))


def register(
    the_client,
    run_label="run-1",
    aliases=("candidate",),
    settle_seconds=0.3,
    uri="gs://bucket/model",
):
    return model_registry.register_model(
        the_client,
        project=PROJECT,
        location=LOCATION,
        model_id="mnist",
        display_name="MNIST",
        artifact_uri=uri,
        serving_image="us-docker.pkg.dev/p/r/serve:1",
        version_aliases=list(aliases),
        run_label=run_label,
        retry_delay=0.01,
        poll_backoff=FAST,
        settle_seconds=settle_seconds,
    )


def versions(the_client) -> list[tuple[str, str, list[str]]]:
    listed = the_client.get(f"v1/{NAME}:listVersions")["models"]
    return [(v["versionId"], v["labels"]["vsp-pipeline-run"], v["versionAliases"]) for v in listed]


class RacingClient(rest.VertexRestClient):
    """Holds its upload POST until every racing copy has looked and found nothing."""

    def __init__(self, barrier: threading.Barrier):
        super().__init__(LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05))
        self.barrier = barrier

    def post(self, path, body, params=None, *, idempotent=False):
        if path.endswith("models:upload"):
            self.barrier.wait(timeout=30)
        return super().post(path, body, params, idempotent=idempotent)


@pytest.mark.parametrize("existing", [False, True])
def test_two_concurrent_copies_of_one_run_converge_on_one_version(emulator, gcs_root, existing):
    if existing:
        register(client(), run_label="run-0", aliases=())
    barrier = threading.Barrier(2)
    results, failures = [], []

    def copy():
        try:
            results.append(register(RacingClient(barrier)))
        except Exception as exc:  # reported below
            failures.append(exc)

    threads = [threading.Thread(target=copy) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert failures == []
    # Both uploads happened; both copies report the same, lowest version.
    uploads = [e for e in emulator.journal() if e["path"].endswith("models:upload")]
    assert len(uploads) == (3 if existing else 2)
    winner = "2" if existing else "1"
    assert sorted(r.version_id for r in results) == [winner, winner]
    remaining = [v for v in versions(client()) if v[1] == "run-1"]
    assert [(v[0], "candidate" in v[2]) for v in remaining] == [(winner, True)]
    deletes = [e for e in emulator.journal() if e["path"].endswith(":deleteVersion")]
    deleted = {e["path"].split("@")[1].removesuffix(":deleteVersion") for e in deletes}
    # A new model: the service refuses the second modelId (409), so that copy finds the
    # first version; a new version: both uploads land, and the higher one is deleted.
    assert deleted == ({"3"} if existing else set())


def test_a_first_post_applied_late_is_found_before_the_resend(emulator, gcs_root):
    # The first POST is applied but its answer is lost; the step looks again before resending.
    emulator.add_fault(action="reset_after", method="POST", path="models:upload$")
    result = register(client())
    assert (result.version_id, result.reused) == ("1", False)
    assert [v[:2] for v in versions(client())] == [("1", "run-1")]


def test_a_duplicate_found_later_is_cleaned_up_by_the_next_look(emulator, gcs_root):
    # Two versions of run-1 already exist (a late POST landed after the step finished): a
    # retried step keeps the lowest and deletes the other.
    register(client(), aliases=())
    store = emulator.app.store
    record = model_records.load(store, NAME)
    first = model_records.version(store, NAME, "1")
    duplicate = {**first, "versionId": "2", "versionAliases": []}
    model_records.put_version(store, duplicate)
    model_records.give_aliases(store, record, duplicate, ["candidate"], first["updateTime"])
    model_records.put_version(store, duplicate)
    record["next"] = 3
    store.put(model_records.MODELS, NAME, record)
    result = register(client())
    assert (result.version_id, result.reused) == ("1", True)
    assert versions(client()) == [("1", "run-1", ["default", "candidate"])]


def test_two_model_directories_of_one_run_are_two_versions_and_each_retry_finds_its_own(
    emulator, gcs_root
):
    """Two registering tasks of one run without a task_id: the second is not the first's."""
    model_files.write_model_dir(gcs_root / "bucket" / "model-b", {"w": np.arange(3.0)}, {})
    first = register(client(), aliases=())
    second = register(client(), aliases=(), uri="gs://bucket/model-b")
    assert (first.version_id, second.version_id, second.reused) == ("1", "2", False)
    again = register(client(), aliases=(), uri="gs://bucket/model-b/")  # a retry of the second
    assert (again.version_id, again.reused) == ("2", True)
    listed = client().get(f"v1/{NAME}:listVersions")["models"]
    assert [(v["versionId"], v["artifactUri"]) for v in listed] == [
        ("1", "gs://bucket/model"),
        ("2", "gs://bucket/model-b"),
    ]


def test_registering_over_another_runs_model_directory_is_warned_about(emulator, gcs_root, caplog):
    # A schedule's fixed model_dir: run 2 wrote over the folder version 1 serves, silently.
    register(client(), run_label="night-1", aliases=())
    with caplog.at_level("WARNING", logger=model_registry.__name__):
        second = register(client(), run_label="night-2", aliases=())
        register(client(), run_label="night-2", aliases=())  # its retry: nothing new to say
    assert second.version_id == "2"
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == [
        f"gs://bucket/model is also the model directory of version(s) 1 of {NAME}, registered "
        "by other runs: this run wrote its model over theirs, so they now serve this run's "
        "files. Fix: give model_dir a {run} (a folder per run)"
    ]


def test_versions_are_read_page_by_page(emulator, gcs_root, monkeypatch):
    for run in ("run-0", "run-1", "run-2"):
        register(client(), run_label=run, aliases=())
    monkeypatch.setattr(model_versions, "PAGE_SIZE", 1)
    exists, found = model_versions.run_versions(client(), NAME, "run-2")
    assert exists and [v["versionId"] for v in found] == ["3"]


@pytest.mark.parametrize("hold", [4.0, pytest.param(8.0, marks=pytest.mark.slow)])
def test_an_upload_held_for_seconds_lands_late_without_a_second_version(emulator, gcs_root, hold):
    """Issue 31: an upload the service holds 4-8 s and applies after the step gave up on it.

    The step resends (after looking), gets @2; the held first POST then lands as @3. The step
    keeps watching the run's versions after that unknown outcome: @3 is deleted, and the alias
    stays on @2, the version the run reports.
    """
    register(client(), run_label="run-0", aliases=())
    emulator.add_fault(action="delay", method="POST", path="models:upload$", seconds=hold)
    impatient = rest.VertexRestClient(
        LOCATION, retry=rest.RetryPolicy(initial=0.01, maximum=0.05), timeout=1.0
    )
    result = register(impatient, settle_seconds=hold + 2.0)
    # Both POSTs have landed by now (the held one within ``hold`` s of being sent).
    deadline = time.monotonic() + hold + 5
    uploads = []
    while len(uploads) < 2 and time.monotonic() < deadline:
        uploads = [
            e
            for e in emulator.journal()
            if e["path"].endswith("models:upload")
            and e["body"]["model"]["labels"]["vsp-pipeline-run"] == "run-1"
        ]
        time.sleep(0.05)
    assert [e["status"] for e in uploads] == [200, 200]
    remaining = [v for v in versions(client()) if v[1] == "run-1"]
    assert [(v[0], "candidate" in v[2]) for v in remaining] == [(result.version_id, True)]
    holders = [v[0] for v in versions(client()) if "candidate" in v[2]]
    assert holders == [result.version_id] == ["2"]
