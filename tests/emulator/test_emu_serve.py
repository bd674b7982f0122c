"""The blocking ``serve`` entry point, run as ``python -m vertex_emulator``, stopped by signal."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pytest
import requests

from vsp.vertex_emulator import server


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_address_and_stops_cleanly(tmp_path, stop_signal):
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vsp.vertex_emulator",
            "--state-dir",
            str(tmp_path),
            "--set",
            "provisioning_delay_seconds=0.5",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first_line = process.stdout.readline().strip()
        name, _, address = first_line.partition("=")
        assert name == "VERTEX_EMULATOR_HOST"
        assert process.stdout.readline().strip() == f"VSP_GCS_FUSE_ROOT={tmp_path / 'gcs'}"
        health = requests.get(f"http://{address}/emulator/v1/health", timeout=5).json()
        assert health == {"status": "ok", "stateDir": str(tmp_path)}
        settings = requests.get(f"http://{address}/emulator/v1/settings", timeout=5).json()
        assert settings["provisioning_delay_seconds"] == 0.5
        runtime = json.loads((tmp_path / server.RUNTIME_FILENAME).read_text())
        assert runtime["address"] == address
        process.send_signal(stop_signal)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert "stopped" in process.stderr.read()
    assert not (tmp_path / server.RUNTIME_FILENAME).exists()
