"""Tests of the example trainer: notice saves, bit-exact resume after SIGTERM/SIGKILL, CLI."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from vsp.components.runtime.trainer import checkpoint, contract, manifests, model_files
from vsp.examples.trainer import cli
from vsp.examples.trainer import state as trainer_state

REPO = Path(__file__).resolve().parents[2]
STEP_LINE = re.compile(r" step (\d+)/(\d+) loss ")
STEPS = 40
STEP_SECONDS = 0.01


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VSP_", "AIP_", "SLURM_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def _args(root: Path, *extra: str) -> list[str]:
    return [
        *("--steps", str(STEPS), "--seed", "3", "--batch-size", "16", "--samples", "200"),
        *("--checkpoint-dir", str(root / "ckpt"), "--model-dir", str(root / "model")),
        *("--step-seconds", str(STEP_SECONDS), "--log-every", "1", *extra),
    ]


def _start(args: list[str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "vsp.examples.trainer", *args]
    return subprocess.Popen(
        command, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _run(args: list[str]) -> tuple[int, str]:
    proc = _start(args)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def _interrupt(args: list[str], at_step: int, sig: signal.Signals, delay: float) -> tuple[int, str]:
    """Starts the trainer, sends ``sig`` ``delay`` s after it logs step >= ``at_step``."""
    proc = _start(args)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        match = STEP_LINE.search(line)
        if match and int(match.group(1)) >= at_step:
            time.sleep(delay)
            proc.send_signal(sig)
            break
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, "".join(lines) + out


def _steps_logged(out: str) -> list[int]:
    return [int(m.group(1)) for m in STEP_LINE.finditer(out)]


def _final_arrays(root: Path) -> dict[str, bytes]:
    arrays, _ = model_files.read_model_dir(root / "model")
    return {name: (a.dtype.str, a.shape, a.tobytes()) for name, a in arrays.items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("reference")
    code, out = _run(_args(root, "--checkpoint-every-steps", "5"))
    assert code == 0, out
    assert _steps_logged(out) == list(range(1, STEPS + 1))
    return root


def _assert_identical(root: Path, reference: Path) -> None:
    assert _final_arrays(root) == _final_arrays(reference)
    mine = manifests.verify_model_dir(root / "model")["files"]["model.npz"]
    assert mine == manifests.verify_model_dir(reference / "model")["files"]["model.npz"]
    metrics = json.loads((root / "model" / "metrics.json").read_text())
    expected = json.loads((reference / "model" / "metrics.json").read_text())
    assert metrics["loss_history"] == expected["loss_history"]
    assert len(metrics["loss_history"]) == STEPS


def test_notice_saves_the_last_finished_step_and_exits_143(tmp_path: Path) -> None:
    args = _args(tmp_path, "--checkpoint-every-steps", "1000", "--step-seconds", "0.05")
    code, out = _interrupt(args, at_step=3, sig=signal.SIGTERM, delay=0.02)
    assert code == contract.EXIT_PREEMPTED == 143, out
    last_finished = _steps_logged(out)[-1]
    assert 3 <= last_finished < STEPS
    saved = checkpoint.load_latest(tmp_path / "ckpt")
    assert saved.step == last_finished
    assert saved.metadata["saved_on_notice"] is True
    assert len(saved.arrays["history.loss"]) == last_finished
    assert f"preemption notice (SIGTERM) after step {last_finished}: checkpoint saved" in out
    assert not (tmp_path / "model").exists()
    code, out = _run(args[:-2] + ["--step-seconds", "0"])
    assert code == 0, out
    assert f"at step {last_finished} " in out
    assert _steps_logged(out)[0] == last_finished + 1


@pytest.mark.slow
def test_sigterm_interrupted_runs_end_bit_identical(tmp_path: Path, reference: Path) -> None:
    rng = random.Random(1)
    args = _args(tmp_path, "--checkpoint-every-steps", "5")
    for at_step, sig in [
        (4, signal.SIGTERM),
        (11, signal.SIGUSR1),
        (19, signal.SIGTERM),
        (28, signal.SIGTERM),
    ]:
        code, out = _interrupt(args, at_step, sig, delay=rng.uniform(0, 2 * STEP_SECONDS))
        assert code == 143, out
        assert manifests.latest_valid_checkpoint(tmp_path / "ckpt").step == _steps_logged(out)[-1]
    code, out = _run(args)
    assert code == 0, out
    assert "resume #4" in out
    _assert_identical(tmp_path, reference)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["blocking", "async"])
def test_sigkill_interrupted_runs_end_bit_identical(
    tmp_path: Path, reference: Path, mode: str
) -> None:
    rng = random.Random(2)
    args = _args(tmp_path, "--checkpoint-every-steps", "3", "--keep", "2", "--save-mode", mode)
    for at_step in (5, 12, 20, 29):
        code, out = _interrupt(
            args, at_step, signal.SIGKILL, delay=rng.uniform(0, 2 * STEP_SECONDS)
        )
        assert code == -signal.SIGKILL, out
    assert len(manifests.list_checkpoints(tmp_path / "ckpt")) <= 3
    code, out = _run(args)
    assert code == 0, out
    if mode == "blocking":
        assert "resume #4" in out
    else:  # a kill during a background persist resumes from the save before it
        assert 1 <= int(re.search(r"resume #(\d+)", out).group(1)) <= 4
    _assert_identical(tmp_path, reference)


def _main(tmp_path: Path, *extra: str, environ: dict | None = None) -> int:
    argv = ["--steps", "6", "--samples", "64", "--batch-size", "8", "--log-every", "2", *extra]
    return cli.main(argv, environ={} if environ is None else environ)


def test_in_process_run_writes_verified_model_and_metrics(tmp_path: Path, capsys) -> None:
    code = _main(
        tmp_path, "--model-dir", str(tmp_path / "m"), "--checkpoint-dir", str(tmp_path / "c")
    )
    assert code == 0
    out = capsys.readouterr().out
    assert _steps_logged(out) == [2, 4, 6]
    assert "loss curve: 1:" in out
    manifest = manifests.verify_model_dir(tmp_path / "m")
    assert manifest["step"] == 6
    assert sorted(manifest["files"]) == ["metadata.json", "metrics.json", "model.npz"]
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert (
        len(metrics["loss_history"]) == 6 and metrics["final_loss"] == metrics["loss_history"][-1]
    )
    assert manifests.latest_valid_checkpoint(tmp_path / "c").step == 6  # final checkpoint
    saved = checkpoint.load_latest(tmp_path / "c")
    assert metrics["train_seconds"] == saved.metadata["train_seconds"] > 0
    # every step's time reaches the policy (the notice is seen at the next step boundary)
    assert saved.metadata["policy"]["measured_steps"] == 6
    assert 0 < saved.metadata["policy"]["step_s"] <= metrics["train_seconds"]
    assert (
        _main(tmp_path, "--model-dir", str(tmp_path / "m"), "--checkpoint-dir", str(tmp_path / "c"))
        == 0
    )
    assert "resumed from ckpt-0000000006 at step 6" in capsys.readouterr().out


def test_directories_from_environment_and_gs_uris(tmp_path: Path, capsys) -> None:
    environ = {
        "VSP_GCS_FUSE_ROOT": str(tmp_path / "gcs"),
        "AIP_CHECKPOINT_DIR": "gs://bucket/aip-ckpt",
        "VSP_MODEL_DIR": "gs://bucket/vsp-model",
        "AIP_MODEL_DIR": str(tmp_path / "ignored"),
        "SLURM_RESTART_COUNT": "2",
    }
    assert _main(tmp_path, environ=environ) == 0
    out = capsys.readouterr().out
    assert "SLURM_RESTART_COUNT=2" in out
    manifests.verify_model_dir(tmp_path / "gcs" / "bucket" / "vsp-model")
    assert manifests.latest_valid_checkpoint(tmp_path / "gcs" / "bucket" / "aip-ckpt").step == 6
    assert not (tmp_path / "ignored").exists()
    restored = checkpoint.load_latest(tmp_path / "gcs" / "bucket" / "aip-ckpt")
    assert restored.metadata["slurm_restart_count"] == 2


def test_vsp_checkpoint_dir_wins_over_aip(tmp_path: Path) -> None:
    environ = {
        "VSP_CHECKPOINT_DIR": str(tmp_path / "vsp"),
        "AIP_CHECKPOINT_DIR": str(tmp_path / "aip"),
    }
    assert _main(tmp_path, "--model-dir", str(tmp_path / "m"), environ=environ) == 0
    assert (tmp_path / "vsp").is_dir() and not (tmp_path / "aip").exists()


def test_user_errors_exit_2(tmp_path: Path, capsys) -> None:
    assert _main(tmp_path) == 2
    assert "no model dir" in capsys.readouterr().out
    common = ("--model-dir", str(tmp_path / "m"), "--checkpoint-dir", str(tmp_path / "c"))
    assert _main(tmp_path, *common) == 0
    assert _main(tmp_path, *common, "--lr", "0.5") == 2
    assert "other settings (lr: checkpoint 0.01 != 0.5)" in capsys.readouterr().out
    assert _main(tmp_path, *common, "--checkpoint-interval", "often") == 2
    assert _main(tmp_path, *common, "--notice-signals", "SIGNOPE") == 2
    assert _main(tmp_path, "--model-dir", str(tmp_path / "m2"), "--batch-size", "999") == 2
    with pytest.raises(SystemExit) as info:
        _main(tmp_path, "--checkpoint-every-steps", "2", "--checkpoint-interval", "auto")
    assert info.value.code == 2


def test_state_round_trip_is_exact(tmp_path: Path) -> None:
    cfg = trainer_state.TrainConfig(
        steps=5, seed=1, batch_size=8, lr=0.01, model_dir=tmp_path, samples=64
    )
    state = trainer_state.fresh_state(cfg)
    state.order.next_indices(state.rng)
    state.rng.standard_normal(3)
    state.losses = [0.5, 0.25]
    state.train_seconds = 1.25
    arrays, metadata = trainer_state.to_checkpoint(state, cfg, {})
    ref = checkpoint.save(tmp_path / "c", 2, arrays, metadata)
    restored = trainer_state.from_checkpoint(checkpoint.load(ref), cfg)
    assert restored.rng.bit_generator.state == state.rng.bit_generator.state
    assert (restored.order.epoch, restored.order.index) == (1, 8)
    assert np.array_equal(restored.order.perm, state.order.perm)
    assert restored.losses == [0.5, 0.25] and restored.resumes == 1
    assert restored.train_seconds == 1.25
    assert restored.rng.random() == state.rng.random()


def test_notice_during_a_background_persist_waits_for_it_then_saves(tmp_path: Path) -> None:
    args = _args(
        tmp_path,
        *("--checkpoint-every-steps", "2", "--save-persist-seconds", "0.3"),
        *("--step-seconds", "0.02"),
    )
    code, out = _interrupt(args, at_step=3, sig=signal.SIGTERM, delay=0.0)
    assert code == 143, out
    last = _steps_logged(out)[-1]
    saved = checkpoint.load_latest(tmp_path / "ckpt")
    assert saved.step == last
    # the persist of step 2 finished (and was measured) before the notice save started
    assert "checkpoint at step 2: snapshot, persisting in the background" in out
    assert saved.metadata["policy"]["save_total_s"] >= 0.3
    assert saved.metadata["saved_on_notice"] is (last != 2)
    assert manifests.latest_valid_checkpoint(tmp_path / "ckpt").step == last


@pytest.mark.parametrize("mode", ["async", "blocking"])
def test_policy_explanation_reaches_the_log_and_metrics(tmp_path: Path, capsys, mode: str) -> None:
    common = ("--model-dir", str(tmp_path / "m"), "--checkpoint-dir", str(tmp_path / "c"))
    extra = ("--save-mode", mode, "--save-persist-seconds", "0.02", "--mtbf-seconds", "60")
    assert _main(tmp_path, *common, *extra, "--notice-seconds", "0.5") == 0
    out = capsys.readouterr().out
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    text = metrics["checkpoint_policy"]
    assert text.startswith("notice-first: ") and "0.5 s notice" in text
    assert "checkpoint policy: notice-first: " in out
    if mode == "async":
        assert "checkpoint at step 6: snapshot, persisting in the background" in out
    else:
        assert "saved checkpoint at step 6 in " in out
    saved = checkpoint.load_latest(tmp_path / "c")
    assert saved.step == 6
    policy = saved.metadata["policy"]
    assert policy["measured_saves"] == 0  # the policy state saved is the one before this save
    if mode == "blocking":  # a blocking save measures its whole cost at once
        assert "checkpoint persisted" not in out
    else:
        assert "checkpoint persisted " in out


def test_strategy_flags_are_checked(tmp_path: Path, capsys) -> None:
    common = ("--model-dir", str(tmp_path / "m"))
    assert _main(tmp_path, *common, "--p-notice-fail", "0") == 2
    assert "p_notice_fail must be a probability in (0, 1], got 0.0" in capsys.readouterr().out
    assert _main(tmp_path, *common, "--save-persist-seconds", "-1") == 2
    assert "--save-persist-seconds must be >= 0 seconds, got -1.0" in capsys.readouterr().out
    assert _main(tmp_path, *common, "--checkpoint-strategy", "young-daly") == 0
    assert "checkpoint policy: young-daly: " in capsys.readouterr().out


def test_the_next_process_learns_the_notice_outcomes_from_the_history(tmp_path: Path) -> None:
    args = _args(tmp_path, "--step-seconds", "0.05")
    code, out = _interrupt(args, at_step=3, sig=signal.SIGTERM, delay=0.02)
    assert code == 143, out
    assert "none in the checkpoint history yet" in out
    code, out = _interrupt(args, at_step=8, sig=signal.SIGKILL, delay=0.0)  # no notice
    assert code == -signal.SIGKILL, out
    assert "notice saves resumed from 1, preemptions without one 0" in out
    code, out = _run(args[:-2] + ["--step-seconds", "0"])
    assert code == 0, out
    # p = (0.02 x 50 + 1) / (50 + 2): one of two preemptions had its notice save
    assert "(p = 0.0385: Beta prior centred on 0.02 worth 50 preemptions, updated by the" in out
    assert "notice saves resumed from 1, preemptions without one 1" in out
