"""Run identity through kfp.local: two runs of one template never share a job, a checkpoint or
a model version, whatever the pipeline's name and whether it passes ``pipeline_run``.

Both runs have the same parameters (the same model and log folders, no run key) and the second
reuses the cluster the first kept warm. Before, a pipeline that passed no ``pipeline_run`` (the
README's example) made every run ``manual``, and a pipeline name of 49 characters or more cut
kfp's job name to the same label: the second run found the first's finished Slurm job, reported
it as its own training and returned the first's model version.
"""

# No postponed annotations: kfp reads the test pipeline's parameter types at definition time.

import pathlib

import pytest
from kfp import compiler, dsl

from tests.job_log_files import job_log
from tests.pipelines.local import run_arguments
from vsp.components import catalog as component_catalog
from vsp.components import packaging
from vsp.pipelines.definitions import catalog
from vsp.pipelines.local import run

SHORT_TRAINING = ["--steps", "20", "--seed", "7", "--step-seconds", "0.05"]
SUBMIT = "/slurm/v0.0.42/job/submit"
# 60 characters: kfp.local's job name (name + a 26-character timestamp) no longer fits a label.
LONG_NAME = "slurm-spot-training-of-the-recommendation-model-for-europe-x"


def _arguments(tmp_path):
    arguments = catalog.local_arguments("slurm-spot-training", str(tmp_path / "shared"))
    arguments["command"] = [*arguments["command"][:3], *SHORT_TRAINING]
    return run_arguments.with_overrides(arguments, teardown_policy="keep")


def _run(tmp_path, monkeypatch, arguments, name=""):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    return run.run_local(
        "slurm-spot-training",
        arguments,
        state_dir=str(tmp_path / "emulator"),
        pipeline_root=str(tmp_path / "outputs"),
        settings=run.local_settings(0.3),
        in_process=True,
        pipeline_name=name,
    )


def _submitted_jobs(result):
    return [
        e
        for e in result.journal
        if e["path"].endswith(":callSlurmRestApi") and (e.get("body") or {}).get("path") == SUBMIT
    ]


def _two_runs(tmp_path, monkeypatch, name=""):
    arguments = _arguments(tmp_path)
    first = _run(tmp_path, monkeypatch, arguments, name)
    assert first.succeeded, first.error
    second = _run(tmp_path, monkeypatch, arguments, name)
    assert second.succeeded, second.error
    assert second.parameters["create-cluster"]["reused"] is True
    return arguments, first, second


def _assert_two_trainings(arguments, first, second):
    # Two Slurm jobs, each with its own run key and checkpoint folder.
    [job_a] = _submitted_jobs(first)
    [job_b] = _submitted_jobs(second)
    key_a, key_b = (j["body"]["body"]["job"]["name"] for j in (job_a, job_b))
    assert key_a != key_b
    ckpt_a = first.parameters["train-on-cluster"]["checkpoint_dir"]
    ckpt_b = second.parameters["train-on-cluster"]["checkpoint_dir"]
    assert ckpt_a != ckpt_b
    assert ckpt_a.endswith(f"/checkpoints/{key_a}") and ckpt_b.endswith(f"/checkpoints/{key_b}")
    ids_a = first.parameters["train-on-cluster"]["job_ids"]
    ids_b = second.parameters["train-on-cluster"]["job_ids"]
    assert len(ids_a) == len(ids_b) == 1 and ids_a != ids_b
    # Two trainings: each job's own trainer log, and each checkpoint folder trained from step 0.
    logs = pathlib.Path(arguments["training_options"]["log_directory"])
    for job_id, folder in ((*ids_a, ckpt_a), (*ids_b, ckpt_b)):
        text = job_log(logs, job_id).read_text()
        assert "starting from step 0" in text and f"checkpoints: {folder}" in text, text[-800:]
        assert "model written to" in text and "(step 20, verified)" in text
    for folder in (ckpt_a, ckpt_b):
        history = (pathlib.Path(folder) / "history.jsonl").read_text()
        assert '"event": "start"' in history and '"event": "resume"' not in history
    # Two model versions, each labelled with its own run.
    assert first.parameters["register-model"]["version_id"] == "1"
    assert second.parameters["register-model"]["version_id"] == "2"
    assert second.parameters["register-model"]["reused"] is False


@pytest.mark.slow
def test_two_runs_with_the_same_parameters_on_one_warm_cluster_train_twice(tmp_path, monkeypatch):
    arguments, first, second = _two_runs(tmp_path, monkeypatch)
    _assert_two_trainings(arguments, first, second)


@pytest.mark.slow
def test_a_run_token_in_model_dir_gives_each_run_its_own_model_folder(tmp_path, monkeypatch):
    arguments = _arguments(tmp_path)
    shared = arguments["model_dir"]
    arguments["model_dir"] = f"{shared}/{{run}}"
    first = _run(tmp_path, monkeypatch, arguments)
    second = _run(tmp_path, monkeypatch, arguments)
    assert first.succeeded and second.succeeded, (first.error, second.error)
    folders = [r.parameters["train-on-cluster"]["model_dir"] for r in (first, second)]
    assert folders[0] != folders[1] and "{run}" not in "".join(folders)
    runs = [f.removeprefix(f"{shared}/") for f in folders]  # the run's id as a label value
    assert all(r and "/" not in r and r != f for r, f in zip(runs, folders, strict=True)), folders
    for folder in folders:
        assert (pathlib.Path(folder) / "manifest.json").is_file()  # each run's own model
    # Each version points at its own run's folder; the checkpoints sit beside the folders.
    uploads = [
        e["body"]["model"]["artifactUri"]
        for r in (first, second)
        for e in r.journal
        if e["path"].endswith("/models:upload")
    ]
    assert len(uploads) == 2 and uploads[0] != uploads[1]
    assert [u.rsplit("/", 1)[-1] for u in uploads] == [f.rsplit("/", 1)[-1] for f in folders]


