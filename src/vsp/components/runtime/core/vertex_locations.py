"""The Vertex AI locations (regions) a request may name: data only, one list.

Source: the regions Google's Vertex AI SDK accepts, ``SUPPORTED_REGIONS`` in
``google/cloud/aiplatform/constants/base.py`` of google-cloud-aiplatform 1.165.1, read on
2026-12-05; it follows the page https://cloud.google.com/vertex-ai/docs/general/locations
("Vertex AI locations"). ``global`` is left out: the Pipelines, training-cluster and Model
Registry APIs are regional (the page: "Vertex AI doesn't support a global location"). A feature
may still be missing in a listed region (training clusters and GPU machine types are in fewer);
the service says so when asked.
"""

import difflib

SOURCE = (
    "google-cloud-aiplatform 1.165.1 SUPPORTED_REGIONS, read 2026-12-05 "
    "(https://cloud.google.com/vertex-ai/docs/general/locations)"
)

LOCATIONS = frozenset(
    {
        "africa-south1",
        "asia-east1",
        "asia-east2",
        "asia-northeast1",
        "asia-northeast2",
        "asia-northeast3",
        "asia-south1",
        "asia-south2",
        "asia-southeast1",
        "asia-southeast2",
        "australia-southeast1",
        "australia-southeast2",
        "europe-central2",
        "europe-north1",
        "europe-north2",
        "europe-southwest1",
        "europe-west1",
        "europe-west2",
        "europe-west3",
        "europe-west4",
        "europe-west6",
        "europe-west8",
        "europe-west9",
        "europe-west12",
        "me-central1",
        "me-central2",
        "me-west1",
        "northamerica-northeast1",
        "northamerica-northeast2",
        "southamerica-east1",
        "southamerica-west1",
        "us-central1",
        "us-east1",
        "us-east4",
        "us-east5",
        "us-east7",
        "us-south1",
        "us-west1",
        "us-west2",
        "us-west3",
        "us-west4",
        "us-west8",
    }
)


def is_location(name: str) -> bool:
    """Whether ``name`` is a Vertex AI region of the list."""
    return name in LOCATIONS


def nearest(name: str, count: int = 3) -> list[str]:
    """Listed regions that look like ``name``, for an error's fix: close spellings in the same
    geography (``us``, ``europe``...) first, then the rest of that geography, then other close
    spellings."""
    close = difflib.get_close_matches(str(name), sorted(LOCATIONS), n=count, cutoff=0.7)
    area = str(name).split("-", 1)[0] + "-"
    same_area = [loc for loc in close if loc.startswith(area)]
    rest_of_area = sorted(loc for loc in LOCATIONS if loc.startswith(area) and loc not in close)
    others = [loc for loc in close if not loc.startswith(area)]
    return (same_area + rest_of_area + others)[:count] or ["us-central1"]
