"""``preflight.check_run``: every later-step problem reported at once, before anything exists."""

from __future__ import annotations

import inspect

import pytest

from vsp.components import catalog
from vsp.components.runtime.core import errors
from vsp.components.runtime.steps import check_run_parameters, run_checks
from vsp.components.runtime.teardown import inputs as teardown_inputs

GOOD_MODEL = {
    "model_id": "digits",
    "serving_image": "us-docker.pkg.dev/p/r/serve:1",
    "model_dir": "gs://bucket/run/model",
    "version_aliases": ["candidate"],
    "labels": {"team": "vision"},
}
GOOD_TEARDOWN = teardown_inputs.TeardownInputs(
    idle_price_per_hour=1.0, provisioning_minutes=20.0, provisioning_price_per_hour=1.0
)


def test_good_parameters_pass():
    run_checks.check_run(GOOD_MODEL, GOOD_TEARDOWN, failure_keep_minutes=60.0)
    run_checks.check_run({**GOOD_MODEL, "model_dir": "/gcs/bucket/run/model"})


def test_every_problem_is_named_with_its_fix():
    model = {
        "model_id": "Digits!",
        "serving_image": " ",
        "model_dir": "/home/run/model",
        "version_aliases": ["ok-alias", "-bad"],
        "labels": {"vsp-run": "x", "Team": "y"},
    }
    bad_teardown = teardown_inputs.TeardownInputs(
        idle_price_per_hour=1.0,
        provisioning_minutes=20.0,
        provisioning_price_per_hour=1.0,
        schedule_cron="every hour",
    )
    with pytest.raises(errors.SpecValidationError) as caught:
        run_checks.check_run(model, bad_teardown, failure_keep_minutes=-5)
    assert caught.value.fields == [
        "model_id",
        "serving_image",
        "version_aliases[1]",
        "model_labels.vsp-run",
        "model_labels.Team",
        "model_dir",
        "schedule_cron",
        "failure_keep_minutes",
    ]
    text = str(caught.value)
    assert "8 problems" in text
    assert "not on Cloud Storage" in text and "Fix: write the model to gs://" in text
    assert "Fix: use 'minute hour day-of-month month day-of-week'" in text


def test_an_unknown_policy_is_reported():
    inputs = teardown_inputs.TeardownInputs(
        idle_price_per_hour=1.0,
        provisioning_minutes=20.0,
        provisioning_price_per_hour=1.0,
        policy="sometimes",
    )
    with pytest.raises(errors.SpecValidationError) as caught:
        run_checks.check_run(GOOD_MODEL, inputs)
    assert caught.value.fields == ["teardown_policy"]  # as the run's parameters name it


def test_the_default_checkpoint_dir_needs_a_folder_above_the_model():
    run_checks.check_run(GOOD_MODEL, checkpoint_dir="")
    run_checks.check_run({**GOOD_MODEL, "model_dir": "gs://bucket/model"}, checkpoint_dir="")
    with pytest.raises(errors.SpecValidationError) as caught:
        run_checks.check_run({**GOOD_MODEL, "model_dir": "gs://bucket"}, checkpoint_dir="")
    assert caught.value.fields == ["checkpoint_dir"]
    assert "Fix: use gs://BUCKET/RUN/model" in str(caught.value)
    # An explicit checkpoint directory needs no folder above the model.
    run_checks.check_run({**GOOD_MODEL, "model_dir": "gs://bucket"}, checkpoint_dir="/home/c")


@pytest.mark.parametrize("minutes", [1e30, float("inf"), 10081])
def test_a_retry_window_beyond_a_week_is_reported_before_anything_exists(minutes):
    # 1e30 minutes once passed this check and crashed the exit task (OverflowError).
    with pytest.raises(errors.SpecValidationError) as caught:
        run_checks.check_run(GOOD_MODEL, GOOD_TEARDOWN, failure_keep_minutes=minutes)
    assert caught.value.fields == ["failure_keep_minutes"]
    assert "from 0 to 10080 (a week)" in str(caught.value)


