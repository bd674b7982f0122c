"""Each cluster's own filesystem, and output files across requeues (``open_mode``)."""

from __future__ import annotations

import logging
import pathlib
import time

import pytest

from vsp.vertex_emulator import config
from vsp.vertex_emulator.slurm import filesystem as cluster_filesystem
from vsp.vertex_emulator.slurm.testing import SlurmTestClient


def start(factory, body, cluster_id="c1", **settings):
    server = factory(**settings)
    return server, SlurmTestClient.create_cluster(server.base_url, cluster_id, body)


def test_cluster_home_is_seen_by_its_jobs_only(slurm_emulator_factory, cluster_body, tmp_path):
    server, client = start(slurm_emulator_factory, cluster_body)
    home = server.state_dir / "slurm" / "c1" / "home"
    writer = client.submit("#!/bin/bash\nmkdir -p run && echo written > run/data\npwd\n")
    client.wait_state(writer, "COMPLETED")
    # Another job on the cluster reads it at the path the first one wrote it.
    seen = tmp_path / "seen"
    reader = client.submit(f"#!/bin/bash\ncat {home}/run/data > {seen}\n")
    client.wait_state(reader, "COMPLETED")
    assert seen.read_text() == "written\n"
    # The host (where pipeline steps run) sees an empty mount point.
    assert home.is_dir() and list(home.iterdir()) == []
    assert not (home / "run" / "data").exists()
    # Looking inside the cluster is explicit.
    data = pathlib.Path(server.app.slurm.host_path("c1", str(home / "run" / "data")))
    assert data.read_text() == "written\n"
    assert data.parent.parent == server.state_dir / "slurm" / "c1" / "disk"
    stdout = server.app.slurm.host_path("c1", str(home / f"slurm-{writer}.out"))
    assert pathlib.Path(stdout).read_text() == f"{home}\n"
    # Emulated Cloud Storage and other host paths are shared, as /gcs is on Vertex.
    assert server.app.slurm.host_path("c1", str(tmp_path / "x")) == str(tmp_path / "x")


def test_two_clusters_do_not_see_each_other(slurm_emulator_factory, cluster_body, tmp_path):
    server, first = start(slurm_emulator_factory, cluster_body, cluster_id="c1")
    second = SlurmTestClient.create_cluster(server.base_url, "c2", cluster_body)
    first.wait_state(first.submit("#!/bin/bash\necho one > mine\n"), "COMPLETED")
    probe = tmp_path / "probe"
    other = server.state_dir / "slurm" / "c1" / "home" / "mine"
    script = f"#!/bin/bash\nif test -e {other}; then echo yes; else echo no; fi > {probe}\n"
    job = second.submit(script)
    second.wait_state(job, "COMPLETED")
    assert probe.read_text() == "no\n"


def test_output_truncated_at_restart_unless_append(slurm_emulator_factory, cluster_body):
    server, client = start(slurm_emulator_factory, cluster_body)
    script = (
        '#!/bin/bash\necho "run ${SLURM_RESTART_COUNT:-0}"\n'
        '[ "${SLURM_RESTART_COUNT:-0}" -ge 1 ] && exit 0\nsleep 30\n'
    )
    truncated = client.submit(script, requeue=True, name="truncate")
    appended = client.submit(script, requeue=True, name="append", open_mode=["APPEND"])
    home = str(server.state_dir / "slurm" / "c1" / "home")
    for job_id in (truncated, appended):
        client.wait_state(job_id, "RUNNING")
        # RUNNING comes before the script's first line: preempt once "run 0" is written.
        output = pathlib.Path(server.app.slurm.host_path("c1", f"{home}/slurm-{job_id}.out"))
        deadline = time.monotonic() + 10
        while "run 0" not in (output.read_text() if output.exists() else ""):
            assert time.monotonic() < deadline, f"job {job_id} never wrote its first line"
            time.sleep(0.02)
        server.app.slurm.preempt_now("c1", job_id)
    lines = {}
    for job_id in (truncated, appended):
        done = client.wait_state(job_id, "COMPLETED", timeout=20)
        assert done["restart_cnt"] == 1
        path = server.app.slurm.host_path("c1", f"{home}/slurm-{job_id}.out")
        lines[job_id] = pathlib.Path(path).read_text().splitlines()
    assert lines[truncated] == ["run 1"]
    assert lines[appended] == ["run 0", "run 1"]


def test_isolation_on_refuses_to_start_without_namespaces(
    monkeypatch, slurm_emulator_factory, caplog
):
    monkeypatch.setattr(cluster_filesystem, "namespace_prefix", lambda: None)
    with pytest.raises(cluster_filesystem.IsolationUnavailableError, match="Fix: install"):
        slurm_emulator_factory()
    with caplog.at_level(logging.WARNING):
        server = slurm_emulator_factory(slurm_filesystem_isolation="auto")
    assert server.app.slurm.isolated_filesystems is False
    assert "clusters share the host filesystem" in caplog.text


def test_isolation_setting_is_validated():
    with pytest.raises(ValueError, match="'auto', 'on' or 'off'"):
        config.EmulatorSettings(slurm_filesystem_isolation="yes")
