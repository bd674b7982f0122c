"""The REST client: endpoint switch, credentials, retries."""

from __future__ import annotations

import google.auth
import google.auth.exceptions
import pytest

from vsp.components.runtime.core import errors, rest

FAST = rest.RetryPolicy(initial=0.01, maximum=0.02, deadline=5)
PATH = "v1beta1/projects/test-project/locations/us-central1/modelDevelopmentClusters"


def test_endpoint_is_the_regional_host_without_emulator(monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    assert rest.service_root("europe-west4", rest.emulator_host()) == (
        "https://europe-west4-aiplatform.googleapis.com"
    )


def test_emulator_host_switches_to_plain_http(monkeypatch):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "localhost:8618")
    client = rest.VertexRestClient("us-central1")
    assert client.url(PATH) == f"http://localhost:8618/{PATH}"
    assert "Authorization" not in client._session.headers


def test_missing_credentials_is_a_user_error_naming_the_fix(monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)

    def no_credentials(scopes=None):
        raise google.auth.exceptions.DefaultCredentialsError("none")

    monkeypatch.setattr(google.auth, "default", no_credentials)
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    with pytest.raises(errors.UserError, match="application-default login"):
        rest.VertexRestClient("us-central1")


def test_a_key_file_that_is_not_there_is_named_not_called_no_credentials(monkeypatch, tmp_path):
    # It said "no Google Cloud credentials found" and sent the user to gcloud login.
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    missing = tmp_path / "nope.json"
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(missing))
    with pytest.raises(errors.UserError) as caught:
        rest.VertexRestClient("us-central1")  # google-auth's own reading of the variable
    assert str(caught.value) == (
        f"no usable Google Cloud credentials (File {missing} was not found). Fix: check the key "
        f"file GOOGLE_APPLICATION_CREDENTIALS names ({missing}), or unset it and run `gcloud "
        "auth application-default login`, or set VERTEX_EMULATOR_HOST to use the local emulator."
    )


def test_get_is_retried_through_503_and_reset(emulator):
    emulator.add_fault(action="status", http_status=503, method="GET", path=PATH, times=1)
    emulator.add_fault(action="reset", method="GET", path=PATH, times=1)
    client = rest.VertexRestClient("us-central1", retry=FAST)
    assert client.get(PATH) == {}
    assert [e["status"] for e in emulator.journal()] == [503, "reset", 200]


def test_post_is_not_retried_unless_idempotent(emulator, cluster_body):
    emulator.add_fault(action="status", http_status=503, method="POST", path=PATH, times=1)
    client = rest.VertexRestClient("us-central1", retry=FAST)
    with pytest.raises(errors.UnavailableError):
        client.post(PATH, cluster_body, params={"model_development_cluster_id": "c1"})
    assert len(emulator.journal()) == 1


def test_google_error_json_becomes_the_typed_error(emulator):
    client = rest.VertexRestClient("us-central1", retry=FAST)
    with pytest.raises(errors.NotFoundError) as info:
        client.get(f"{PATH}/missing")
    assert info.value.http_status == 404 and info.value.status == "NOT_FOUND"
    with pytest.raises(errors.InvalidArgumentError) as bad:
        client.post(PATH, {"nodePools": []}, params={"model_development_cluster_id": "Bad_Id"})
    assert bad.value.details, "fieldViolations are kept for the message"