def component_defaults() -> dict:
    """The check component's defaults: what the step receives for the parameters not set."""
    declaration = catalog.declarations()["check_run_parameters"]
    return {
        name: parameter.default
        for name, parameter in inspect.signature(declaration).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def run_params(training: bool = True, **changes) -> dict:
    """The check's parameters for a run with a valid model (and training, unless asked not)."""
    params = component_defaults() | {
        "model_id": "m1",
        "serving_image": "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest",
        "model_dir": "gs://bucket/run/model",
    }
    if training:
        params |= {
            "check_training": True,
            "command": ["python", "-m", "trainer"],
            "working_directory": "/home/run",
        }
    return params | changes


@pytest.mark.parametrize(
    ("gpus", "count", "spec", "refused"),
    [
        (8, 8, {}, False),
        (4, 8, {}, False),
        (0, 0, {}, False),
        (8, 4, {}, True),
        (1, 0, {}, True),
        (8, 4, {"nodePools": []}, False),  # the full spec gives the nodes: not compared
        (8, -1, {}, False),  # the accelerators are unknown
    ],
)
def test_a_gpu_request_beyond_the_nodes_is_refused_first(gpus, count, spec, refused):
    params = run_params(gpus_per_node=gpus, accelerator_count=count, cluster_spec=spec)
    if not refused:
        assert check_run_parameters.check_component_params(params) is True
        return
    with pytest.raises(errors.UserError) as caught:
        check_run_parameters.check_component_params(params)
    assert str(caught.value) == (
        f"gpus_per_node = {gpus} asks Slurm for more GPUs than a training node has "
        f"(accelerator_count = {count}): the job would never start. Fix: set gpus_per_node to "
        "accelerator_count (every GPU of a node) or fewer; 0 for nodes without GPUs."
    )


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ({"code_uri": "gs://b/code.tar.gz", "code_sha256": "ab" * 32}, None),
        ({"code_uri": "gs://b/code.tar.gz#sha256=" + "ab" * 32}, None),
        ({"code_uri": "gs://b/code.tar.gz"}, "has no sha256"),
        ({"code_uri": "/home/me/code.tar.gz", "code_sha256": "ab" * 32}, "not a package"),
        ({"code_sha256": "ab" * 32}, "code_uri is empty"),
        (
            {"code_uri": "gs://b/c.whl", "code_sha256": "ab" * 32, "code_cache_dir": "rel"},
            "is not absolute",
        ),
    ],
)
def test_staged_code_options_are_checked_by_the_first_step(options, refusal):
    params = component_defaults() | {
        "model_id": "m1",
        "serving_image": "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-5:latest",
        "model_dir": "gs://bucket/run/model",
        "check_training": True,
        "command": ["python", "train.py"],
        "working_directory": "/home/run",
        "training_options": options,
    }
    if refusal is None:
        assert check_run_parameters.check_component_params(params) is True
        return
    with pytest.raises(errors.UserError, match=refusal):
        check_run_parameters.check_component_params(params)


@pytest.mark.parametrize(
    ("machine", "kind", "count", "spec", "field"),
    [
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 8, {}, None),
        ("g2-standard-8", "NVIDIA_H100_80GB", 8, {}, "accelerator_type"),
        ("a3-highgpu-8g", "NVIDIA_H100_80GB", 4, {}, "accelerator_count"),
        ("n2-standard-8", "NVIDIA_TESLA_T4", 1, {}, "accelerator_type"),
        ("g2-standard-8", "", 8, {}, None),  # the pipeline passes no accelerator: not checked
        ("a3-higpu-8g", "NVIDIA_H100_80GB", 8, {}, "machine_type"),  # a typo, not "no price"
        ("a3-highgpu-9g", "", 0, {}, "machine_type"),  # judged without an accelerator too
        ("a3-highgpu-3g", "NVIDIA_H100_80GB", 3, {}, "machine_type"),  # not gpus_per_node too
        ("g2-standard-8", "NVIDIA_H100_80GB", 8, {"nodePools": []}, None),  # the spec rules
    ],
)
def test_a_machine_without_the_accelerators_is_refused_before_the_cluster(
    machine, kind, count, spec, field
):
    params = run_params(
        training=False,
        machine_type=machine,
        accelerator_type=kind,
        accelerator_count=count,
        cluster_spec=spec,
    )
    if field is None:
        assert check_run_parameters.check_component_params(params) is True
        return
    with pytest.raises(errors.SpecValidationError) as caught:
        check_run_parameters.check_component_params(params)
    assert caught.value.fields == [field]
    assert machine in str(caught.value) and "Fix:" in str(caught.value)


