"""Identifier patterns refuse a trailing newline (Python's ``$`` matches before one).

A run key, Slurm name, model id, label, alias or resource name ending in ``\\n`` reaches Slurm
scripts, label maps and URLs; every pattern the runtime validates with ends in ``\\Z``.
"""

from __future__ import annotations

import re

import pytest

from vsp.components.runtime.cluster import rules_base
from vsp.components.runtime.core import env_names, gcp_labels
from vsp.components.runtime.registry import client
from vsp.components.runtime.slurm import job_checks
from vsp.components.runtime.training.backends import custom_job_spec
from vsp.pipelines.vertex import jobs, templates

VALID = [
    (job_checks.RUN_KEY_RE, "vsp-run-1"),
    (job_checks.SLURM_NAME_RE, "spot"),
    (env_names.ENV_NAME_RE, "HOME"),
    (custom_job_spec._ENV_NAME, "HOME"),
    (client.MODEL_ID, "slurm-spot-example"),
    (client.ALIAS, "candidate"),
    (gcp_labels.KEY, "team"),
    (gcp_labels.VALUE, "ml"),
    (rules_base.CLUSTER_ID, "vsplocal"),
    (rules_base.POOL_ID, "spot"),
    (rules_base.ZONE, "us-central1-b"),
    (rules_base.NETWORK, "projects/p/global/networks/default"),
    (jobs.JOB_ID, "run-1"),
    (templates.TAG, "latest"),
]


@pytest.mark.parametrize(("pattern", "value"), VALID, ids=[p.pattern[:30] for p, _ in VALID])
def test_a_trailing_newline_is_refused(pattern: re.Pattern, value: str):
    assert pattern.match(value)
    assert not pattern.match(value + "\n")
    assert not pattern.match(value + "\nPrologFlags=x")


def test_the_checks_that_use_them_say_so():
    with pytest.raises(Exception, match="model_id 'm\\\\n' is invalid"):
        client._check_args("m\n", "name", "image", [])
    with pytest.raises(Exception, match="version alias 'ok\\\\n' is invalid. Fix: use 2-128"):
        client._check_args("m", "name", "image", ["ok\n"])
