"""``vsp emulator start`` keeps the settings saved in its state folder, named absolutely."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from vsp import vertex_emulator
from vsp.pipelines.cli import main
from vsp.vertex_emulator import config

SAVED = config.EmulatorSettings(provisioning_delay_seconds=0.5, slurm_kill_wait_seconds=1.5)


@pytest.fixture
def served(tmp_path, monkeypatch):
    """Runs ``vsp emulator start`` from ``tmp_path`` with ``serve`` recorded, not run."""
    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(
        vertex_emulator,
        "serve",
        lambda state, host, port, settings: calls.append((state, settings)),
    )

    def start(*options: str):
        result = CliRunner().invoke(main.main, ["emulator", "start", "--state-dir", "st", *options])
        assert result.exit_code == 0, result.output
        (call,) = calls[-1:]
        return call

    config.save_settings(tmp_path / "st", SAVED)
    return start


def test_saved_settings_are_kept_and_the_state_dir_is_absolute(served, tmp_path):
    state, settings = served()
    assert state == str(tmp_path / "st")
    assert settings == SAVED


def test_an_option_changes_only_its_own_setting(served):
    _, settings = served("--provisioning-seconds", "7")
    assert settings == SAVED.replace(provisioning_delay_seconds=7.0)
    assert settings.slurm_kill_wait_seconds == 1.5


def test_reset_settings_starts_from_the_defaults(served):
    _, settings = served("--reset-settings")
    assert settings == config.EmulatorSettings()
    _, settings = served("--reset-settings", "--provisioning-seconds", "2")
    assert settings == config.EmulatorSettings(provisioning_delay_seconds=2.0)


def test_a_bad_value_is_a_usage_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main.main, ["emulator", "start", "--state-dir", "st", "--provisioning-seconds", "-1"]
    )
    assert result.exit_code == 2
    assert "setting provisioning_delay_seconds must not be negative" in result.output
    assert "Fix: correct the option, or pass --reset-settings." in result.output


def test_the_server_names_its_state_dir_absolutely(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    server = vertex_emulator.EmulatorServer("relative/state")
    try:
        assert server.state_dir == tmp_path / "relative" / "state"
        assert server.app.state_dir == tmp_path / "relative" / "state"
    finally:
        server.stop()


def test_a_held_state_folder_or_a_taken_port_is_a_user_error_not_a_traceback(tmp_path):
    state = tmp_path / "held"
    with vertex_emulator.EmulatorServer(str(state)) as server:
        held = CliRunner().invoke(main.main, ["emulator", "start", "--state-dir", str(state)])
        port = server.address.rsplit(":", 1)[1]
        taken = CliRunner().invoke(
            main.main, ["emulator", "start", "--state-dir", str(tmp_path / "free"), "--port", port]
        )
    assert held.exit_code == 2, held.output
    assert f"error: state directory {state} is in use by another running emulator" in held.output
    assert held.output.rstrip().endswith("Fix: stop it, or pass another --state-dir.")
    assert taken.exit_code == 2, taken.output
    assert f"error: port {port} on 127.0.0.1 is in use. Fix: pass another --port" in taken.output


def test_a_port_out_of_range_and_a_file_as_compile_folder_are_usage_errors(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    port = CliRunner().invoke(
        main.main, ["emulator", "start", "--state-dir", "st", "--port", "99999"]
    )
    assert port.exit_code == 2
    assert "Invalid value for '--port': 99999 is not in the range 0<=x<=65535." in port.output
    assert not (tmp_path / "st").exists()  # refused before anything was made
    (tmp_path / "afile").write_text("")
    out = CliRunner().invoke(main.main, ["compile", "--out", "afile"])
    assert out.exit_code == 2
    assert "Invalid value for '--out': Directory 'afile' is a file." in out.output
