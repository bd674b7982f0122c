"""The generated batch script, run for real.

Each test runs the bash a job description generates (``subprocess`` with an argv, never a shell
string) on a tiny Python payload, with the environment Slurm would give it from the request.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from slurm_fakes import make_job as make

from vsp.components.runtime.slurm import batch
from vsp.components.runtime.slurm import script as slurm_script

PY = sys.executable


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


@pytest.mark.parametrize("code", [0, 3, 130])
def test_script_exits_with_the_payload_exit_code(tmp_path, code):
    desc = make(command=[PY, "-c", f"import sys; sys.exit({code})"])
    assert run_script(desc, tmp_path).wait(timeout=30) == code


def test_143_without_a_notice_ends_a_one_node_job_as_a_failure(tmp_path):
    # 143 is "saved on a notice": a trainer exiting 143 by itself was requeued as preempted
    # again and again (11 times, then moved to on-demand nodes, then out of budget).
    desc = make(command=[PY, "-c", "import sys; sys.exit(143)"])
    process = run_script(desc, tmp_path, stderr=subprocess.PIPE)
    assert process.wait(timeout=30) == 1
    assert "vsp: the payload exited 143, the exit code of a save on a notice, but no notice " in (
        process.stderr.read().decode()
    )


def test_143_without_a_notice_is_kept_where_the_shell_may_not_hear_the_notice(tmp_path):
    exits = make(command=[PY, "-c", "import sys; sys.exit(143)"])
    # Several nodes: another node's own shutdown may signal only its tasks.
    many = dataclasses.replace(exits, environment={**exits.environment, "SLURM_JOB_NUM_NODES": "2"})
    assert run_script(many, tmp_path).wait(timeout=30) == 143
    # slurmrestd before v0.0.39: the time-limit warning reaches only the steps.
    script = tmp_path / "legacy.sh"
    script.write_text(exits.batch_script(warning_reaches_batch=False))
    env = dict(item.split("=", 1) for item in exits.environment_list())
    assert subprocess.run(["/bin/bash", str(script)], env=env, cwd=tmp_path).returncode == 143


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
    script = batch.render(payload)
    assert script.startswith("#!/bin/bash -p\n")
    assert _run_with_hostile_environment(script, tmp_path) == (True, False)
    # The same script without -p sources the file and, with SHELLOPTS=noexec, runs nothing.
    plain = script.replace("#!/bin/bash -p\n", "#!/bin/bash\n", 1)
    assert _run_with_hostile_environment(plain, tmp_path) == (False, True)


def test_a_bare_slurm_environment_gets_the_accounts_user_home_and_shell(tmp_path):
    # A slurmrestd submission carries only the variables its request lists: no USER or HOME.
    out = tmp_path / "env.json"
    dump = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))"
    desc = make(command=[PY, "-c", dump, str(out)], working_directory=str(tmp_path))
    assert run_script(desc, tmp_path).wait(timeout=30) == 0
    env = json.loads(out.read_text())
    import pwd  # noqa: PLC0415

    account = pwd.getpwuid(os.getuid())
    assert (env["USER"], env["LOGNAME"], env["HOME"], env["SHELL"]) == (
        account.pw_name,
        account.pw_name,
        account.pw_dir,
        account.pw_shell,
    )
    assert env["PATH"] == slurm_script.DEFAULT_PATH


def test_values_the_job_sets_win_over_the_accounts(tmp_path):
    out = tmp_path / "env.json"
    dump = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))"
    desc = make(
        command=[PY, "-c", dump, str(out)],
        working_directory=str(tmp_path),
        environment={"HOME": "/srv/home", "USER": "trainer"},
    )
    assert run_script(desc, tmp_path).wait(timeout=30) == 0
    env = json.loads(out.read_text())
    assert env["HOME"] == "/srv/home" and env["USER"] == env["LOGNAME"] == "trainer"


def test_a_missing_working_directory_is_made_and_entered(tmp_path):
    # Slurm 24.11 starts such a job in /tmp (and older Slurm fails it at launch).
    work = tmp_path / "not" / "yet"
    out = tmp_path / "cwd.txt"
    desc = make(
        command=[PY, "-c", f"import os; open({str(out)!r}, 'w').write(os.getcwd())"],
        working_directory=str(work),
    )
    assert run_script(desc, tmp_path).wait(timeout=30) == 0
    assert out.read_text() == str(work)


def test_term_to_the_whole_job_exits_143_not_255(tmp_path):
    # Slurm's cancel and ``DELETE ?signal=TERM`` signal every process of the job at once: the
    # payload can die while the trap runs, when bash 5.2 loses its status (exit 255 before).
    codes = []
    for _ in range(8):
        process = run_script(
            make(command=["sleep", "100"]),
            tmp_path,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            time.sleep(0.3)
            os.killpg(process.pid, signal.SIGTERM)
            codes.append(process.wait(timeout=30))
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert codes == [143] * 8
