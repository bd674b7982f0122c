"""Tests of the Slurm job description, its exact submit request, and the generated batch script.

The script tests run the generated bash for real (``subprocess`` with an argv, never a shell
string) on a tiny Python payload, with the environment Slurm would give it from the request.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import batch as slurm_batch
from vsp.components.runtime.slurm import script as slurm_script

PY = sys.executable
DEFAULT_PATH = slurm_script.DEFAULT_PATH


def make(**overrides) -> slurm_script.JobDescription:
    fields = dict(
        run_key="run-1",
        partition="spot",
        working_directory="/home/alice/runs",
        command=["python", "-m", "vsp.examples.trainer", "--steps", "100"],
    )
    fields.update(overrides)
    return slurm_script.JobDescription(**fields)


# ----- the request ----------------------------------------------------------------------------


def test_to_request_is_the_exact_v0042_body():
    desc = make(
        environment={"WANDB_MODE": "offline", "MSG": "a b=c"},
        nodes=2,
        tasks_per_node=8,
        gpus_per_node=8,
        cpus_per_task=4,
        time_limit_minutes=120,
        standard_output="/home/alice/runs/%j.out",
        standard_error="/home/alice/runs/%j.err",
        account="ml",
        qos="normal",
        warning_signal="USR1",
        warning_seconds=90,
        extra_fields={"memory_per_node": {"set": True, "infinite": False, "number": 4096}},
    )
    assert desc.to_request() == {
        "job": {
            "name": "run-1",
            "comment": "vsp-run-key=run-1",
            "partition": "spot",
            "account": "ml",
            "qos": "normal",
            "current_working_directory": "/home/alice/runs",
            "standard_output": "/home/alice/runs/%j.out",
            "standard_error": "/home/alice/runs/%j.err",
            "environment": [
                "WANDB_MODE=offline",
                "MSG=a b=c",
                f"PATH={DEFAULT_PATH}",
                "VSP_RUN_KEY=run-1",
            ],
            "minimum_nodes": 2,
            "maximum_nodes": 2,
            "tasks_per_node": 8,
            "tasks": 16,
            "cpus_per_task": 4,
            "tres_per_node": "gres/gpu:8",
            "time_limit": {"set": True, "infinite": False, "number": 120},
            "requeue": True,
            "open_mode": ["APPEND"],
            "kill_warning_signal": "USR1",
            "kill_warning_delay": {"set": True, "infinite": False, "number": 90},
            "kill_warning_flags": ["BATCH_JOB"],
            "memory_per_node": {"set": True, "infinite": False, "number": 4096},
            "script": desc.batch_script(),
        }
    }


def test_minimal_request_omits_unset_optional_fields():
    job = make(requeue=False).to_request()["job"]
    assert set(job) == {
        "name",
        "comment",
        "partition",
        "current_working_directory",
        "environment",
        "minimum_nodes",
        "maximum_nodes",
        "tasks_per_node",
        "tasks",
        "requeue",
        "open_mode",
        "script",
    }
    assert job["requeue"] is False and job["open_mode"] == ["APPEND"]
    assert job["environment"] == [f"PATH={DEFAULT_PATH}", "VSP_RUN_KEY=run-1"]


def test_user_path_and_run_key_variables_are_kept():
    env = make(environment={"PATH": "/opt/bin", "VSP_RUN_KEY": "mine"}).environment_list()
    assert env == ["PATH=/opt/bin", "VSP_RUN_KEY=mine"]


def test_legacy_v0038_request_shape():
    desc = make(time_limit_minutes=5, warning_signal="B:USR1@30", environment={"FOO": "bar"})
    request = desc.to_request("v0.0.38")
    assert request["script"] == desc.batch_script()
    job = request["job"]
    assert job["environment"] == {"FOO": "bar", "PATH": DEFAULT_PATH, "VSP_RUN_KEY": "run-1"}
    assert job["time_limit"] == 5
    assert job["signal"] == "USR1@30"  # v0.0.38 rejects the B: prefix
    assert job["open_mode"] == "append"  # a word in v0.0.38, a flag list in v0.0.42
    assert "kill_warning_signal" not in job and "script" not in job


@pytest.mark.parametrize(
    "spec, word, seconds",
    [("USR1", "USR1", 60), ("SIGUSR2", "USR2", 60), ("usr1@30", "USR1", 30), ("10", "USR1", 60)],
)
def test_warning_signal_forms(spec, word, seconds):
    desc = make(warning_signal=spec, time_limit_minutes=10)
    assert (desc.warning_signal, desc.warning_seconds) == (word, seconds)


def test_warning_signal_is_forwarded_by_the_script():
    assert "trap '_vsp_forward USR2' USR2" in make(warning_signal="USR2").batch_script()


def test_script_mode_request_runs_bash_with_the_text():
    desc = make(command=None, script="echo 'hi'\n")
    assert "exec -- /bin/bash -c 'echo '\"'\"'hi'\"'\"'\n' vsp-payload" in desc.batch_script()


def test_unknown_version_form_is_a_user_error():
    with pytest.raises(errors.UserError, match="v0.0.N"):
        make().to_request("0.0.42")


# ----- validation -----------------------------------------------------------------------------


def test_every_problem_is_reported_with_field_value_and_fix():
    with pytest.raises(errors.SpecValidationError) as caught:
        make(
            run_key="bad key",
            partition="",
            working_directory="relative/dir",
            nodes=0,
            gpus_per_node=-1,
            requeue="yes",
            environment={"1BAD": "x", "GOOD": 5},
            warning_signal="KILL",
        )
    error = caught.value
    assert error.fields == [
        "run_key",
        "partition",
        "working_directory",
        "nodes",
        "gpus_per_node",
        "requeue",
        "warning_signal",
        "environment['1BAD']",
        "environment['GOOD']",
    ]
    text = str(error)
    assert "run_key = 'bad key': is not a valid run key. Fix: use 1-128 characters" in text
    assert "working_directory = 'relative/dir'" in text and "Fix: pass a directory" in text
    assert "nodes = 0: must be an integer >= 1" in text


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"command": None}, "command"),
        ({"script": "echo hi"}, "command"),
        ({"command": []}, "command"),
        ({"command": "python train.py"}, "command"),
        ({"command": ["python", "a\0b"]}, "command"),
        ({"command": None, "script": "  "}, "script"),
        (
            {"time_limit_minutes": 1, "warning_signal": "USR1", "warning_seconds": 60},
            "warning_seconds",
        ),
        ({"warning_signal": "USR1@abc"}, "warning_seconds"),
        ({"warning_seconds": 70000}, "warning_seconds"),
        ({"cpus_per_task": True}, "cpus_per_task"),
        ({"account": "has space"}, "account"),
        ({"standard_output": "a\nb"}, "standard_output"),
        ({"extra_fields": {"script": "x"}}, "extra_fields"),
        ({"environment": {"A-B": "x"}}, "environment['A-B']"),
        ({"environment": {"A": "nul\0"}}, "environment['A']"),
    ],
)
def test_invalid_inputs_name_the_field(overrides, field):
    with pytest.raises(errors.SpecValidationError) as caught:
        make(**overrides)
    assert field in caught.value.fields


def test_environment_values_may_hold_anything_but_nul():
    hostile = '\'; rm -rf / #\n$(reboot) `id` "x" ü'
    env = make(environment={"HOSTILE": hostile}).environment_list()
    assert env[0] == f"HOSTILE={hostile}"


def test_oversized_request_is_refused_with_size_and_fix():
    with pytest.raises(errors.SpecValidationError) as caught:
        make(command=None, script="#" * 1_000_000)
    text = str(caught.value)
    assert caught.value.fields == ["script"]
    assert "bytes" in text and "under 1 MB" in text and "shared storage" in text


def test_render_refuses_nul_and_missing_payload():
    with pytest.raises(ValueError):
        slurm_batch.render(["a\0"])
    with pytest.raises(ValueError):
        slurm_batch.render()


# ----- running the generated script for real -------------------------------------------------

HOSTILE = [
    "'; rm -rf {victim}; echo '",
    "$(touch {tmp}/pwned)",
    "`touch {tmp}/pwned-backtick`",
    '"; touch {tmp}/pwned-dq; "',
    "line one\nline two; touch {tmp}/pwned-newline",
    "ünïcødé ✓ 日本語",
    "",
    "-x",
    "*",
    "$HOME ${{PATH}} \\ \t end",
]

DUMP = """
import json, os, sys
out = sys.argv[1]
env = {k: os.environ.get(k, "") for k in ("HOSTILE_ONE", "HOSTILE_TWO")}
with open(out, "w") as f:
    json.dump({"argv": [os.fsencode(a).hex() for a in sys.argv[2:]],
               "env": {k: os.fsencode(v).hex() for k, v in env.items()}}, f)
