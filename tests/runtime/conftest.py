"""Fixtures of the runtime tests: the Slurm Job API client on a fake REST client."""

from __future__ import annotations

import pytest
from slurm_fakes import REF, FakeRest

from vsp.components.runtime.slurm import api


@pytest.fixture(params=["body", "structuredBody"])
def fake(request) -> FakeRest:
    return FakeRest(request.param)


@pytest.fixture
def client(fake) -> api.SlurmClient:
    return api.SlurmClient(fake, REF)
