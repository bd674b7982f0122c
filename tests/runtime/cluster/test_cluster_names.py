"""A step names its cluster by id or by create_cluster's full name; both are checked."""

from __future__ import annotations

import pytest

from vsp.components.runtime.cluster import names
from vsp.components.runtime.core import errors

NAME = "projects/p-1/locations/us-central1/modelDevelopmentClusters/vsplocal"


@pytest.mark.parametrize(
    ("cluster_id", "cluster_name", "expected"),
    [
        ("vsplocal", "", "vsplocal"),
        ("", NAME, "vsplocal"),
        ("vsplocal", NAME, "vsplocal"),
        # Vertex may answer with the project number: the project part is not compared.
        ("", "projects/123456/locations/us-central1/modelDevelopmentClusters/c1", "c1"),
    ],
)
def test_the_id_comes_from_either(cluster_id, cluster_name, expected):
    assert names.resolve_cluster_id("us-central1", cluster_id, cluster_name) == expected


@pytest.mark.parametrize(
    ("location", "cluster_id", "cluster_name", "message"),
    [
        ("us-central1", "", "", "no cluster given. Fix: pass cluster_name"),
        ("us-central1", "", "vsplocal", "'vsplocal' is not a cluster's full name. Fix:"),
        ("us-central1", "other", NAME, "names cluster 'vsplocal' but cluster_id is 'other'"),
        ("europe-west4", "", NAME, "is in 'us-central1' but location is 'europe-west4'"),
        ("us-central1", "Bad_Id", "", "cluster_id 'Bad_Id' is not a training cluster id"),
        (
            "us-central1",
            "",
            "projects/p/locations/us-central1/modelDevelopmentClusters/x/y",
            "is not a cluster's full name",
        ),
    ],
)
def test_wrong_or_disagreeing_names_are_refused(location, cluster_id, cluster_name, message):
    with pytest.raises(errors.UserError) as caught:
        names.resolve_cluster_id(location, cluster_id, cluster_name)
    assert message in str(caught.value)
