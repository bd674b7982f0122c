"""Staged code and container images in the batch script, run for real with bash.

The generated script runs as Slurm would start it (its environment from the request), with
``VSP_GCS_FUSE_ROOT`` pointing at a folder standing in for Cloud Storage. The venv is built by
the machine's ``python3`` from the package's requirements (a wheel named by path, so no index
is needed).
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import code_packages
import pytest
from slurm_fakes import make_job

from vsp.components.runtime.core import errors
from vsp.components.runtime.slurm import code_stage, container_run
from vsp.components.runtime.slurm import script as slurm_script


def stage_package(tmp_path: pathlib.Path, version: str, name: str = "code.tar.gz"):
    """The trainer tarball of ``version`` at gs://bucket/NAME (a file under tmp/gcs)."""
    tarball, sha = code_packages.trainer_tarball(tmp_path / "pkg", version)
    target = tmp_path / "gcs" / "bucket" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(tarball.read_bytes())
    return f"gs://bucket/{name}", sha


def job(tmp_path, code=None, *, command=("python", "train.py"), **changes):
    env = {
        "VSP_GCS_FUSE_ROOT": str(tmp_path / "gcs"),
        "VSP_MODEL_DIR": str(tmp_path / "model"),
        "HOME": str(tmp_path / "home"),
    }
    return make_job(
        working_directory=str(tmp_path / "work"),
        command=list(command),
        environment=env,
        code=code,
        **changes,
    )


def run(desc: slurm_script.JobDescription, tmp_path: pathlib.Path, name: str = "job"):
    return start(desc, tmp_path, name).communicate(timeout=240)