@pytest.mark.slow
def test_two_runs_of_a_pipeline_with_a_60_character_name_train_twice(tmp_path, monkeypatch):
    assert len(LONG_NAME) == 60
    arguments, first, second = _two_runs(tmp_path, monkeypatch, LONG_NAME)
    assert pathlib.Path(first.run_dir).name.startswith(LONG_NAME)
    _assert_two_trainings(arguments, first, second)


def _readme_pipeline():
    """The README's pipeline shape, minus the delete: no ``pipeline_run``, no ``task_id``."""
    components = component_catalog.component_set(packaging.PREINSTALLED)
    create_cluster = components["create_cluster"]
    train_on_cluster = components["train_on_cluster"]
    register_model = components["register_model"]

    @dsl.pipeline(name="readme-training")
    def readme_training(
        project: str,
        location: str,
        cluster_id: str,
        network: str,
        subnetwork: str,
        zone: str,
        home_directory_storage: str,
        command: list,
        working_directory: str,
        model_dir: str,
        log_directory: str,
        model_id: str,
        serving_image: str,
    ):
        create = create_cluster(
            project=project, location=location, cluster_id=cluster_id, network=network,
            subnetwork=subnetwork, zone=zone, home_directory_storage=home_directory_storage,
        )  # fmt: skip
        train = train_on_cluster(
            project=project, location=location, cluster_name=create.outputs["cluster_name"],
            command=command, working_directory=working_directory, model_dir=model_dir,
            log_directory=log_directory, poll_seconds=0.5,
        )  # fmt: skip
        register = register_model(
            project=project, location=location, model_id=model_id,
            model_dir=train.outputs["model_dir"], serving_image=serving_image,
        )  # fmt: skip
        for task in (create, train, register):
            task.set_caching_options(False)

    return readme_training


@pytest.mark.slow
def test_two_runs_of_a_pipeline_passing_no_pipeline_run_train_twice(tmp_path, monkeypatch):
    monkeypatch.delenv("VERTEX_EMULATOR_HOST", raising=False)
    template = tmp_path / "readme.yaml"
    compiler.Compiler().compile(_readme_pipeline(), str(template))
    gcs = tmp_path / "emulator" / "gcs" / catalog.LOCAL_BUCKET / "readme"
    arguments = {
        **{k: v for k, v in catalog.LOCAL_CLUSTER.items() if "max_nodes" not in k},
        "command": [
            catalog.local_python(str(tmp_path / "shared")),
            *("-m", "vsp.examples.trainer", *SHORT_TRAINING),
        ],
        "working_directory": str(tmp_path / "work"),
        "model_dir": str(gcs / "model"),
        "log_directory": str(gcs / "logs"),
        "model_id": "readme-model",
        "serving_image": catalog.LOCAL_MODEL["serving_image"],
    }
    outcomes = []
    for _ in range(2):
        outcome = run.run_template(
            template,
            arguments,
            state_dir=str(tmp_path / "emulator"),
            pipeline_root=str(tmp_path / "outputs"),
            settings=run.local_settings(0.3),
            in_process=True,
        )
        assert outcome.succeeded, outcome.error
        outcomes.append(outcome)
    first, second = outcomes
    assert second.parameters["create-cluster"]["reused"] is True
    _assert_two_trainings({"training_options": {"log_directory": str(gcs / "logs")}}, first, second)


@pytest.mark.slow
def test_a_run_token_in_checkpoint_dir_and_log_directory_gives_folders_of_the_run(
    tmp_path, monkeypatch
):
    # They were used as written: a folder named '{run}' that every run of a schedule shared,
    # so each run resumed from the checkpoint of the run before.
    arguments = _arguments(tmp_path)
    options = arguments["training_options"]
    logs = options["log_directory"]
    ckpt = str(tmp_path / "shared" / "ckpt")
    options.update(checkpoint_dir=f"{ckpt}/{{run}}", log_directory=f"{logs}/{{run}}")
    work = arguments["working_directory"]
    arguments["working_directory"] = f"{work}/{{run}}"
    result = _run(tmp_path, monkeypatch, arguments)
    assert result.succeeded, result.error
    folder = result.parameters["train-on-cluster"]["checkpoint_dir"]
    run_value = folder.removeprefix(f"{ckpt}/")
    assert run_value and "/" not in run_value and "{" not in run_value, folder
    history = (pathlib.Path(folder) / "history.jsonl").read_text()
    assert '"event": "start"' in history and '"event": "resume"' not in history
    [job_id] = result.parameters["train-on-cluster"]["job_ids"]
    text = job_log(f"{logs}/{run_value}", job_id).read_text()
    assert f"checkpoints: {folder}" in text
    assert not (tmp_path / "shared" / "ckpt" / "{run}").exists()
    # The job ran in a working directory of the run too (Slurm's line names it).
    assert f"couldn't chdir to `{work}/{run_value}'" in text and "{run}" not in text