"""


def run_script(desc: slurm_script.JobDescription, tmp_path: Path, **kwargs):
    script = tmp_path / "job.sh"
    script.write_text(desc.batch_script())
    env = dict(item.split("=", 1) for item in desc.environment_list())
    return subprocess.Popen(["/bin/bash", str(script)], env=env, cwd=tmp_path, **kwargs)


def test_hostile_arguments_and_environment_reach_the_payload_unchanged(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep").write_text("x")
    args = [a.format(tmp=tmp_path, victim=victim) for a in HOSTILE]
    env_one = f"$(touch {tmp_path}/pwned-env) `touch {tmp_path}/pwned-env2` ';\n"
    env_two = "quote ' double \" back ` dollar $ ✓"
    out = tmp_path / "out.json"
    desc = make(
        command=[PY, "-c", DUMP, str(out), *args],
        environment={"HOSTILE_ONE": env_one, "HOSTILE_TWO": env_two},
    )
    process = run_script(desc, tmp_path)
    assert process.wait(timeout=30) == 0
    seen = json.loads(out.read_text())
    assert [bytes.fromhex(a) for a in seen["argv"]] == [a.encode() for a in args]
    assert bytes.fromhex(seen["env"]["HOSTILE_ONE"]) == env_one.encode()
    assert bytes.fromhex(seen["env"]["HOSTILE_TWO"]) == env_two.encode()
    assert not list(tmp_path.glob("pwned*"))
    assert (victim / "keep").exists()


def test_script_text_runs_verbatim(tmp_path):
    out = tmp_path / "out.txt"
    text = f"printf '%s|%s' \"$0\" 'it'\"'\"'s $(not run)' > {out}\n"
    process = run_script(make(command=None, script=text), tmp_path)
    assert process.wait(timeout=30) == 0
    assert out.read_text() == "vsp-payload|it's $(not run)"


@pytest.mark.parametrize("code", [0, 3, 143])
def test_script_exits_with_the_payload_exit_code(tmp_path, code):
    desc = make(command=[PY, "-c", f"import sys; sys.exit({code})"])
    assert run_script(desc, tmp_path).wait(timeout=30) == code


def test_payload_killed_by_a_signal_gives_128_plus_signal(tmp_path):
    desc = make(command=[PY, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert run_script(desc, tmp_path).wait(timeout=30) == 128 + signal.SIGKILL


TRAPPER = """
import pathlib, signal, sys, time
ready, marker = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
def on_signal(signum, frame):
    marker.write_text(signal.Signals(signum).name)
    sys.exit(143)
