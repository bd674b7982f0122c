"""The progress messages the batch script publishes, run for real in bash.

Against the emulator's Pub/Sub (``http://``, no token), and with a recording ``curl`` standing
in for the network (``https://``: a token from the metadata server, which must never reach argv).
"""

from __future__ import annotations

import json
import subprocess

from slurm_fakes import make_job
from test_slurm_beacon import PY, run, slurm_env, watch_until_running_then_notice

from vsp.components.runtime.training import beacon as beacon_lib

TOPIC = "projects/test-project/topics/progress"
NO_PREV = {"prev_restart": "null", "prev_time": "null"}  # no earlier run left a beacon


def publish_url(emulator) -> str:
    return f"{emulator.base_url}/v1/{TOPIC}:publish"


def test_a_job_publishes_its_start_notice_and_exit_with_the_beacon_fields(tmp_path, emulator):
    env = slurm_env(tmp_path, VSP_PROGRESS_URL=publish_url(emulator), VSP_PROGRESS_RUN="0123abcd")
    beacon, seen = watch_until_running_then_notice(tmp_path, env)
    for _ in range(500):  # the notice is published in the background
        if len(emulator.published()) == 3:
            break
        subprocess.run(["sleep", "0.01"], check=True)
    messages = sorted(
        emulator.published(),
        key=lambda m: ["started", "notice", "exiting"].index(m["attributes"]["state"]),
    )
    assert [m["topic"] for m in messages] == [TOPIC] * 3
    fields = [
        {k: v for k, v in m["attributes"].items() if k not in ("since", "time")} for m in messages
    ]
    assert fields == [
        {
            "vsp_run": "0123abcd",
            "job": "4242",
            "restart": "2",
            "state": "started",
            "rc": "null",
            **NO_PREV,
        },
        {
            "vsp_run": "0123abcd",
            "job": "4242",
            "restart": "2",
            "state": "notice",
            "rc": "null",
            **NO_PREV,
        },
        {
            "vsp_run": "0123abcd",
            "job": "4242",
            "restart": "2",
            "state": "exiting",
            "rc": "143",
            **NO_PREV,
        },
    ]
    since = [float(m["attributes"]["since"]) for m in messages]
    assert since == sorted(since)
    final = json.loads(beacon.read_text())  # the beacon file is kept as before
    assert (final["state"], final["rc"]) == ("exiting", 143)


def test_a_job_that_cannot_publish_says_so_and_runs_as_before(tmp_path):
    env = slurm_env(
        tmp_path,
        VSP_PROGRESS_URL=f"http://127.0.0.1:9/v1/{TOPIC}:publish",  # nothing listens there
        VSP_PROGRESS_RUN="0123abcd",
    )
    desc = make_job(
        command=[PY, "-c", "import sys; sys.exit(4)"], working_directory=str(tmp_path / "work")
    )
    (tmp_path / "job.sh").write_text(desc.batch_script())
    full = dict(item.split("=", 1) for item in desc.environment_list())
    full.update(env)
    done = subprocess.run(
        ["/bin/bash", str(tmp_path / "job.sh")], env=full, cwd=tmp_path, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 4
    assert f"cannot publish progress messages to http://127.0.0.1:9/v1/{TOPIC}" in done.stderr
    beacon = tmp_path / "gcs" / "bucket" / "ckpt.beacon" / "vsp-beacon-4242.json"
    assert json.loads(beacon.read_text())["state"] == "exiting"


# Stands in for curl: the metadata server's answer for the token URL; otherwise records its
# argv (one argument a line) and its standard input, then succeeds.
FAKE_CURL = """#!/bin/bash
here=$(dirname "$0")
for arg in "$@"; do
  case "$arg" in
    */service-accounts/default/token)
      printf '{"access_token":"ya29.SECRET-TOKEN","expires_in":3599,"token_type":"Bearer"}'
      exit 0 ;;
  esac
done
n=$(ls "$here" | grep -c '^call')
printf '%s\\n' "$@" > "$here/call$n.argv"
cat > "$here/call$n.stdin"
"""


def test_on_google_cloud_the_token_goes_to_curl_on_stdin_never_in_argv(tmp_path):
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "curl").write_text(FAKE_CURL)
    (tools / "curl").chmod(0o755)
    url = f"https://pubsub.googleapis.com/v1/{TOPIC}:publish"
    env = slurm_env(
        tmp_path, VSP_PROGRESS_URL=url, VSP_PROGRESS_RUN="0123abcd", PATH=f"{tools}:/usr/bin:/bin"
    )
    job = run(tmp_path, [PY, "-c", "import sys; sys.exit(0)"], env)
    assert job.wait(timeout=60) == 0
    calls = sorted(tools.glob("call*.argv"))
    assert len(calls) == 2  # started, exiting (the payload got no signal)
    for argv_file in calls:
        argv = argv_file.read_text()
        stdin = argv_file.with_suffix(".stdin").read_text()
        assert "SECRET-TOKEN" not in argv
        assert stdin == 'header = "Authorization: Bearer ya29.SECRET-TOKEN"\n'
        assert argv.splitlines()[-1] == url
    bodies = [json.loads(c.read_text().splitlines()[-2]) for c in calls]
    states = [b["messages"][0]["attributes"]["state"] for b in bodies]
    assert states == ["started", "exiting"]


def test_hostile_progress_values_turn_publishing_off_and_execute_nothing(tmp_path, emulator):
    for url, tag in [
        (publish_url(emulator) + "$(touch pwned-url)", "0123abcd"),
        (publish_url(emulator), "ab`touch pwned-tag`"),
        ("file:///etc/passwd", "0123abcd"),
    ]:
        env = slurm_env(tmp_path, VSP_PROGRESS_URL=url, VSP_PROGRESS_RUN=tag)
        job = run(tmp_path, [PY, "-c", "import sys; sys.exit(0)"], env)
        assert job.wait(timeout=60) == 0
    assert not list(tmp_path.rglob("pwned*"))
    assert emulator.published() == []


def test_a_run_carries_the_last_write_of_an_earlier_run_lost_without_notice(
    tmp_path, emulator, monkeypatch
):
    monkeypatch.setenv("VSP_GCS_FUSE_ROOT", str(tmp_path / "gcs"))  # the step's view of it
    folder = tmp_path / "gcs" / "bucket" / "ckpt.beacon"
    folder.mkdir(parents=True)
    beacon = folder / "vsp-beacon-4242.json"
    env = slurm_env(tmp_path, VSP_PROGRESS_URL=publish_url(emulator), VSP_PROGRESS_RUN="ab12")
    for state, expected in [("running", (1, 150)), ("saving", (1, 150)), ("exiting", None)]:
        # The earlier run's last write, in the batch script's own field order.
        left = {"job": "4242", "restart": 1, "state": state, "since": 100, "time": 150, "rc": None}
        beacon.write_text(json.dumps(left))
        job = run(tmp_path, [PY, "-c", "import sys; sys.exit(0)"], env)  # restart 2
        assert job.wait(timeout=60) == 0
        final = beacon_lib.read("gs://bucket/ckpt.beacon", "4242", None)
        started = [m for m in emulator.published() if m["attributes"]["state"] == "started"][-1]
        got = beacon_lib.previous(
            started["attributes"]["prev_restart"], started["attributes"]["prev_time"]
        )
        if expected is None:  # it told its end: nothing to carry
            assert (final.prev_restart, final.prev_time) == (None, None) and got == {}
        else:
            assert (final.prev_restart, final.prev_time) == expected
            assert got == {"prev_restart": expected[0], "prev_time": float(expected[1])}
