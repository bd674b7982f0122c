"""The progress beacon the batch script keeps, run for real in bash.

The payload itself reads the beacon at chosen moments (started, after a signal), so the tests
see each state without timing the script from outside.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from slurm_fakes import make_job as make

from vsp.components.runtime.training import beacon as beacon_lib

PY = sys.executable

# Copies the beacon once running, then on SIGTERM copies it again (the notice) and exits 143.
WATCHER = """
import json, pathlib, signal, sys, time
beacon, seen = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def on_term(signum, frame):
    (seen / "notice.json").write_text(beacon.read_text())
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
for _ in range(500):
    if beacon.exists() and json.loads(beacon.read_text())["state"] == "running":
        break
    time.sleep(0.01)
(seen / "running.json").write_text(beacon.read_text())
time.sleep(60)
"""

# Waits until a heartbeat rewrote the beacon (a later write time), copies it, exits 3.
HEARTBEAT = """
import json, pathlib, sys, time
beacon, seen = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
first = None
for _ in range(1000):
    try:
        doc = json.loads(beacon.read_text())
    except (OSError, ValueError):
        doc = None
    if doc and doc["state"] == "running":
        first = first or doc
        if doc["time"] > first["time"]:
            (seen / "first.json").write_text(json.dumps(first))
            (seen / "beat.json").write_text(json.dumps(doc))
            sys.exit(3)
    time.sleep(0.01)
