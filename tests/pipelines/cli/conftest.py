"""Fixtures of the command-line tests."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture
def template(tmp_path):
    """A private copy of a compiled template (the compiled/ folder may change meanwhile)."""
    path = tmp_path / "cluster_lifecycle.yaml"
    shutil.copyfile("src/vsp/compiled/pipelines/cluster_lifecycle.yaml", path)
    return str(path)
