"""Step environments of faithful local runs: a fresh venv per step over a base built once.

Offline: the install lists here name small wheels written by the test (``--no-index``).
"""

from __future__ import annotations

import base64
import hashlib
import pathlib
import subprocess
import zipfile

import pytest

from tests.components import compiled_steps
from vsp.components.runtime.core import errors
from vsp.pipelines.local import step_envs


def tiny_wheel(folder: pathlib.Path, name: str) -> pathlib.Path:
    """A one-module wheel ``name`` (its module says ``NAME = name``)."""
    files = {
        f"{name}.py": f"NAME = {name!r}\n".encode(),
        f"{name}-1.0.dist-info/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
        ),
        f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-1.0.dist-info/RECORD,,")
    files[f"{name}-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


@pytest.fixture
def cache(tmp_path, monkeypatch) -> pathlib.Path:
    root = tmp_path / "cache"
    monkeypatch.setenv(step_envs.CACHE_ENV, str(root))
    return root


def imports(python: str, module: str) -> bool:
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True)
    return done.returncode == 0


def test_the_install_commands_are_read_from_the_compiled_install_stage():
    step = compiled_steps.CompiledStep.load("register_model")
    commands = step_envs.install_commands([*step.command, *step.args])
    assert [c[-1] for c in commands] == [
        "croniter>=2,<8",
        'typing-extensions>=3.7.4,<5; python_version<"3.9"',
    ]
    assert commands[0][:2] == ["--quiet", "--no-warn-script-location"]
    assert "kfp==2.17.3" in commands[1] and "--no-deps" in commands[1]
    flat = [word for command in commands for word in command]
    assert sorted(set(flat) & set(step.requirements())) == sorted(step.requirements())
    assert step_envs.install_commands(["sh", "-c", "echo no installs"]) == []


@pytest.mark.slow
def test_what_a_step_installs_stays_in_its_own_venv(tmp_path, cache):
    base_wheel = tiny_wheel(tmp_path, "vsp_probe_base")
    step_wheel = tiny_wheel(tmp_path, "vsp_probe_step")
    commands = [["--no-index", "--no-deps", str(base_wheel)]]
    with step_envs.step_environment(commands) as first:
        assert imports(first, "vsp_probe_base")
        installed = subprocess.run(
            [first, "-m", "pip", "install", "--no-index", "--no-deps", str(step_wheel)],
            capture_output=True,
            text=True,
        )
        assert installed.returncode == 0, installed.stderr
        assert imports(first, "vsp_probe_step")
        # The step's own install stage, run again: every requirement is already there.
        again = subprocess.run(
            [first, "-m", "pip", "install", *commands[0]], capture_output=True, text=True
        )
        assert "is already installed" in again.stdout, again.stdout
    (key,) = [p.name for p in cache.iterdir() if p.is_dir()]
    marker = cache / key / "vsp-base-complete.json"
    built = marker.stat().st_mtime_ns
    with step_envs.step_environment(commands) as second:
        assert second != first
        assert imports(second, "vsp_probe_base")
        assert not imports(second, "vsp_probe_step")
    assert not pathlib.Path(first).exists()
    assert marker.stat().st_mtime_ns == built, "the base was built once and reused"


@pytest.mark.slow
def test_a_step_that_writes_into_the_base_fails_and_the_base_is_rebuilt(tmp_path, cache):
    commands = [["--no-index", "--no-deps", str(tiny_wheel(tmp_path, "vsp_probe_base"))]]
    with pytest.raises(errors.InternalError, match="wrote into the shared step base"):
        with step_envs.step_environment(commands) as python:
            site = subprocess.run(
                [python, "-c", "import vsp_probe_base; print(vsp_probe_base.__file__)"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            pathlib.Path(site).with_name("leaked.py").write_text("x = 1\n")
    (key,) = [p.name for p in cache.iterdir() if p.is_dir()]
    assert not (cache / key / "vsp-base-complete.json").exists()
    with step_envs.step_environment(commands) as python:
        assert not imports(python, "leaked")
    assert (cache / key / "vsp-base-complete.json").exists()


@pytest.mark.slow
def test_a_failed_base_install_names_the_command(tmp_path, cache):
    commands = [["--no-index", "vsp-no-such-package==9"]]
    with pytest.raises(errors.UserError, match="vsp-no-such-package==9") as caught:
        with step_envs.step_environment(commands):
            pass
    assert "Fix:" in str(caught.value)
    assert not [p for p in cache.iterdir() if p.is_dir()], "no half-built base is left"
