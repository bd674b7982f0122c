"""Fixtures of the registry tests."""

import numpy as np
import pytest

from vsp.components.runtime.trainer import model_files


@pytest.fixture
def gcs_root(tmp_path, monkeypatch):
    """A fake GCS FUSE root holding a verified model dir at ``gs://bucket/model``."""
    root = tmp_path / "gcs"
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(root))
    model_files.write_model_dir(root / "bucket" / "model", {"w": np.arange(4.0)}, {})
    return root
