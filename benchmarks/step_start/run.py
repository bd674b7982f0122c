"""Per-step start time: a stock Python image with pip installs vs the prebuilt step image.

For each compiled component (``compiled/components/*.yaml``) this measures what happens before
the step's function runs:

* **stock**: a fresh virtual environment (as kfp.local's venv runner makes one; on Vertex, a new
  ``python:3.11-slim`` container), then the template's own install stage, unchanged but for the
  interpreter path, with an empty pip cache and only the public package index (as a new
  container has), then loading the step's program as kfp's executor does;
* **prebuilt**: an environment built once as ``image/Dockerfile`` builds the image
  (``requirements/runtime.lock`` with ``--require-hashes``, then the project wheel), where (1)
  the stock template's install stage runs with every requirement already satisfied and (2) the
  template compiled with ``vsp compile --base-image`` (no install stage at all) loads its
  program.

Also measured: ``register_model`` as compiled before its ``google.VertexModel`` type was
embedded (installing google-cloud-pipeline-components), from the git revision given by
``--before``. Seconds are wall time on this machine, including the package index's latency;
MB are what pip reports downloading (its "Downloading NAME (SIZE)" lines; its cache is empty
at start) and the bytes added to the environment.
Run: ``nice -n 10 python -m benchmarks.step_start.run`` (a few minutes; needs PyPI).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import tempfile
import time
import venv

import yaml

from benchmarks.step_start import report
from vsp.components import packaging

REPO = pathlib.Path(__file__).resolve().parents[2]
COMPILED = REPO / "src" / "vsp" / "compiled" / "components"
MB = 1024 * 1024
PREBUILT_IMAGE = "REGION-docker.pkg.dev/PROJECT/REPO/vsp-step:TAG"
_DOWNLOADING = re.compile(r"^\s*Downloading \S+ \(([\d.]+) (kB|MB|GB|bytes)\)", re.MULTILINE)
_UNIT_MB = {"bytes": 1 / MB, "kB": 1000 / MB, "MB": 1000**2 / MB, "GB": 1000**3 / MB}
_LOAD = (
    "import runpy, sys\n"
    "namespace = runpy.run_path(sys.argv[1])\n"
    "assert callable(namespace[sys.argv[2]]), sys.argv[2]\n"
)


def size_mb(path: pathlib.Path) -> float:
    """Total size of the files under ``path``, in MB."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            file = pathlib.Path(folder, name)
            if not file.is_symlink():
                total += file.stat().st_size
    return total / MB