def test_the_gpus_per_node_the_machine_cannot_give_are_named_with_the_accelerator():
    params = run_params(
        machine_type="g2-standard-8",
        accelerator_type="NVIDIA_H100_80GB",
        accelerator_count=8,
        gpus_per_node=8,
    )
    with pytest.raises(errors.SpecValidationError) as caught:
        check_run_parameters.check_component_params(params)
    assert caught.value.fields == ["accelerator_type", "gpus_per_node"]
    assert "set gpus_per_node to 1 or fewer" in str(caught.value)


@pytest.mark.parametrize(
    ("nodes", "spot", "spec", "problem"),
    [
        (1, 2, {}, None),
        (2, 2, {}, None),
        (1, 0, {}, "no Spot pool"),
        (3, 2, {}, "fewer than the training job's 3"),
        (3, 0, {"nodePools": []}, None),  # the full spec gives the partitions: not compared
    ],
)
def test_a_training_job_larger_than_the_spot_pool_is_refused_first(nodes, spot, spec, problem):
    params = run_params(nodes=nodes, spot_max_nodes=spot, cluster_spec=spec)
    if problem is None:
        assert check_run_parameters.check_component_params(params) is True
        return
    with pytest.raises(errors.SpecValidationError) as caught:
        check_run_parameters.check_component_params(params)
    assert caught.value.fields == ["spot_max_nodes"]
    assert problem in str(caught.value)
    assert f"Fix: set spot_max_nodes to at least nodes ({nodes})" in str(caught.value)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"launcher": "mpirun"}, "training_options.launcher"),
        ({"tasks_per_node": 0}, "training_options.tasks_per_node"),
        ({"nccl_env_file": "relative/x.sh"}, "training_options.nccl_env_file"),
        ({"launcher": "torchrun", "tasks_per_node": 8}, None),
    ],
)
def test_launch_options_are_checked_before_the_cluster(options, field):
    assert refused_fields(run_params(training_options=options)) == ([field] if field else [])


def refused_fields(params: dict) -> list[str]:
    """The fields the check refuses in ``params`` ([] when it passes)."""
    try:
        assert check_run_parameters.check_component_params(params) is True
    except errors.SpecValidationError as exc:
        return exc.fields
    return []


PLACE = {
    "network": "default",
    "zone": "us-central1-a",
    "home_directory_storage": "projects/p/locations/us-central1-a/instances/home",
}
SLURM_GROUPS = {"cluster_options": ["network", "zone", "home_directory_storage", "cluster_id"]}


@pytest.mark.parametrize(
    ("options", "spec", "fields"),
    [
        (PLACE, {}, []),
        ({}, {}, [f"cluster_options.{name}" for name in PLACE]),
        ({**PLACE, "zone": " "}, {}, ["cluster_options.zone"]),
        ({}, {"nodePools": []}, []),  # the full spec gives the cluster
    ],
)
def test_a_cluster_without_its_network_zone_or_home_is_refused_first(options, spec, fields):
    params = run_params(cluster_options=options, cluster_spec=spec, option_names=SLURM_GROUPS)
    assert refused_fields(params) == fields


def test_a_missing_network_is_named_with_an_example():
    params = run_params(cluster_options={}, option_names=SLURM_GROUPS)
    with pytest.raises(errors.SpecValidationError) as caught:
        check_run_parameters.check_component_params(params)
    assert str(caught.value.problems[0]) == (
        "cluster_options.network = <missing>: is needed to create the cluster: the VPC network "
        'the nodes join. Fix: give it, e.g. "default" or projects/P/global/networks/N.'
    )


def test_a_pipeline_without_cluster_options_is_not_asked_for_them():
    assert check_run_parameters.check_component_params(run_params(cluster_options={})) is True