for sig in (signal.SIGTERM, signal.SIGUSR1):
    signal.signal(sig, on_signal)
ready.write_text("ready")
try:
    time.sleep(60)
except KeyboardInterrupt:
    marker.write_text("SIGINT")
    sys.exit(130)
sys.exit(0)
"""


def wait_for(path: Path, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear within {timeout} s")
        time.sleep(0.02)


@pytest.mark.parametrize(
    "sig, expected_rc",
    [(signal.SIGTERM, 143), (signal.SIGUSR1, 143), (signal.SIGINT, 130)],
)
def test_signal_to_the_batch_shell_reaches_the_payload(tmp_path, sig, expected_rc):
    if signal.getsignal(sig) == signal.SIG_IGN:  # bash cannot trap a signal ignored at entry
        pytest.skip(f"{sig.name} is ignored by the test runner's parent")
    ready, marker = tmp_path / "ready", tmp_path / "marker"
    desc = make(command=[PY, "-c", TRAPPER, str(ready), str(marker)])
    process = run_script(desc, tmp_path, stderr=subprocess.PIPE)
    try:
        wait_for(ready)
        process.send_signal(sig)
        rc = process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert rc == expected_rc
    assert marker.read_text() == sig.name
    assert f"forwarding {sig.name}" in process.stderr.read().decode()


def test_repeated_notices_are_forwarded_until_the_payload_exits(tmp_path):
    ready, marker = tmp_path / "ready", tmp_path / "count"
    counter = f"""
