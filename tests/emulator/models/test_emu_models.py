"""The emulator's Model Registry routes: upload, versions, aliases and errors."""

from __future__ import annotations

import json

import pytest
import requests

PARENT = "projects/test-project/locations/us-central1"
NAME = f"{PARENT}/models/mnist"


def _model(**changes):
    body = {
        "displayName": "mnist",
        "artifactUri": "gs://bucket/model/",
        "containerSpec": {"imageUri": "us-docker.pkg.dev/p/r/serve:1"},
        "labels": {"team": "ml"},
    }
    body.update(changes)
    return body


@pytest.fixture
def api(emulator_api):
    """Helpers: ``upload(**body)`` -> response, ``get(path)`` -> response, ``url(path)``."""

    class Api:
        url = staticmethod(emulator_api.url)

        @staticmethod
        def upload(**body):
            return requests.post(emulator_api.url(f"{PARENT}/models:upload"), json=body)

        @staticmethod
        def get(path):
            return requests.get(emulator_api.url(path))

        @staticmethod
        def merge(path, aliases):
            return requests.post(
                emulator_api.url(f"{path}:mergeVersionAliases"), json={"versionAliases": aliases}
            )

    return Api


def test_upload_new_model_is_version_1_with_default(api, emulator_api):
    response = api.upload(modelId="mnist", model=_model(versionDescription="first"))
    assert response.status_code == 200, response.text
    operation = response.json()
    assert operation["done"] is True
    assert operation["name"].startswith(f"{PARENT}/operations/")
    assert operation["metadata"]["@type"].endswith("UploadModelOperationMetadata")
    assert operation["response"] == {
        "@type": "type.googleapis.com/google.cloud.aiplatform.v1beta1.UploadModelResponse",
        "model": NAME,
        "modelVersionId": "1",
    }
    assert emulator_api.wait_operation(operation["name"])["response"]["modelVersionId"] == "1"
    model = api.get(NAME).json()
    assert model["name"] == NAME
    assert model["versionId"] == "1"
    assert model["versionAliases"] == ["default"]
    assert model["labels"] == {"team": "ml"}
    assert model["versionDescription"] == "first"
    assert model["containerSpec"]["imageUri"].endswith("serve:1")
    assert {"createTime", "updateTime", "versionCreateTime", "versionUpdateTime"} <= set(model)
    assert api.get(f"{NAME}@1").json() == model
    assert api.get(f"{NAME}@default").json() == model
    assert requests.get(api.url(NAME, "v1")).json() == model


def test_second_version_keeps_default_on_1_unless_passed(api):
    assert api.upload(modelId="mnist", model=_model()).status_code == 200
    second = api.upload(parentModel=NAME, model=_model(versionAliases=["candidate"]))
    assert second.json()["response"]["modelVersionId"] == "2"
    assert api.get(NAME).json()["versionId"] == "1"
    assert api.get(f"{NAME}@candidate").json()["versionId"] == "2"
    third = api.upload(parentModel=NAME, model=_model(versionAliases=["default"]))
    assert third.json()["response"]["modelVersionId"] == "3"
    assert api.get(NAME).json()["versionId"] == "3"
    versions = api.get(f"{NAME}:listVersions").json()["models"]
    assert [(v["versionId"], v["versionAliases"]) for v in versions] == [
        ("1", []),
        ("2", ["candidate"]),
        ("3", ["default"]),
    ]
    listed = api.get(f"{PARENT}/models").json()["models"]
    assert [(m["name"], m["versionId"]) for m in listed] == [(NAME, "3")]


def test_merge_version_aliases_moves_and_removes(api):
    api.upload(modelId="mnist", model=_model(versionAliases=["prod"]))
    api.upload(parentModel=NAME, model=_model(versionAliases=["staging"]))
    moved = api.merge(f"{NAME}@2", ["prod", "-staging"])
    assert moved.status_code == 200, moved.text
    assert moved.json()["versionAliases"] == ["prod"]
    assert api.get(f"{NAME}@1").json()["versionAliases"] == ["default"]
    assert api.get(f"{NAME}@prod").json()["versionId"] == "2"
    assert api.get(f"{NAME}@staging").status_code == 404
    assert api.merge(f"{NAME}@staging", ["x1"]).status_code == 404
    by_alias = api.merge(f"{NAME}@prod", ["default"])
    assert by_alias.json()["versionAliases"] == ["prod", "default"]
    assert api.get(f"{NAME}@1").json()["versionAliases"] == []


