"""The DDP example trainer in one process (world size 1): a save of a step already committed
is skipped, so its checkpoint is never deleted to be written again."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from vsp.components.runtime.trainer import collective, history

pytest.importorskip("torch", reason="the DDP example needs the torch extra: pip install .[torch]")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def train(tmp_path, steps: int) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }
    command = [sys.executable, "-m", "vsp.examples.ddp_trainer", "--steps", str(steps)]
    command += ["--save-every", "5", "--checkpoint-dir", str(tmp_path / "ckpt")]
    command += ["--model-dir", str(tmp_path / "model")]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_a_rerun_of_a_finished_run_keeps_its_committed_final_checkpoint(tmp_path):
    first = train(tmp_path, 10)
    assert first.returncode == 0, first.stdout + first.stderr
    final = collective.committed(tmp_path / "ckpt", 10)
    assert final is not None
    manifest = (final.path / "manifest.json").read_bytes()

    again = train(tmp_path, 10)  # a retried step: resumes at step 10, trains nothing
    assert again.returncode == 0, again.stdout + again.stderr
    assert "final save of step 10: already committed, nothing to write" in again.stdout
    assert (final.path / "manifest.json").read_bytes() == manifest  # never deleted, not rewritten
    assert collective.committed(tmp_path / "ckpt", 10) is not None
    saves = [(r.step, r.reason, r.seconds) for r in history.read(tmp_path / "ckpt")]
    saves = [s for s in saves if s[1]]
    assert saves[:2] == [(5, "periodic", saves[0][2]), (10, "final", saves[1][2])]
    assert saves[2:] == [(10, "final", 0.0)]


NOTICE_AT_ONCE = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
from vsp.components.runtime.trainer import notice
from vsp.examples.ddp_trainer import train
flag = notice.PreemptionNotice()
flag.request("test: a notice while the process group forms")
raise SystemExit(train.run(train.parse(sys.argv[1:]), flag))
"""


def test_a_notice_before_the_first_step_saves_nothing_and_counts_as_landed(tmp_path):
    first = train(tmp_path, 10)  # committed: step 5 (periodic) and 10 (final)
    assert first.returncode == 0, first.stdout + first.stderr
    final = collective.committed(tmp_path / "ckpt", 10)
    manifest = (final.path / "manifest.json").read_bytes()
    command = [sys.executable, "-c", NOTICE_AT_ONCE, "--steps", "20", "--save-every", "5"]
    command += ["--checkpoint-dir", str(tmp_path / "ckpt"), "--model-dir", str(tmp_path / "m2")]
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    env["MASTER_PORT"] = str(free_port())
    noticed = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert noticed.returncode == 143, noticed.stdout + noticed.stderr  # contract.EXIT_PREEMPTED
    assert "notice save of step 10: already committed, nothing to write" in noticed.stdout
    assert (final.path / "manifest.json").read_bytes() == manifest
    records = history.read(tmp_path / "ckpt")
    assert [(r.event, r.step, r.reason) for r in records][-2:] == [
        ("resume", 10, ""),
        ("save", 10, "notice"),
    ]
    again = train(tmp_path, 20)  # the next process resumes from step 10: the notice landed
    assert again.returncode == 0, again.stdout + again.stderr
    assert history.notice_outcomes(history.read(tmp_path / "ckpt")) == (1, 0)


def test_a_timed_interval_saves_periodically_and_each_checkpoint_carries_the_policy(tmp_path):
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}
    env["MASTER_PORT"] = str(free_port())
    command = [sys.executable, "-m", "vsp.examples.ddp_trainer", "--steps", "40"]
    command += ["--step-seconds", "0.02", "--checkpoint-interval", "0.2", "--keep", "10"]
    command += ["--checkpoint-dir", str(tmp_path / "ckpt"), "--model-dir", str(tmp_path / "m")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checkpoint policy: fixed: a periodic save every 0.2 s of training" in done.stdout
    saves = [(r.step, r.reason) for r in history.read(tmp_path / "ckpt") if r.event == "save"]
    periodic = [step for step, reason in saves if reason == "periodic"]
    assert 2 <= len(periodic) <= 6, saves  # 0.8 s of steps at least, a save every 0.2 s
    assert saves[-1] == (40, "final")
    for step in [*periodic, 40]:
        ref = collective.committed(tmp_path / "ckpt", step)
        assert ref is not None and "state/policy.json" in ref.manifest["files"]
    metadata = json.loads((tmp_path / "m" / "metadata.json").read_text())
    assert metadata["checkpoint_policy"] == "fixed: a periodic save every 0.2 s of training"