import pathlib, signal, sys, time
seen = []
def on_signal(signum, frame):
    seen.append(signum)
    pathlib.Path({str(marker)!r}).write_text(str(len(seen)))
signal.signal(signal.SIGUSR1, on_signal)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))
pathlib.Path({str(ready)!r}).write_text("ready")
while True:
    time.sleep(0.01)
"""
    process = run_script(make(command=[PY, "-c", counter]), tmp_path, stderr=subprocess.DEVNULL)
    try:
        wait_for(ready)
        for expected in ("1", "2"):
            process.send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + 20
            while not (marker.exists() and marker.read_text() == expected):
                assert time.monotonic() < deadline, "USR1 was not forwarded"
                time.sleep(0.02)
        assert process.poll() is None  # still waiting for the payload after two notices
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 143
    finally:
        if process.poll() is None:
            process.kill()
    assert os.path.exists(marker)


@pytest.mark.parametrize(
    "name", ["BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE", "BASH_FUNC_f"]
)
def test_variables_that_steer_the_shell_are_refused(name):
    with pytest.raises(errors.SpecValidationError) as caught:
        make(environment={name: "x"})
    assert caught.value.fields == [f"environment[{name!r}]"]
    assert "changes how the job's shell runs" in str(caught.value)


def _run_with_hostile_environment(script_text: str, tmp_path: Path) -> tuple[bool, bool]:
    """(payload ran, BASH_ENV file was sourced) for a script run with BASH_ENV and SHELLOPTS set
    the way a cluster default or another tool could set them, outside our validation."""
    sourced, ran = tmp_path / "sourced", tmp_path / "ran"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"echo yes > {sourced}\n")
    script = tmp_path / "job.sh"
    script.write_text(script_text)
    script.chmod(0o700)
    env = {"PATH": os.environ["PATH"], "BASH_ENV": str(hook)}
    subprocess.run([str(script)], env=env, check=True, timeout=30)
    first = (ran.exists(), sourced.exists())
    ran.unlink(missing_ok=True)
    subprocess.run([str(script)], env={**env, "SHELLOPTS": "noexec"}, timeout=30)
    return first[0] and ran.exists(), first[1]


def test_the_batch_shell_ignores_bash_env_and_shellopts(tmp_path):
    payload = [PY, "-c", f"open({str(tmp_path / 'ran')!r}, 'w').write('ran')"]
    script = slurm_batch.render(payload)
    assert script.startswith("#!/bin/bash -p\n")
    assert _run_with_hostile_environment(script, tmp_path) == (True, False)
    # The same script without -p sources the file and, with SHELLOPTS=noexec, runs nothing.
    plain = script.replace("#!/bin/bash -p\n", "#!/bin/bash\n", 1)
    assert _run_with_hostile_environment(plain, tmp_path) == (False, True)
