"""`vsp run-local` on an emulator started apart, and the local run's preemption settings."""

from __future__ import annotations

import json
import os
import socket

import pytest
from click.testing import CliRunner

from vsp.components.runtime.core import errors, gcs_paths
from vsp.pipelines.cli import main
from vsp.pipelines.local import emulator_session, run

SHORT = ["python", "-m", "vsp.examples.trainer", "--steps", "20", "--step-seconds", "0.02"]


@pytest.mark.slow
def test_a_run_on_an_emulator_started_apart_keeps_its_files_in_that_emulators_folder(
    emulator_factory, tmp_path, monkeypatch
):
    apart = emulator_factory(tmp_path / "apart")  # VERTEX_EMULATOR_HOST names it
    monkeypatch.delenv(gcs_paths.GCS_FUSE_ROOT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main.main,
        [
            "run-local",
            "--in-process",
            "--state-dir",
            "mine",
            "--preemptions",
            "2",
            "--param",
            f"command={json.dumps(SHORT)}",
        ],
    )
    assert result.exit_code == 0, result.output
    assert (
        "warning: --preemptions set the emulator that run-local starts itself, and none is "
        "started: the emulator VERTEX_EMULATOR_HOST names keeps its own settings"
    ) in result.output
    models = list((apart.state_dir / "gcs").rglob("model.npz"))
    assert len(models) == 1, result.output
    assert f"  model files: {models[0].parent}\n" in result.output
    assert "injected preemptions: the external emulator's own" in result.output
    assert not (tmp_path / "mine" / "gcs").exists()
    assert gcs_paths.GCS_FUSE_ROOT_ENV not in os.environ  # restored after the run


def test_an_emulator_that_does_not_answer_is_named_with_the_fix(monkeypatch):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("VERTEX_EMULATOR_HOST", f"127.0.0.1:{port}")
    with pytest.raises(errors.UserError) as caught:
        emulator_session.external_state_dir()
    message = str(caught.value)
    assert message.startswith(f"the emulator named by VERTEX_EMULATOR_HOST=127.0.0.1:{port} did")
    assert "Fix: start it with `vsp emulator start --state-dir DIR`" in message


def test_the_notice_and_the_unannounced_share_reach_the_emulator_settings():
    settings = run.local_settings(3.0, 2, 2.5, notice_seconds=5.0, unannounced_share=0.25)
    assert settings.slurm_preempt_notice_seconds == 5.0
    assert settings.custom_job_preempt_notice_seconds == 5.0
    assert settings.slurm_spot_preempt_unannounced_share == 0.25
    assert run.local_settings().slurm_preempt_notice_seconds == 1.0


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--unannounced-share", "1.5", "unannounced share 1.5: it is a share of the preemptions"),
        ("--notice-seconds", "-1", "notice of -1.0 s: it cannot be negative"),
        ("--preemptions", "-2", "Invalid value for '--preemptions': -2 is not in the range x>=0"),
        ("--preempt-after", "-1", "'--preempt-after': -1.0 is not in the range x>=0"),
        ("--provisioning-seconds", "-3", "'--provisioning-seconds': -3.0 is not in the range"),
    ],
)
def test_a_bad_preemption_setting_is_refused_before_anything_starts(
    tmp_path, monkeypatch, option, value, says
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    result = CliRunner().invoke(main.main, ["run-local", option, value])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Fix:" in result.output
    assert not (tmp_path / ".vsp" / "emulator" / "journal.jsonl").exists()  # no request


@pytest.mark.parametrize(
    ("owner", "fix"),
    [
        (
            "vsp emulator start",
            "let this run use it (VERTEX_EMULATOR_HOST={address}), stop it, or pass another "
            "--state-dir.",
        ),
        # Not its address: a run that used it hung once that run ended, its emulator with it.
        (emulator_session.OWNER, "wait for that run to end, or pass another --state-dir."),
    ],
)
def test_a_state_folder_another_emulator_holds_is_a_user_error_naming_the_fixes(
    tmp_path, owner, fix
):
    from vsp import vertex_emulator
    from vsp.components.runtime.core import errors

    state = tmp_path / "state"
    with vertex_emulator.EmulatorServer(str(state), owner=owner) as server:
        address = server.address
        with pytest.raises(errors.UserError) as caught:
            with emulator_session.emulator_for_run(str(state), None):
                pass
    assert str(caught.value) == (
        f"state directory {state} is in use by another running emulator ({owner}, pid "
        f"{os.getpid()}, at {address}). Fix: {fix.format(address=address)}"
    )
