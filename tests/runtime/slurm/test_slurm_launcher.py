"""The ``srun``/``torchrun`` launchers of the batch script, run for real.

The generated script runs under bash with the allocation's variables, and with the emulator's
``srun``/``scontrol`` (``vertex_emulator.slurm.step_tools``) first in ``PATH``; a fake
``torchrun`` records its argv. The real-Slurm side is in ``tests/conformance/test_multinode.py``.
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
from vsp.components.runtime.slurm import launcher
from vsp.components.runtime.slurm import script as slurm_script
from vsp.vertex_emulator.slurm import environment as emulated_environment
from vsp.vertex_emulator.slurm import step_tools

DUMP = """
import json, os, sys
names = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "MASTER_ADDR",
         "MASTER_PORT", "SLURMD_NODENAME", "NCCL_FROM_FILE", "EXTRA")
with open(f"rank-{os.environ['RANK']}.json", "w") as f:
    json.dump({"argv": sys.argv[1:], "env": {k: os.environ.get(k) for k in names}}, f)
"""
HOSTILE = ["'; touch pwned; echo '", "$(touch pwned2)", "a b\nc", "$MASTER_ADDR", "*"]


def describe(tmp_path: Path, launcher_name: str, **fields) -> slurm_script.JobDescription:
    return slurm_script.JobDescription(
        run_key="k1",
        partition="spot",
        working_directory=str(tmp_path),
        command=fields.pop("command", [sys.executable, "-c", DUMP, *HOSTILE]),
        nodes=2,
        launcher=launcher_name,
        environment={"EXTRA": "x y=z", **fields.pop("environment", {})},
        **fields,
    )


def job_environment(
    desc: slurm_script.JobDescription, tmp_path: Path, restarts: int = 0
) -> dict[str, str]:
    """The job's environment on the first of two emulated nodes, the emulator's tools (and
    ``tmp_path``) first in ``PATH``; writes the batch script to ``tmp_path/job.sh``."""
    tools = emulated_environment.install_step_tools(tmp_path / "tools")
    env = dict(item.split("=", 1) for item in desc.environment_list())
    env.update(
        PATH=f"{tools}:{tmp_path}:{env['PATH']}",
        SLURM_JOB_ID="4242",
        SLURM_JOB_NODELIST="node-[3-4]",
        SLURM_JOB_NUM_NODES="2",
        SLURMD_NODENAME="node-3",
    )
    if restarts:
        env["SLURM_RESTART_COUNT"] = str(restarts)
    (tmp_path / "job.sh").write_text(desc.batch_script())
    return env


def run(desc: slurm_script.JobDescription, tmp_path: Path, restarts: int = 0):
    env = job_environment(desc, tmp_path, restarts)
    return subprocess.run(
        ["/bin/bash", str(tmp_path / "job.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def ranks(tmp_path: Path) -> list[dict]:
    return [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(2)]


def test_srun_gives_every_task_its_rank_and_the_head_of_this_allocation(tmp_path):
    nccl = tmp_path / "nccl env.sh"
    nccl.write_text("export NCCL_FROM_FILE=sourced\n")
    done = run(describe(tmp_path, "srun", nccl_env_file=str(nccl)), tmp_path)
    assert done.returncode == 0, done.stderr
    first, second = ranks(tmp_path)
    port = first["env"]["MASTER_PORT"]  # drawn by the script: checked below
    assert 20000 <= int(port) < 40000
    common = {"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "node-3"}
    assert first["env"] == {
        **common,
        "RANK": "0",
        "LOCAL_RANK": "0",
        "NODE_RANK": "0",
        "MASTER_PORT": port,
        "SLURMD_NODENAME": "node-3",
        "NCCL_FROM_FILE": "sourced",
        "EXTRA": "x y=z",
    }
    assert second["env"] == {
        **first["env"],
        "RANK": "1",
        "NODE_RANK": "1",
        "SLURMD_NODENAME": "node-4",
    }
    assert first["argv"] == second["argv"] == HOSTILE
    assert not list(tmp_path.glob("pwned*"))


def test_the_head_port_is_drawn_at_every_start_and_a_missing_nccl_file_is_skipped(tmp_path):
    # Two clusters' jobs with one id and restart count (every emulated node is this machine)
    # must not start from one port: the draw changes it from start to start.
    desc = describe(tmp_path, "srun", nccl_env_file="/nonexistent/nccl.sh")
    ports = []
    for _ in range(4):
        assert run(desc, tmp_path).returncode == 0
        ports.append(ranks(tmp_path)[0]["env"]["MASTER_PORT"])
        assert ranks(tmp_path)[0]["env"]["NCCL_FROM_FILE"] is None
    assert all(20000 <= int(p) < 40000 for p in ports)
    assert len(set(ports)) > 1  # four equal draws of 20,000 ports: odds 1 in 8e12


@pytest.mark.parametrize("given", ["70000", "80", "12ab", "1234567890123"])
def test_an_unusable_master_port_in_the_environment_is_replaced_by_a_drawn_one(tmp_path, given):
    desc = describe(tmp_path, "srun", environment={"MASTER_PORT": given})
    assert run(desc, tmp_path).returncode == 0
    assert 20000 <= int(ranks(tmp_path)[0]["env"]["MASTER_PORT"]) < 40000


def test_srun_with_two_tasks_per_node_numbers_local_ranks(tmp_path):
    code = "import os; open(f\"r{os.environ['RANK']}\", 'w').write(" + (
        "' '.join(os.environ[k] for k in ('LOCAL_RANK', 'NODE_RANK', 'WORLD_SIZE')))"
    )
    desc = describe(tmp_path, "srun", tasks_per_node=2, command=[sys.executable, "-c", code])
    assert run(desc, tmp_path).returncode == 0
    seen = [(tmp_path / f"r{r}").read_text() for r in range(4)]
    assert seen == ["0 0 4", "1 0 4", "0 1 4", "1 1 4"]


def test_torchrun_runs_once_per_node_with_a_rendezvous_id_per_start(tmp_path):
    fake = tmp_path / "torchrun"
    fake.write_text(
        '#!/bin/bash\nprintf \'%s\\n\' "$SLURM_NODEID" "$@" > "torchrun-$SLURM_NODEID.txt"\n'
    )
    fake.chmod(0o755)
    port = 31337  # the job's own head port
    desc = describe(
        tmp_path,
        "torchrun",
        tasks_per_node=3,
        command=["python", "t.py", "$X"],
        environment={"MASTER_PORT": str(port)},
    )
    assert run(desc, tmp_path, restarts=2).returncode == 0
    for node in (0, 1):
        argv = (tmp_path / f"torchrun-{node}.txt").read_text().splitlines()
        assert argv == [
            str(node),
            "--nnodes=2",
            "--nproc-per-node=3",
            "--rdzv-backend=c10d",
            f"--rdzv-endpoint=node-3:{port}",
            "--rdzv-id=4242-2",
            "--max-restarts=0",
            "--no-python",
            "python",
            "t.py",
            "$X",
        ]


def test_a_failing_task_ends_the_others_and_fails_the_job_as_the_trainer(tmp_path):
    # Task 1 fails only once task 0 handles SIGTERM: on a busy machine task 0's interpreter may
    # still be starting when task 1 exits, and its SIGTERM would then leave no trace.
    code = (
        "import os, signal, sys, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    deadline = time.monotonic() + 30\n"
        "    while not os.path.exists('ready') and time.monotonic() < deadline: time.sleep(0.01)\n"
        "    sys.exit(3)\n"
        "signal.signal(signal.SIGTERM, lambda *a: (open('term', 'w').close(), sys.exit(143)))\n"
        "open('ready', 'w').close()\n"
        "time.sleep(60)\n"
    )
    desc = describe(tmp_path, "srun", command=[sys.executable, "-c", code])
    done = run(desc, tmp_path)
    assert done.returncode == 1
    assert (tmp_path / "term").exists()
    assert "node-4: task 1: Exited with exit code 3" in done.stderr
    assert "a task failed and srun ended the others" in done.stderr


def test_launcher_none_keeps_the_script_as_it_was(tmp_path):
    desc = describe(tmp_path, "none", command=["python", "train.py"])
    text = desc.batch_script()
    assert "srun" not in text and "MASTER_ADDR" not in text
    assert "( trap - INT QUIT; exec -- python train.py ) &" in text


@pytest.mark.parametrize(
    ("name", "fields", "field"),
    [("mpirun", {}, "launcher"), ("srun", {"nccl_env_file": "relative.sh"}, "nccl_env_file")],
)
def test_bad_launcher_settings_are_refused_before_any_request(tmp_path, name, fields, field):
    with pytest.raises(errors.SpecValidationError) as caught:
        describe(tmp_path, name, **fields)
    assert f"{field} = " in str(caught.value) and "Fix:" in str(caught.value)


def test_launchers_listed():
    assert launcher.LAUNCHERS == ("none", "srun", "torchrun")


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("c1-spot-[0-1]", ["c1-spot-0", "c1-spot-1"]),
        ("n[01-03,7],x", ["n01", "n02", "n03", "n7", "x"]),
        ("vsp-node0", ["vsp-node0"]),
    ],
)
def test_hostlist_expansion(text, names):
    assert step_tools.expand_hostlist(text) == names


def test_emulated_scontrol_shows_hostnames(tmp_path):
    tools = emulated_environment.install_step_tools(tmp_path)
    done = subprocess.run(
        [os.path.join(tools, "scontrol"), "show", "hostnames", "a-[1-2]"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "a-1\na-2\n"


def test_a_port_in_use_on_the_head_node_is_skipped(tmp_path):
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        wanted = held.getsockname()[1]
        desc = describe(tmp_path, "srun", environment={"MASTER_PORT": str(wanted)})
        assert run(desc, tmp_path).returncode == 0
    # Moved up past it (and past any next port another process holds on a busy machine).
    chosen = int(ranks(tmp_path)[0]["env"]["MASTER_PORT"])
    assert wanted < chosen <= wanted + 200


def test_sigterm_to_the_batch_shell_is_not_passed_to_srun_and_usr1_is(tmp_path):
    """srun answers SIGTERM by killing every task (``launcher.STEP_SIGNALS``): the batch shell
    notes it and leaves it to the tasks' own step; SIGUSR1 it passes to srun, which passes it
    to every task."""
    text = (
        'trap "echo usr1 $RANK >> sig.txt" USR1; trap "echo term $RANK >> sig.txt; exit 143" TERM; '
        'echo "up $RANK" >> up.txt; while :; do sleep 0.1; done'
    )
    desc = describe(tmp_path, "srun", command=["/bin/bash", "-c", text])
    env = job_environment(desc, tmp_path)
    log = (tmp_path / "job.log").open("w")
    shell = subprocess.Popen(
        ["/bin/bash", str(tmp_path / "job.sh")],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )

    def lines(name: str, count: int) -> list[str]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            found = (tmp_path / name).read_text().split() if (tmp_path / name).exists() else []
            if len(found) >= count * 2:
                return found
            time.sleep(0.05)
        raise AssertionError(f"{name}: {found}")

    try:
        lines("up.txt", 2)
        shell.send_signal(signal.SIGTERM)  # the batch shell alone, as a B: signal reaches it
        time.sleep(1.0)
        assert shell.poll() is None and not (tmp_path / "sig.txt").exists()
        shell.send_signal(signal.SIGUSR1)
        assert sorted(" ".join(lines("sig.txt", 2)).replace("usr1 ", "usr1-").split()) == [
            "usr1-0",
            "usr1-1",
        ]
        os.killpg(shell.pid, signal.SIGTERM)  # the job's own SIGTERM reaches every process
        assert shell.wait(timeout=20) == 143
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
        log.close()
    assert "SIGTERM: the tasks get it from their own job step" in (tmp_path / "job.log").read_text()


@pytest.mark.parametrize(
    ("name", "fields", "term"),
    [
        ("none", {}, "_vsp_forward"),
        ("srun", {}, "_vsp_step_signal"),
        ("torchrun", {}, "_vsp_step_signal"),
        ("none", {"container_image": "img:1"}, "_vsp_step_signal"),
    ],
)
def test_which_handler_each_signal_gets(tmp_path, name, fields, term):
    text = describe(tmp_path, name, command=["python", "train.py"], **fields).batch_script()
    assert f"trap '{term} TERM' TERM" in text and f"trap '{term} INT' INT" in text
    assert "trap '_vsp_forward USR1' USR1" in text


@pytest.mark.parametrize("name", ["srun", "torchrun"])
def test_a_warning_signal_srun_would_turn_into_a_kill_is_refused(tmp_path, name):
    with pytest.raises(errors.SpecValidationError) as caught:
        describe(tmp_path, name, warning_signal="TERM@60", time_limit_minutes=10)
    assert "warning_signal = " in str(caught.value) and "use USR1 or USR2" in str(caught.value)
    describe(tmp_path, name, warning_signal="USR1@60", time_limit_minutes=10)
