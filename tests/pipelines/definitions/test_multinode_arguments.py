"""``vsp run-local --nodes N``: the arguments of a multi-node local run, and what is refused."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import script
from vsp.pipelines.cli import main
from vsp.pipelines.definitions import catalog


def test_two_nodes_train_the_ddp_example_through_srun(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    (tmp_path / "srun").write_text("#!/bin/sh\n")
    (tmp_path / "srun").chmod(0o755)
    one = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    two = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"), nodes=2)
    real = catalog.local_arguments(
        "slurm-spot-training", str(tmp_path / "shared"), real_slurm=True, nodes=2
    )
    assert "nodes" not in one and "launcher" not in one["training_options"]
    assert one["command"][1:3] == ["-m", "vsp.examples.trainer"]
    assert two["nodes"] == 2 and two["command"][1:3] == ["-m", "vsp.examples.ddp_trainer"]
    assert two["training_options"]["launcher"] == "srun"
    assert two["training_options"]["environment"] == {"GLOO_SOCKET_IFNAME": "lo"}
    assert two["training_options"]["poll_seconds"] == one["training_options"]["poll_seconds"]
    # The local real Slurm's srun is not in a cluster's default PATH: the job gets it first.
    assert real["training_options"]["environment"]["PATH"] == f"{tmp_path}:{script.DEFAULT_PATH}"


@pytest.mark.parametrize("nodes", [0, 3])
def test_more_nodes_than_the_local_pool_is_refused(tmp_path, nodes):
    with pytest.raises(errors.UserError, match="Spot pool has 2 nodes"):
        catalog.local_arguments("slurm-spot-training", str(tmp_path), nodes=nodes)


def test_nodes_only_for_the_training_pipeline(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main.main, ["run-local", "cluster-lifecycle", "--nodes", "2"])
    assert result.exit_code == 2
    assert "only slurm-spot-training trains on several nodes" in result.output