def start(desc: slurm_script.JobDescription, tmp_path: pathlib.Path, name: str = "job"):
    script = tmp_path / f"{name}.sh"
    script.write_text(desc.batch_script())
    env = dict(item.split("=", 1) for item in desc.environment_list())
    return subprocess.Popen(
        ["/bin/bash", str(script)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def builds(cache: pathlib.Path) -> list[pathlib.Path]:
    return sorted(cache.glob(".build-*"))


@pytest.mark.slow  # builds a venv with pip / runs real jobs: seconds each
def test_a_job_unpacks_the_code_builds_its_venv_runs_it_and_the_next_job_reuses_it(tmp_path):
    uri, sha = stage_package(tmp_path, "1")
    desc = job(tmp_path, code_stage.CodeStage(uri, sha))
    process = start(desc, tmp_path)
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err
    cache = tmp_path / "home" / ".vsp" / "code"  # $HOME/.vsp/code by default
    link = cache / sha
    assert link.is_symlink() and builds(cache) == [pathlib.Path(os.readlink(link))]
    assert (link / ".vsp-ready").is_file()
    build = link.resolve()  # the trainer's getcwd() names the build folder the link points to
    assert f"code version 1 (vspdep 1.0, cwd {build}/src, python {link}/venv/bin/python" in out
    assert f"sha256 {sha})" in out
    assert (tmp_path / "model" / "model.npz").read_bytes() == b"trained by code 1"
    assert f"staging {uri} into {link}" in err
    venv = (link / "venv" / "pyvenv.cfg").stat()

    process = start(desc, tmp_path, "again")
    out, err = process.communicate(timeout=240)
    assert process.returncode == 0, err
    assert f"code {sha}: reusing {link}" in err and "staging" not in err
    assert "code version 1" in out
    assert (link / "venv" / "pyvenv.cfg").stat().st_mtime_ns == venv.st_mtime_ns
    assert len(builds(cache)) == 1


def test_a_changed_object_is_refused_by_the_job_and_leaves_nothing(tmp_path):
    uri, sha = stage_package(tmp_path, "1")
    _, other = code_packages.trainer_tarball(tmp_path / "other", "2")
    cache = tmp_path / "cache"
    desc = job(tmp_path, code_stage.CodeStage(uri, other, cache_dir=str(cache)))
    process = start(desc, tmp_path)
    out, err = process.communicate(timeout=60)
    assert process.returncode == code_stage.STAGE_FAILED
    assert f"{uri} has sha256 {sha}, not the pinned {other}: not running it" in err
    assert "code version" not in out
    assert list(cache.iterdir()) == []


@pytest.mark.slow  # builds a venv with pip / runs real jobs: seconds each
def test_two_jobs_staging_one_digest_at_once_both_run_and_one_build_stays(tmp_path):
    uri, sha = stage_package(tmp_path, "1")
    cache = tmp_path / "cache"
    desc = job(tmp_path, code_stage.CodeStage(uri, sha, cache_dir=str(cache)))
    processes = [start(desc, tmp_path, f"job{i}") for i in range(2)]
    results = [p.communicate(timeout=240) for p in processes]
    assert [p.returncode for p in processes] == [0, 0], results
    assert all("code version 1" in out for out, _ in results)
    assert builds(cache) == [pathlib.Path(os.readlink(cache / sha))]
    assert sorted(p.name for p in (cache / sha).iterdir()) == [".vsp-ready", "src", "venv"]


@pytest.mark.slow  # builds a venv with pip / runs real jobs: seconds each
def test_a_wheel_is_installed_into_its_own_venv(tmp_path):
    wheel = code_packages.wheel(
        tmp_path / "w", "vspwheel", "2.5", {"vspwheel/__init__.py": "", "vspwheel/__main__.py":
        "import sys, vspwheel; print('wheel runs from', vspwheel.__file__, sys.prefix)\n"},
    )  # fmt: skip
    target = tmp_path / "gcs" / "bucket" / wheel.name
    target.parent.mkdir(parents=True)
    target.write_bytes(wheel.read_bytes())
    sha = code_packages.hashlib.sha256(wheel.read_bytes()).hexdigest()
    cache = tmp_path / "cache"
    code = code_stage.CodeStage(f"gs://bucket/{wheel.name}", sha, cache_dir=str(cache))
    out, err = run(job(tmp_path, code, command=("python", "-m", "vspwheel")), tmp_path)
    link = cache / sha
    assert (link / "src" / wheel.name).is_file(), err
    assert f"wheel runs from {link}/venv/lib/" in out
    assert out.strip().endswith(f"{link}/venv")


@pytest.mark.slow  # builds a venv with pip / runs real jobs: seconds each
def test_hostile_uri_and_cache_dir_are_quoted(tmp_path):
    name = "$(touch PWNED) `touch PWNED2` 'q' \"d\";x.tar.gz"
    uri, sha = stage_package(tmp_path, "7", name)
    cache = tmp_path / "ca$(touch PWNED3)che dir"
    desc = job(tmp_path, code_stage.CodeStage(uri, sha, cache_dir=str(cache)))
    out, err = run(desc, tmp_path)
    assert "code version 7" in out, err
    assert (cache / sha / ".vsp-ready").is_file()
    assert not list(tmp_path.rglob("PWNED*"))


@pytest.mark.parametrize(
    ("uri", "sha", "cache"),
    [
        ("https://x/code.tar.gz", "a" * 64, ""),
        ("gs://b/code.zip", "a" * 64, ""),
        ("gs://b/code.tar.gz#sha256=" + "a" * 64, "a" * 64, ""),
        ("gs://b/code.tar.gz", "A" * 64, ""),
        ("gs://b/code.tar.gz", "a" * 63, ""),
        ("gs://b/code.tar.gz", "a" * 64, "relative/dir"),
    ],
)
def test_code_stage_refuses_bad_values(uri, sha, cache):
    with pytest.raises(ValueError):
        code_stage.CodeStage(uri, sha, cache)


def write_fake_srun(folder: pathlib.Path, with_pyxis: bool) -> None:
    """An ``srun`` that lists pyxis' option in --help (or not) and runs the command after its
    options, recording them."""
    folder.mkdir()
    help_line = "--container-image=IMAGE  [pyxis] the image" if with_pyxis else "--help"
    (folder / "srun").write_text(
        "#!/bin/bash\n"
        f'if [ "$1" = --help ]; then echo {help_line!r}; exit 0; fi\n'
        'printf "%s\\n" "$@" > "$SRUN_ARGS"\n'
        'while [ "${1#--}" != "$1" ]; do shift; done\n'
        'exec "$@"\n'
    )
    (folder / "srun").chmod(0o755)


@pytest.mark.parametrize("with_pyxis", [True, False])
def test_container_image_runs_the_payload_through_srun_only_where_pyxis_is(tmp_path, with_pyxis):
    bin_dir = tmp_path / "bin"
    write_fake_srun(bin_dir, with_pyxis)
    marker = tmp_path / "ran"
    desc = make_job(
        working_directory=str(tmp_path / "work"),
        command=[sys.executable, "-c", f"open({str(marker)!r}, 'w').write('in')"],
        environment={
            "PATH": f"{bin_dir}:{slurm_script.DEFAULT_PATH}",
            "SRUN_ARGS": str(tmp_path / "args"),
            "VSP_GCS_FUSE_ROOT": str(tmp_path / "gcs"),
        },
        container_image="nvcr.io#nvidia/pytorch:24.08-py3",
    )
    out, err = run(desc, tmp_path)
    if not with_pyxis:
        assert "has no --container-image (no pyxis): not starting the payload" in err
        assert not marker.exists()
        return
    assert marker.read_text() == "in", err
    work = tmp_path / "work"
    assert (tmp_path / "args").read_text().splitlines()[:4] == [
        "--container-image=nvcr.io#nvidia/pytorch:24.08-py3",
        "--container-mount-home",
        f"--container-mounts={work}:{work},{tmp_path / 'gcs'}:{tmp_path / 'gcs'}",
        f"--container-workdir={work}",
    ]


def test_container_image_with_staged_code_is_refused():
    code = code_stage.CodeStage("gs://b/c.tar.gz", "a" * 64)
    with pytest.raises(errors.SpecValidationError, match="container_image"):
        make_job(code=code, container_image="img:1")


def test_fake_srun_exit_code_without_pyxis_is_the_documented_one(tmp_path):
    write_fake_srun(tmp_path / "bin", with_pyxis=False)
    desc = make_job(
        working_directory=str(tmp_path / "work"),
        command=["true"],
        environment={"PATH": f"{tmp_path / 'bin'}:{slurm_script.DEFAULT_PATH}"},
        container_image="img:1",
    )
    process = start(desc, tmp_path)
    process.communicate(timeout=30)
    assert process.returncode == container_run.NO_PYXIS