sys.exit(9)
"""


def run(tmp_path: Path, command, env_extra: dict[str, str]) -> subprocess.Popen:
    desc = make(command=command, working_directory=str(tmp_path / "work"))
    script = tmp_path / "job.sh"
    script.write_text(desc.batch_script())
    env = dict(item.split("=", 1) for item in desc.environment_list())
    env.update(env_extra)
    return subprocess.Popen(["/bin/bash", str(script)], env=env, cwd=tmp_path)


def slurm_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "VSP_GCS_FUSE_ROOT": str(tmp_path / "gcs"),
        "VSP_BEACON_DIR": "gs://bucket/ckpt.beacon",
        "SLURM_JOB_ID": "4242",
        "SLURM_RESTART_COUNT": "2",
        "TMPDIR": str(tmp_path),
        **extra,
    }


def watch_until_running_then_notice(tmp_path: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """Runs the watcher payload under the batch script with ``env``; once its beacon says
    ``running``, sends the notice (SIGTERM) and waits for the 143 exit. The beacon file and
    the folder of the states the payload saw."""
    beacon = tmp_path / "gcs" / "bucket" / "ckpt.beacon" / "vsp-beacon-4242.json"
    seen = tmp_path / "seen"
    seen.mkdir()
    process = run(tmp_path, [PY, "-c", WATCHER, str(beacon), str(seen)], env)
    try:
        for _ in range(2000):
            if (seen / "running.json").exists():
                break
            subprocess.run(["sleep", "0.01"], check=True)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 143
    finally:
        if process.poll() is None:
            process.kill()
    return beacon, seen


def test_beacon_shows_running_then_notice_then_exiting_with_the_exit_code(tmp_path, monkeypatch):
    beacon, seen = watch_until_running_then_notice(tmp_path, slurm_env(tmp_path))
    running = json.loads((seen / "running.json").read_text())
    notice = json.loads((seen / "notice.json").read_text())
    final = json.loads(beacon.read_text())
    assert (running["job"], running["restart"], running["state"], running["rc"]) == (
        "4242", 2, "running", None,
    )  # fmt: skip
    assert (notice["state"], notice["rc"]) == ("notice", None)
    assert (final["state"], final["rc"]) == ("exiting", 143)
    assert final["since"] >= notice["since"] >= running["since"]
    # The step reads the same file through the Cloud Storage mapping.
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(tmp_path / "gcs"))
    read = beacon_lib.read("gs://bucket/ckpt.beacon", "4242")
    assert (read.state, read.restart, read.rc, read.live) == ("exiting", 2, 143, False)
    # Nothing left behind: no temp copies, no state file.
    assert sorted(p.name for p in beacon.parent.iterdir()) == ["vsp-beacon-4242.json"]
    assert not list(tmp_path.glob("vsp-beacon-*"))


def test_heartbeat_rewrites_the_same_state_with_a_later_time(tmp_path):
    beacon = tmp_path / "gcs" / "bucket" / "ckpt.beacon" / "vsp-beacon-4242.json"
    seen = tmp_path / "seen"
    seen.mkdir()
    env = slurm_env(tmp_path, VSP_BEACON_HEARTBEAT="0.2")
    process = run(tmp_path, [PY, "-c", HEARTBEAT, str(beacon), str(seen)], env)
    assert process.wait(timeout=60) == 3
    first = json.loads((seen / "first.json").read_text())
    beat = json.loads((seen / "beat.json").read_text())
    assert (beat["state"], beat["since"]) == (first["state"], first["since"])
    assert beat["time"] > first["time"]


def test_hostile_environment_values_are_data_not_code(tmp_path):
    env = slurm_env(
        tmp_path,
        VSP_BEACON_DIR=str(tmp_path / "b $(touch pwned-dir) `touch pwned-bt`"),
        VSP_BEACON_HEARTBEAT="1; touch pwned-hb",
        SLURM_JOB_ID="$(touch pwned-id)",
        SLURM_RESTART_COUNT="1 ; touch pwned-rc",
    )
    process = run(tmp_path, [PY, "-c", "import sys; sys.exit(0)"], env)
    assert process.wait(timeout=30) == 0
    assert not list(tmp_path.rglob("pwned*"))
    folder = tmp_path / "b $(touch pwned-dir) `touch pwned-bt`"
    doc = json.loads((folder / "vsp-beacon-0.json").read_text())  # a bad id falls back to 0
    assert (doc["job"], doc["restart"], doc["state"], doc["rc"]) == ("0", 0, "exiting", 0)


def test_without_a_beacon_folder_nothing_is_written(tmp_path):
    env = slurm_env(tmp_path)
    del env["VSP_BEACON_DIR"]
    process = run(tmp_path, [PY, "-c", "import sys; sys.exit(5)"], env)
    assert process.wait(timeout=30) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.sh", "work"]


def test_beacon_folder_is_beside_checkpoints_on_cloud_storage_only(tmp_path, monkeypatch):
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(tmp_path))
    assert beacon_lib.folder_for("gs://b/ckpt/run-1/") == "gs://b/ckpt/run-1.beacon"
    assert beacon_lib.folder_for("/gcs/b/ckpt/run-1") == "/gcs/b/ckpt/run-1.beacon"
    assert beacon_lib.folder_for(f"{tmp_path}/b/c") == f"{tmp_path}/b/c.beacon"
    assert beacon_lib.folder_for("/home/alice/ckpt") == ""
    assert beacon_lib.environment("gs://b/c.beacon", 15) == {
        "VSP_BEACON_DIR": "gs://b/c.beacon",
        "VSP_BEACON_HEARTBEAT": "15",
    }
    assert (
        beacon_lib.environment("gs://b/c.beacon", 15, comment="vsp-run-key=r")["VSP_BEACON_COMMENT"]
        == "vsp-run-key=r"
    )


# Records each call (one argument a line, calls separated by a blank line); fails with
# ``FAIL=1`` in its folder, as scontrol does when the controller refuses the update.
FAKE_SCONTROL = """#!/bin/bash
here=$(dirname "$0")
[ -e "$here/FAIL" ] && exit 1
printf '%s\\n' "$@" >> "$here/calls"
echo >> "$here/calls"
"""


def unwritable_env(tmp_path: Path, fail_scontrol: bool = False) -> dict[str, str]:
    """A beacon folder under a regular file (no one can create it), a recording scontrol."""
    (tmp_path / "gcs").mkdir()
    (tmp_path / "gcs" / "bucket").write_text("a file, not a folder")
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "scontrol").write_text(FAKE_SCONTROL)
    (tools / "scontrol").chmod(0o755)
    if fail_scontrol:
        (tools / "FAIL").write_text("")
    return slurm_env(
        tmp_path,
        VSP_BEACON_COMMENT="vsp-run-key=r1 vsp-spec=ab $(touch pwned)",
        PATH=f"{tools}:/usr/bin:/bin",
    )


def test_an_unwritable_beacon_folder_is_said_and_the_comment_carries_the_beacon(tmp_path):
    env = unwritable_env(tmp_path)
    desc = make(command=[PY, "-c", "import sys; sys.exit(3)"], working_directory=str(tmp_path))
    (tmp_path / "job.sh").write_text(desc.batch_script())
    done = subprocess.run(
        ["/bin/bash", str(tmp_path / "job.sh")], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 3
    assert "cannot write the progress beacon in" in done.stderr
    assert "keeping it in the job's comment instead" in done.stderr
    calls = [c.split("\n") for c in (tmp_path / "bin" / "calls").read_text().split("\n\n") if c]
    assert [c[0] for c in calls] == ["update"] * 3
    assert {c[1] for c in calls} == {"JobId=4242"}
    base = "Comment=vsp-run-key=r1 vsp-spec=ab $(touch pwned) vsp-beacon="
    assert all(c[2].startswith(base) for c in calls)
    words = [c[2].rsplit(" ", 1)[1] for c in calls]
    found = [beacon_lib.from_comment(w, "4242") for w in words]
    assert [(b.state, b.restart, b.rc) for b in found] == [
        ("started", 2, None), ("running", 2, None), ("exiting", 2, 3),
    ]  # fmt: skip
    assert not list(tmp_path.rglob("pwned"))


def test_when_neither_channel_works_the_job_says_so_and_runs_on(tmp_path):
    env = unwritable_env(tmp_path, fail_scontrol=True)
    desc = make(command=[PY, "-c", "import sys; sys.exit(0)"], working_directory=str(tmp_path))
    (tmp_path / "job.sh").write_text(desc.batch_script())
    done = subprocess.run(
        ["/bin/bash", str(tmp_path / "job.sh")], env=env, cwd=tmp_path, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0
    assert "nor the job's comment: the step watches this job through Slurm only" in done.stderr
    assert not (tmp_path / "bin" / "calls").exists()