def test_default_cannot_be_removed(api):
    api.upload(modelId="mnist", model=_model())
    response = api.merge(f"{NAME}@1", ["-default"])
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    violations = error["details"][0]["fieldViolations"]
    assert violations[0]["field"] == "version_aliases[0]"
    assert api.get(NAME).json()["versionAliases"] == ["default"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"modelId": "1bad", "model": _model()}, "model_id"),
        ({"modelId": "Bad", "model": _model()}, "model_id"),
        ({"modelId": "ok"}, "model"),
        ({"modelId": "ok", "model": _model(displayName="")}, "model.display_name"),
        ({"modelId": "ok", "model": _model(versionAliases=["Bad"])}, "model.version_aliases[0]"),
        ({"modelId": "ok", "model": _model(labels={"A": "b"})}, "model.labels[A]"),
        ({"modelId": "ok", "model": _model(containerSpec={})}, "model.container_spec.image_uri"),
        ({"parentModel": f"{NAME}@1", "model": _model()}, "parent_model"),
        ({"modelId": "ok", "parentModel": NAME, "model": _model()}, "model_id"),
    ],
)
def test_upload_validation(api, body, field):
    response = api.upload(**body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    fields = [v.get("field") for v in error["details"][0]["fieldViolations"]]
    assert field in fields


@pytest.mark.parametrize(
    ("model", "field", "phrase"),
    [
        (  # a 5,000-character display name was once registered
            _model(displayName="m" * 5000),
            "model.display_name",
            "display_name has 5000 characters; at most 128 are allowed.",
        ),
        (_model(displayName=7), "model.display_name", "display_name is required."),
        (  # an image URI with a newline was once registered
            _model(containerSpec={"imageUri": "us-docker.pkg.dev/p/r/serve:1\nx"}),
            "model.container_spec.image_uri",
            "Invalid image URI 'us-docker.pkg.dev/p/r/serve:1\\nx'",
        ),
        (
            _model(containerSpec={"imageUri": "us-docker.pkg.dev/p/r/serve :1"}),
            "model.container_spec.image_uri",
            "without whitespace or control characters",
        ),
    ],
)
def test_upload_refuses_what_vertex_refuses(api, model, field, phrase):
    response = api.upload(modelId="ok", model=model)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    violations = error["details"][0]["fieldViolations"]
    assert [v["field"] for v in violations] == [field]
    assert phrase in violations[0]["description"] and phrase in error["message"]
    assert api.get(f"{PARENT}/models/ok").status_code == 404  # nothing stored
    assert api.upload(modelId="ok", model=_model(displayName="m" * 128)).status_code == 200


def test_upload_conflicts_and_missing(api):
    assert api.upload(modelId="mnist", model=_model()).status_code == 200
    again = api.upload(modelId="mnist", model=_model())
    assert again.status_code == 409
    assert again.json()["error"]["status"] == "ALREADY_EXISTS"
    missing = api.upload(parentModel=f"{PARENT}/models/nope", model=_model())
    assert missing.status_code == 404
    assert missing.json()["error"]["status"] == "NOT_FOUND"
    assert api.get(f"{PARENT}/models/nope").status_code == 404
    assert api.get(f"{NAME}@9").status_code == 404
    assert api.get(f"{PARENT}/models/nope:listVersions").status_code == 404


def test_models_persist_across_restart(emulator_factory, tmp_path, emulator_api_for):
    first = emulator_factory(tmp_path / "state")
    api = emulator_api_for(first)
    url = api.url(f"{PARENT}/models:upload")
    assert requests.post(url, json={"modelId": "mnist", "model": _model()}).status_code == 200
    first.stop()
    second = emulator_factory(tmp_path / "state")
    model = requests.get(emulator_api_for(second).url(NAME)).json()
    assert (model["versionId"], model["versionAliases"]) == ("1", ["default"])


def test_delete_version_refuses_the_only_and_the_default_version(api):
    assert api.upload(modelId="mnist", model=_model()).status_code == 200

    def delete(version):
        return requests.delete(api.url(f"{NAME}@{version}:deleteVersion"))

    only = delete("1")
    assert only.status_code == 400
    assert only.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert "only version of the model" in only.json()["error"]["message"]
    assert api.upload(parentModel=NAME, model=_model()).status_code == 200
    default = delete("1")
    assert default.status_code == 400 and "default version" in default.json()["error"]["message"]
    gone = delete("2")
    assert gone.status_code == 200 and gone.json()["done"] is True
    assert [v["versionId"] for v in api.get(f"{NAME}:listVersions").json()["models"]] == ["1"]
    assert delete("2").status_code == 404


def test_list_versions_honours_page_size(api):
    assert api.upload(modelId="mnist", model=_model()).status_code == 200
    for _ in range(2):
        assert api.upload(parentModel=NAME, model=_model()).status_code == 200
    seen, token = [], ""
    while True:
        query = f"?pageSize=2&pageToken={token}" if token else "?pageSize=2"
        body = api.get(f"{NAME}:listVersions{query}").json()
        seen.append([v["versionId"] for v in body["models"]])
        token = body.get("nextPageToken", "")
        if not token:
            break
    assert seen == [["1", "2"], ["3"]]


def test_list_models_honours_page_size(api):
    for model_id in ("c-model", "a-model", "b-model"):
        assert api.upload(modelId=model_id, model=_model()).status_code == 200
    first = api.get(f"{PARENT}/models?pageSize=2").json()
    assert [m["name"].rsplit("/", 1)[1] for m in first["models"]] == ["a-model", "b-model"]
    second = api.get(f"{PARENT}/models?pageSize=2&pageToken={first['nextPageToken']}").json()
    assert [m["name"].rsplit("/", 1)[1] for m in second["models"]] == ["c-model"]
    assert "nextPageToken" not in second


def test_versions_are_stored_one_document_each(emulator, api):
    assert api.upload(modelId="mnist", model=_model(versionAliases=["prod"])).status_code == 200
    assert api.upload(parentModel=NAME, model=_model(versionAliases=["prod"])).status_code == 200
    store = emulator.app.store
    assert store.get("models", NAME)["aliases"] == {"default": "1", "prod": "2"}
    assert store.keys("model_versions") == [f"{NAME}@{1:020d}", f"{NAME}@{2:020d}"]
    assert store.get("model_versions", f"{NAME}@{1:020d}")["versionAliases"] == ["default"]
    gone = requests.delete(api.url(f"{NAME}@2:deleteVersion"))
    assert gone.status_code == 200, gone.text
    assert store.get("models", NAME)["aliases"] == {"default": "1"}
    assert api.get(f"{NAME}@prod").status_code == 404


def test_models_of_the_earlier_layout_are_converted(emulator_factory, tmp_path, emulator_api_for):
    legacy_dir = tmp_path / "state" / "store"
    legacy_dir.mkdir(parents=True)
    version = {
        "name": NAME,
        "displayName": "mnist",
        "labels": {},
        "createTime": "2026-01-01T00:00:00.000000Z",
        "updateTime": "2026-01-01T00:00:00.000000Z",
    }
    legacy = {
        NAME: {
            "next": 3,
            "createTime": "2026-01-01T00:00:00.000000Z",
            "versions": {
                "1": {**version, "versionId": "1", "versionAliases": ["default"]},
                "2": {**version, "versionId": "2", "versionAliases": ["prod"]},
            },
        }
    }
    (legacy_dir / "models.json").write_text(json.dumps(legacy))
    emulator = emulator_factory(tmp_path / "state")
    api = emulator_api_for(emulator)
    assert requests.get(api.url(f"{NAME}@prod")).json()["versionId"] == "2"
    listed = requests.get(api.url(f"{NAME}:listVersions")).json()["models"]
    assert [(v["versionId"], v["versionAliases"]) for v in listed] == [
        ("1", ["default"]),
        ("2", ["prod"]),
    ]
    upload = {"parentModel": NAME, "model": _model()}
    answer = requests.post(api.url(f"{PARENT}/models:upload"), json=upload).json()
    assert answer["response"]["modelVersionId"] == "3"
    assert (legacy_dir / "models.json.migrated").exists()
