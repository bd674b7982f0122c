"""Step environments of faithful local runs: one base per exact install list, a fresh venv per step.

Vertex AI Pipelines starts every step in a new container of its image, and the step's command
pip-installs what its YAML lists. kfp.local's ``SubprocessRunner(use_venv=True)`` imitates that
by creating a virtual environment per task and letting the command install into it: faithful,
but a venv with pip, a pip upgrade, setuptools and the step's whole install list cost 20-40 s a
step on a 2-core machine, most of a local run.

Here each step still gets a fresh, empty virtual environment of its own, and runs its compiled
command unchanged, install stage included. What changes is where the installed packages come
from: a *base* environment per exact install list (the ``pip install`` commands of the step's
install stage, verbatim, and the interpreter's version), built once by running those same
commands, then never written again. The step's venv sees the base through a ``.pth`` file, so
its install stage finds every requirement satisfied and installs nothing; anything a step does
install lands in its own venv and is gone with it. After every step the base is checked against
the fingerprint taken when it was built (every file's path, size and modification time); a step
that wrote into it fails the run, and the base is rebuilt next time.

Hand-rolled over kfp.local: its task dispatcher picks the task handler by the exact runner type,
and the handler builds its venv in a module-level function without the task's command, so the
only seam is to wrap both for the duration of a run (``patched``), restored afterwards.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import venv
from collections.abc import Iterator

from vsp.components.runtime.core import errors

log = logging.getLogger(__name__)

CACHE_ENV = "VSP_STEP_ENV_CACHE"
_COMPLETE = "vsp-base-complete.json"
_PTH = "vsp_step_base.pth"
_current = threading.local()


def cache_root() -> pathlib.Path:
    """Where the base environments live: ``$VSP_STEP_ENV_CACHE``, else the user's cache."""
    if os.environ.get(CACHE_ENV):
        return pathlib.Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache"
    return pathlib.Path(base) / "vsp" / "step-envs"


def install_commands(full_command: list[str]) -> list[list[str]]:
    """The argument lists of the ``python3 -m pip install`` commands in a step's install stage.

    Args:
        full_command: The step's command and arguments as kfp.local runs them.

    Returns:
        One list per ``pip install`` (the words after ``install``, quotes removed), in order;
        empty for a step without an install stage (a prebuilt image).
    """
    found = []
    for part in full_command:
        if "pip install" not in part:
            continue
        for line in part.splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = list(lexer)
            group: list[str] = []
            for word in [*words, "&&"]:
                if word in ("&&", "||", ";", "|"):
                    if "pip" in group and "install" in group:
                        found.append(group[group.index("install") + 1 :])
                    group = []
                else:
                    group.append(word)
    return found


def base_key(commands: list[list[str]]) -> str:
    """The base environment's key: the install commands and the interpreter's version."""
    text = json.dumps([sys.version, sys.platform, commands], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def _site_packages(prefix: pathlib.Path) -> pathlib.Path:
    relative = pathlib.Path(sysconfig.get_path("purelib")).relative_to(sys.prefix)
    return prefix / relative


def fingerprint(root: pathlib.Path) -> str:
    """A digest of every file under ``root``: relative path, size, modification time."""
    digest = hashlib.sha256()
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = pathlib.Path(folder, name)
            info = path.lstat()
            digest.update(
                f"{path.relative_to(root)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode()
            )
    return digest.hexdigest()


def base_environment(commands: list[list[str]]) -> tuple[pathlib.Path, str]:
    """The base environment for an install list, built on first use (one builder at a time).

    Returns:
        Its site-packages folder, and the fingerprint taken when it was built.

    Raises:
        errors.UserError: pip failed to install the list (names the command and pip's tail).
    """
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    key = base_key(commands)
    prefix = root / key
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        complete = prefix / _COMPLETE
        if complete.is_file():
            recorded = json.loads(complete.read_text())
            site = _site_packages(prefix)
            if fingerprint(site) == recorded["fingerprint"]:
                return site, recorded["fingerprint"]
            log.warning("step base %s was changed after it was built; rebuilding it", key)
        shutil.rmtree(prefix, ignore_errors=True)
        _build(prefix, commands)
        site = _site_packages(prefix)
        printed = fingerprint(site)
        complete.write_text(json.dumps({"commands": commands, "fingerprint": printed}, indent=1))
        return site, printed


def _build(prefix: pathlib.Path, commands: list[list[str]]) -> None:
    log.info("building the step base %s (once per install list)", prefix.name)
    venv.create(prefix, with_pip=True, symlinks=True)
    python = str(prefix / "bin" / "python")
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for arguments in commands:
        done = subprocess.run(
            [python, "-m", "pip", "install", *arguments],
            env=env,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            shutil.rmtree(prefix, ignore_errors=True)
            raise errors.UserError(
                f"pip could not build a step environment: `pip install {shlex.join(arguments)}` "
                f"exited {done.returncode}: {done.stderr.strip()[-800:]}. Fix: check the package "
                "index is reachable (pip's own settings apply), or run with --in-process."
            )
    # Bytecode now, so no step ever needs to write any into the base.
    subprocess.run(
        [python, "-m", "compileall", "-q", str(_site_packages(prefix))],
        env=env,
        capture_output=True,
        check=False,
    )


@contextlib.contextmanager
def step_environment(commands: list[list[str]]) -> Iterator[str]:
    """A fresh virtual environment for one step, seeing the base of ``commands``.

    Yields:
        The step venv's ``python``. The venv is removed afterwards.

    Raises:
        errors.InternalError: The step wrote into the shared base (it is rebuilt next time).
    """
    site, printed = base_environment(commands)
    with tempfile.TemporaryDirectory(prefix="vsp-step-") as folder:
        prefix = pathlib.Path(folder)
        venv.create(prefix, with_pip=False, symlinks=True)
        (_site_packages(prefix) / _PTH).write_text(f"{site}\n")
        yield str(prefix / "bin" / "python")
    if fingerprint(site) != printed:
        (site.parents[2] / _COMPLETE).unlink(missing_ok=True)
        raise errors.InternalError(
            f"a step wrote into the shared step base {site}; it will be rebuilt. Fix: report "
            "this; steps must install only into their own environment."
        )


@contextlib.contextmanager
def patched() -> Iterator[None]:
    """Makes kfp.local's venv runner use ``step_environment`` for every task, for a while."""
    from kfp.local import subprocess_task_handler as handler  # noqa: PLC0415

    original_run = handler.SubprocessTaskHandler.run
    original_environment = handler.environment

    def run(self):  # the task's command, for ``environment`` below (same thread)
        _current.commands = install_commands(self.full_command)
        try:
            return original_run(self)
        finally:
            _current.commands = None

    @contextlib.contextmanager
    def environment(use_venv, runner_config=None, has_pip_install=False):
        commands = getattr(_current, "commands", None)
        if not use_venv or commands is None:
            with original_environment(use_venv, runner_config, has_pip_install) as python:
                yield python
            return
        with step_environment(commands) as python:
            yield python

    handler.SubprocessTaskHandler.run = run
    handler.environment = environment
    try:
        yield
    finally:
        handler.SubprocessTaskHandler.run = original_run
        handler.environment = original_environment