def clean_environment(env_dir: pathlib.Path, cache_dir: pathlib.Path) -> dict[str, str]:
    """The environment of a new container: the venv first on PATH, the public index only, an
    empty pip cache."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k not in drop
    }
    environment.update(
        PATH=f"{env_dir / 'bin'}{os.pathsep}{environment.get('PATH', '')}",
        PIP_CONFIG_FILE=os.devnull,
        PIP_CACHE_DIR=str(cache_dir),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        # Cancels the templates' --quiet, so pip prints what it downloads.
        PIP_VERBOSE="1",
        _KFP_RUNTIME="true",
    )
    return environment


def downloaded_mb(pip_output: str) -> float:
    """MB pip says it downloaded, from its ``Downloading NAME (SIZE)`` lines."""
    return sum(float(n) * _UNIT_MB[unit] for n, unit in _DOWNLOADING.findall(pip_output))


def timed(command: list[str], environment: dict[str, str], cwd: pathlib.Path) -> tuple[float, str]:
    """Runs ``command``; its wall time in seconds and its output.

    Raises:
        RuntimeError: The command failed (its output's tail is in the message).
    """
    started = time.perf_counter()
    done = subprocess.run(
        command, env=environment, cwd=cwd, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{command[:3]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed, done.stdout + done.stderr


def load_step(name: str, text: str) -> dict[str, str]:
    """A compiled component's install stage (``''`` when it has none) and program."""
    spec = yaml.safe_load(text)
    [container] = [e["container"] for e in spec["deploymentSpec"]["executors"].values()]
    command = container["command"]
    install = command[2] if command[:2] == ["sh", "-c"] else ""
    (stage,) = [i for i, part in enumerate(command) if "ephemeral_component.py" in part]
    runtime = "".join(command[stage + 2 :])
    return {"name": name, "install": install, "program": command[stage + 1], "runtime": runtime}


def run_install(
    step: dict, python: pathlib.Path, env: dict, cwd: pathlib.Path
) -> tuple[float, float]:
    """The step's install stage as the container runs it, then ``python -c pass``: seconds
    and MB downloaded."""
    stage = step["install"].replace("python3", str(python))
    seconds, output = timed(["sh", "-c", stage, str(python), "-c", "pass"], env, cwd)
    return seconds, downloaded_mb(output)


def load_program(step: dict, python: pathlib.Path, env: dict, cwd: pathlib.Path) -> float:
    """Seconds to load the step's program as kfp's executor does (imports, archive unpack)."""
    folder = cwd / f"{step['name']}_program"
    folder.mkdir(exist_ok=True)
    (folder / packaging.RUNTIME_FILE).write_text(step["runtime"])  # as the shell stage does
    program = folder / "ephemeral_component.py"
    program.write_text(step["program"])
    return timed([str(python), "-c", _LOAD, str(program), step["name"]], env, cwd)[0]


def measure_stock(step: dict, work: pathlib.Path) -> dict:
    """Fresh venv + the template's pip install (empty cache) + program load."""
    env_dir, cache = work / "venv", work / "pip-cache"
    cache.mkdir(parents=True)
    started = time.perf_counter()
    venv.create(env_dir, with_pip=True)
    venv_seconds = time.perf_counter() - started
    empty_mb = size_mb(env_dir)
    environment = clean_environment(env_dir, cache)
    python = env_dir / "bin" / "python"
    install_seconds, downloaded = run_install(step, python, environment, work)
    load_seconds = load_program(step, python, environment, work)
    return {
        "venv_s": round(venv_seconds, 2),
        "install_s": round(install_seconds, 2),
        "load_s": round(load_seconds, 2),
        "start_s": round(venv_seconds + install_seconds + load_seconds, 2),
        "downloaded_mb": round(downloaded, 1),
        "installed_mb": round(size_mb(env_dir) - empty_mb, 1),
    }


def build_prebuilt(work: pathlib.Path) -> tuple[pathlib.Path, dict]:
    """An environment built as image/Dockerfile builds the image; its build figures."""
    env_dir, cache, wheels = work / "image", work / "image-cache", work / "dist"
    cache.mkdir(parents=True)
    venv.create(env_dir, with_pip=True)
    empty_mb = size_mb(env_dir)
    environment = clean_environment(env_dir, cache)
    python = env_dir / "bin" / "python"
    lock = REPO / "requirements" / "runtime.lock"
    pip = [str(python), "-m", "pip", "install", "--no-cache-dir"]
    lock_seconds = timed([*pip, "--require-hashes", "-r", str(lock)], environment, work)[0]
    wheel_seconds = timed(
        [str(python), "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(REPO)],
        environment,
        work,
    )[0]
    [wheel] = wheels.glob("*.whl")
    wheel_seconds += timed([*pip, "--no-deps", str(wheel)], environment, work)[0]
    return python, {
        "lock_install_s": round(lock_seconds, 1),
        "wheel_build_install_s": round(wheel_seconds, 1),
        "installed_mb": round(size_mb(env_dir) - empty_mb, 1),
    }


def prebuilt_steps() -> dict[str, dict]:
    """Each component compiled for a prebuilt image (``vsp compile --base-image``)."""
    from vsp.components import catalog, packaging  # noqa: PLC0415 - kfp import is slow

    options = packaging.ImageOptions(base_image=PREBUILT_IMAGE, install_packages=False)
    steps = {}
    for name, component in catalog.component_set(options).items():
        command = component.component_spec.implementation.container.command
        assert command[:2] != ["sh", "-c"], f"{name}: a prebuilt template installs nothing"
        steps[name] = {"name": name, "install": "", "program": command[-1]}
    return steps


def measure_prebuilt(stock: dict, prebuilt: dict, python, work: pathlib.Path) -> dict:
    """In the prebuilt environment: the stock install stage (all satisfied) and the prebuilt
    template's program load."""
    cache = work / "noop-cache"
    cache.mkdir(parents=True)
    environment = clean_environment(python.parent.parent, cache)
    noop_seconds, noop_downloaded = run_install(stock, python, environment, work)
    load_seconds = load_program(prebuilt, python, environment, work)
    return {
        "stock_install_noop_s": round(noop_seconds, 2),
        "stock_install_noop_downloaded_mb": round(noop_downloaded, 2),
        "load_s": round(load_seconds, 2),
        "start_s": round(load_seconds, 2),
    }


def machine() -> str:
    return (
        f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}, {platform.platform()}"
    )


def run(steps: list[str], before: str) -> dict:
    """Every measurement; the results document."""
    stock_steps = {
        path.stem: load_step(path.stem, path.read_text())
        for path in sorted(COMPILED.glob("*.yaml"))
        if not steps or path.stem in steps
    }
    prebuilt = prebuilt_steps()
    rows = []
    with tempfile.TemporaryDirectory(prefix="vsp-step-start-") as tmp:
        root = pathlib.Path(tmp)
        python, image = build_prebuilt(root / "prebuilt")
        for name, step in stock_steps.items():
            print(f"step {name} ...", flush=True)
            rows.append(
                {
                    "step": name,
                    "stock": measure_stock(step, root / name),
                    "prebuilt": measure_prebuilt(step, prebuilt[name], python, root / name),
                }
            )
        old = None
        if before:
            text = subprocess.run(
                ["git", "show", f"{before}:compiled/components/register_model.yaml"],
                cwd=REPO, capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            print(f"register_model as of {before} ...", flush=True)
            old = {
                "revision": before,
                "stock": measure_stock(load_step("register_model", text), root / "before"),
            }
    return {
        "benchmark": "step_start",
        "machine": machine(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "prebuilt_image": image,
        "steps": rows,
        "register_model_before": old,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    parser.add_argument("--steps", nargs="*", default=[], help="Only these components.")
    parser.add_argument(
        "--before",
        default="861ceee",
        help="Git revision whose register_model template installs GCPC ('' to skip).",
    )
    parser.add_argument(
        "--report-only", action="store_true", help="Rewrite the Markdown from the JSON."
    )
    args = parser.parse_args(argv)
    out = pathlib.Path(args.out)
    if args.report_only:
        results = json.loads((out / "step_start.json").read_text())
        (out / "step_start.md").write_text(report.markdown(results))
        return 0
    results = run(args.steps, args.before)
    out.mkdir(parents=True, exist_ok=True)
    (out / "step_start.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "step_start.md").write_text(report.markdown(results))
    print(f"wrote {out / 'step_start.json'} and {out / 'step_start.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
