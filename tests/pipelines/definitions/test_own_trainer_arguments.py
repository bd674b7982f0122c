"""`vsp run-local --param command=...`: a user's own trainer is not registered with the example
trainer's data and code versions."""

from __future__ import annotations

from vsp.pipelines.definitions import catalog


def test_the_examples_provenance_goes_with_its_command(tmp_path):
    defaults = catalog.local_arguments("slurm-spot-training", str(tmp_path))
    assert defaults["model_options"] == {
        "data_version": "synthetic-seed-7",
        "code_version": "vsp.examples.trainer",
    }
    own = {"command": ["vsp-python", "/work/train.py"]}
    arguments = catalog.without_example_provenance({**defaults, **own}, own)
    assert arguments["model_options"] == {}
    assert arguments["command"] == own["command"]
    assert {k: v for k, v in arguments.items() if k != "model_options"} == {
        k: v for k, v in {**defaults, **own}.items() if k != "model_options"
    }
    given = {**own, "model_options": {"code_version": "linreg-v2"}}
    kept = catalog.without_example_provenance({**defaults, **given}, given)
    assert kept["model_options"] == {"code_version": "linreg-v2"}


def test_top_level_versions_are_dropped_unless_given(tmp_path):
    defaults = catalog.local_arguments("spot-custom-job-training", str(tmp_path))
    assert defaults["code_version"] == "vsp.examples.trainer"
    own = {"command": ["python", "train.py"]}
    arguments = catalog.without_example_provenance({**defaults, **own}, own)
    assert "code_version" not in arguments and "data_version" not in arguments
    given = {**own, "data_version": "2026-12-05"}
    kept = catalog.without_example_provenance({**defaults, **given}, given)
    assert kept["data_version"] == "2026-12-05" and "code_version" not in kept


def test_python_first_runs_the_interpreter_vsp_runs_in(tmp_path):
    for word in ("python", "python3"):
        command = catalog.with_local_interpreter(
            [word, "/w/train.py", "--steps", "9"], str(tmp_path)
        )
        launcher = tmp_path / "bin" / "vsp-python"
        assert command == [str(launcher), "/w/train.py", "--steps", "9"]
        assert "python3" not in command[0]  # kfp.local rewrites that word in parameter values
    own = ["/opt/venv/bin/python", "/w/train.py"]
    assert catalog.with_local_interpreter(own, str(tmp_path)) == own
    assert catalog.with_local_interpreter("python train.py", str(tmp_path)) == "python train.py"
