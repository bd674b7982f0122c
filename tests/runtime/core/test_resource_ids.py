"""The location becomes part of the host name and the project part of every path: both are
checked against Google's formats before any URL is built, so no parameter can move the token."""

from __future__ import annotations

import pytest

from vsp.components.runtime.core import errors, rest, vertex_locations


@pytest.mark.parametrize(
    "location",
    ["evil.example/#", "us-central1.evil.example", "us-central1/", "US-CENTRAL1", "", "global"],
)
def test_a_location_that_is_not_a_region_is_refused_before_any_request(location, monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    with pytest.raises(errors.UserError):
        rest.VertexRestClient(location)


@pytest.mark.parametrize("project", ["a/b", "..", "evil.example/#", "P!", "x" * 40])
def test_a_project_that_is_not_a_project_id_is_refused_in_any_path(project, monkeypatch):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "127.0.0.1:9")
    client = rest.VertexRestClient("us-central1")
    with pytest.raises(errors.UserError, match="Fix"):
        client.url(f"v1/projects/{project}/locations/us-central1/customJobs")


@pytest.mark.parametrize(
    "good",
    [("europe-west4", "my-project-123"), ("northamerica-northeast1", "123456789"),
     ("us-central1", "example.com:my-project")],
)  # fmt: skip
def test_real_names_pass(good, monkeypatch):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "127.0.0.1:9")
    location, project = good
    client = rest.VertexRestClient(location)
    assert client.url(f"v1/projects/{project}/locations/{location}").endswith(location)


def test_an_unlisted_region_is_used_with_a_warning_naming_the_listed_ones(monkeypatch, caplog):
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", "127.0.0.1:9")
    assert rest.VertexRestClient("us-centrl1").location == "us-centrl1"
    assert caplog.messages == [
        "location 'us-centrl1' is not among the Vertex AI regions known to this version "
        f"({vertex_locations.SOURCE}); regions that look like it: us-central1, us-east1, "
        "us-east4. If it is a typo, requests will find nothing there."
    ]
    caplog.clear()
    rest.VertexRestClient("europe-west4")
    assert caplog.messages == []
